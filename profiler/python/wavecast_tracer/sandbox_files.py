"""The file system as a script run in the sandbox (sandbox.py) sees it. Every change the
script makes lands in a copy of the path under the sandbox folder, made from the user's
file first where the change keeps its content (append, update, utime, chmod); deletions
are recorded. The user's files are never changed.

A path reads its copy where the script wrote one; it is gone where the script deleted it
or a folder above it (and wrote no copy since); otherwise it is the user's file. A folder
lists the user's entries, less those gone, and the copies. The working directory stays
the script's, so relative data paths read the user's files.

Paths inside the sandbox folder pass through unchanged: the standard library's helpers
(os.makedirs, shutil.copy2, rmtree of a copy) reach the copies through the replaced
functions. A file descriptor or `dir_fd` names its path through /proc/self/fd.
"""

import builtins
import errno
import io
import os
import shutil
import stat
import sys

# The functions as the sandbox found them: its own work on its folder uses these.
_open, _os_open, _stat, _lstat, _listdir, _scandir = builtins.open, os.open, os.stat, os.lstat, os.listdir, os.scandir
_mkdir, _remove, _rmdir, _replace, _link, _symlink = os.mkdir, os.remove, os.rmdir, os.replace, os.link, os.symlink
_readlink, _access, _chdir = os.readlink, os.access, os.chdir
_rmtree, _copy2, _copytree = shutil.rmtree, shutil.copy2, shutil.copytree
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Modules that keep the `open` they found when imported (`from builtins import open as
# bltn_open`); one imported during a trace keeps the sandbox's, which hands off after it.
_KEEP_OPEN = (("tarfile", "bltn_open"), ("bz2", "_builtin_open"))


def _error(kind, number, path):
    return kind(number, os.strerror(number), path if isinstance(path, int) else os.fsdecode(path))


def _status(path):
    try:
        return _lstat(path)
    except OSError:
        return None


def _isdir(path):
    try:
        return stat.S_ISDIR(_stat(path).st_mode)
    except OSError:
        return False


def _dir_fd(dir_fd):
    return {} if dir_fd is None else {"dir_fd": dir_fd}


def _make_folders(path):
    """os.makedirs(path, exist_ok=True) without the functions the sandbox replaces."""
    if not path or _isdir(path):
        return
    _make_folders(os.path.dirname(path))
    try:
        _mkdir(path)
    except FileExistsError:
        pass


class ShadowFiles:
    """One trace's copies and deletions, and the replacements that use them."""

    def __init__(self, folder):
        self.folder = folder
        self.deleted = set()  # absolute paths the script removed
        # Whether the script has written, made or deleted anything yet: until it has, every
        # path reads as itself. Reads are most calls (each os.path.realpath is an lstat per
        # part, and the tracer asks it of every frame's file), so they skip the lookups.
        self.changed = False

    # --- where a path is -----------------------------------------------------------
    def _full(self, path, dir_fd=None):
        """`path` as an absolute str path (a descriptor's own path; relative to the folder
        open as `dir_fd`)."""
        if isinstance(path, int):
            return _readlink(f"/proc/self/fd/{path}")
        path = os.fsdecode(path)
        if dir_fd is not None and not os.path.isabs(path):
            path = os.path.join(_readlink(f"/proc/self/fd/{dir_fd}"), path)
        return os.path.abspath(path)

    def _inside(self, full):
        return full == self.folder or full.startswith(self.folder + os.sep)

    def _copy(self, full):
        return self.folder + full

    def _gone(self, full):
        """Whether the script deleted `full` or a folder above it."""
        while self.deleted:
            if full in self.deleted:
                return True
            parent = os.path.dirname(full)
            if parent == full:
                return False
            full = parent
        return False

    def _view(self, full):
        """The path that holds `full` as the script sees it, or None where there is none."""
        copy = self._copy(full)
        if _status(copy) is not None:
            return copy
        return None if self._gone(full) or _status(full) is None else full

    def _seen(self, full, path):
        view = self._view(full)
        if view is None:
            raise _error(FileNotFoundError, errno.ENOENT, path)
        return view

    def _writable(self, full, path, keep=False):
        """The copy of `full` to change, its folders made; with `keep` it starts as the
        file the script sees (a folder's copy starts empty: listing it shows both)."""
        copy = self._copy(full)
        if self._through_link(copy):
            raise _error(PermissionError, errno.EACCES, path)
        self.changed = True
        _make_folders(os.path.dirname(copy))
        view = self._view(full) if keep and _status(copy) is None else None
        if view is not None and _isdir(view):
            _mkdir(copy)
        elif view is not None:
            _copy2(view, copy)
        return copy

    def _through_link(self, copy):
        """Whether changing `copy` would follow a symbolic link the script made out of the
        sandbox folder (to the user's file it points at)."""
        path = copy
        while path != self.folder:
            status = _status(path)
            if status is not None and stat.S_ISLNK(status.st_mode):
                if not self._inside(os.path.normpath(os.path.join(os.path.dirname(path), _readlink(path)))):
                    return True
            path = os.path.dirname(path)
        return False

    def _names(self, full, path):
        """The entries of the folder `full` as the script sees them: (name, DirEntry source
        folder) for the copies, then the user's that are not gone."""
        view = self._seen(full, path)
        if not _isdir(view):
            raise _error(NotADirectoryError, errno.ENOTDIR, path)
        copy = self._copy(full)
        names = {name: copy for name in (_listdir(copy) if _isdir(copy) else ())}
        if not self._gone(full) and _isdir(full):
            for name in _listdir(full):
                if name not in names and not self._gone(os.path.join(full, name)):
                    names[name] = full
        return names

    def _untouched(self, full):
        """Whether the folder `full` is the user's as it is: no copy, nothing deleted."""
        return not _isdir(self._copy(full)) and not self._gone(full) and \
            not any(d.startswith(full + os.sep) for d in self.deleted)

    # --- the replacements ----------------------------------------------------------
    def replacements(self):
        """(owner, attribute, replacement) for each function that reaches the file system."""
        reading = [(os, name, self._reading(getattr(os, name)))
                   for name in ("stat", "lstat", "readlink", "listxattr", "getxattr", "statvfs", "pathconf")
                   if hasattr(os, name)]
        changing = [(os, name, self._changing(getattr(os, name)))
                    for name in ("utime", "chmod", "chown", "lchown", "truncate", "setxattr", "removexattr")
                    if hasattr(os, name)]
        kept_open = [(sys.modules[module], name, self.open) for module, name in _KEEP_OPEN if module in sys.modules]
        return [
            (builtins, "open", self.open), (io, "open", self.open),
            (os, "open", self.os_open), (os, "access", self.access), (os, "listdir", self.listdir),
            (os, "scandir", self.scandir), (os, "mkdir", self.mkdir), (os, "remove", self.remove),
            (os, "unlink", self.remove), (os, "rmdir", self.rmdir), (os, "rename", self.rename),
            (os, "replace", self.rename), (os, "link", self.link), (os, "symlink", self.symlink),
            (shutil, "rmtree", self.rmtree), (os, "chdir", self.chdir), *reading, *changing, *kept_open,
        ]

    def readable(self, path):
        """The path that holds `path` as the script sees it, for code that reads files
        without Python's functions (pyarrow's memory maps): its copy where the script wrote
        one, else itself."""
        if not self.changed or not isinstance(path, (str, bytes, os.PathLike)):
            return path
        full = self._full(path)
        return path if self._inside(full) else self._seen(full, path)

    def writable(self, path):
        """The copy of `path` to change, for such code that writes it (starting as the file
        the script sees)."""
        full = self._full(path)
        return path if self._inside(full) else self._writable(full, path, keep=True)

    def open(self, file, mode="r", *args, **kwargs):
        reads = not any(c in mode for c in "wax+")
        if not isinstance(file, (str, bytes, os.PathLike)) or (reads and not self.changed):
            return _open(file, mode, *args, **kwargs)
        full = self._full(file)
        if self._inside(full):
            return _open(file, mode, *args, **kwargs)
        if reads:
            return _open(self._seen(full, file), mode, *args, **kwargs)
        if "x" in mode and self._view(full) is not None:
            raise _error(FileExistsError, errno.EEXIST, file)
        keep = "a" in mode or ("r" in mode and "+" in mode)
        if keep and "r" in mode:
            self._seen(full, file)
        return _open(self._writable(full, file, keep), mode, *args, **kwargs)

    def os_open(self, path, flags, mode=0o777, *, dir_fd=None):
        if not self.changed and not flags & _WRITE_FLAGS:
            return _os_open(path, flags, mode, **_dir_fd(dir_fd))
        full = self._full(path, dir_fd)
        if self._inside(full):
            return _os_open(path, flags, mode, **_dir_fd(dir_fd))
        if not flags & _WRITE_FLAGS:
            return _os_open(self._seen(full, path), flags, mode)
        if flags & os.O_CREAT and flags & os.O_EXCL and self._view(full) is not None:
            raise _error(FileExistsError, errno.EEXIST, path)
        return _os_open(self._writable(full, path, keep=not flags & os.O_TRUNC), flags, mode)

    def _reading(self, real):
        """`real` (stat, lstat, readlink, getxattr) of the path as the script sees it."""
        def read(path, *args, dir_fd=None, **kwargs):
            if not self.changed:
                return real(path, *args, **_dir_fd(dir_fd), **kwargs)
            if isinstance(path, int):
                return real(path, *args, **kwargs)
            full = self._full(path, dir_fd)
            if self._inside(full):
                return real(path, *args, **_dir_fd(dir_fd), **kwargs)
            return real(self._seen(full, path), *args, **kwargs)

        return read

    def chdir(self, path):
        """Into the user's folder where it exists (its files read as themselves), else
        into the copy of one the script made."""
        if not self.changed or isinstance(path, int):
            return _chdir(path)
        full = self._full(path)
        if self._inside(full) or (not self._gone(full) and _isdir(full)):
            return _chdir(path)
        return _chdir(self._seen(full, path))

    def access(self, path, mode, *, dir_fd=None, **kwargs):
        if not self.changed or isinstance(path, int) or self._inside(self._full(path, dir_fd)):
            return _access(path, mode, **_dir_fd(dir_fd), **kwargs)
        view = self._view(self._full(path, dir_fd))
        return view is not None and _access(view, mode, **kwargs)

    def _changing(self, real):
        """`real` (utime, chmod, chown, truncate, setxattr) applied to the sandbox copy."""
        def change(path, *args, dir_fd=None, **kwargs):
            full = self._full(path, dir_fd)
            if self._inside(full):
                return real(path, *args, **_dir_fd(dir_fd), **kwargs)
            self._seen(full, path)
            return real(self._writable(full, path, keep=True), *args, **kwargs)

        return change

    def listdir(self, path="."):
        if not self.changed or isinstance(path, int) or self._inside(self._full(path)):
            return _listdir(path)
        names = list(self._names(self._full(path), path))
        return [os.fsencode(name) for name in names] if isinstance(path, bytes) else names

    def scandir(self, path="."):
        if (not self.changed or isinstance(path, (int, bytes)) or self._inside(self._full(path))
                or self._untouched(self._full(path))):
            return _scandir(path)
        full = self._full(path)
        folders = set(self._names(full, path).items())
        entries = [_Entry(entry, path) for folder in {folder for _, folder in folders}
                   for entry in _scandir(folder) if (entry.name, folder) in folders]
        return _Listing(entries)

    def mkdir(self, path, mode=0o777, *, dir_fd=None):
        full = self._full(path, dir_fd)
        if self._inside(full):
            return _mkdir(path, mode, **_dir_fd(dir_fd))
        if self._view(full) is not None:
            raise _error(FileExistsError, errno.EEXIST, path)
        if not _isdir(self._view(os.path.dirname(full)) or ""):
            raise _error(FileNotFoundError, errno.ENOENT, path)
        return _mkdir(self._writable(full, path), mode)

    def remove(self, path, *, dir_fd=None):
        full = self._full(path, dir_fd)
        if self._inside(full):
            return _remove(path, **_dir_fd(dir_fd))
        if stat.S_ISDIR(_lstat(self._seen(full, path)).st_mode):
            raise _error(IsADirectoryError, errno.EISDIR, path)
        self._delete(full)

    def rmdir(self, path, *, dir_fd=None):
        full = self._full(path, dir_fd)
        if self._inside(full):
            return _rmdir(path, **_dir_fd(dir_fd))
        if self._names(full, path):
            raise _error(OSError, errno.ENOTEMPTY, path)
        self._delete(full)

    def rmtree(self, path, ignore_errors=False, *args, **kwargs):
        full = self._full(path, kwargs.get("dir_fd"))
        if self._inside(full):
            return _rmtree(path, ignore_errors, *args, **kwargs)
        view = self._view(full)
        if view is None or not _isdir(view):
            if ignore_errors:
                return None
            if view is None:
                raise _error(FileNotFoundError, errno.ENOENT, path)
            raise _error(NotADirectoryError, errno.ENOTDIR, path)
        self._delete(full)

    def _delete(self, full):
        self.changed = True
        copy = self._copy(full)
        status = _status(copy)
        if status is not None:
            (_rmtree if stat.S_ISDIR(status.st_mode) else _remove)(copy)
        self.deleted.add(full)

    def rename(self, src, dst, *, src_dir_fd=None, dst_dir_fd=None):
        source, target = self._full(src, src_dir_fd), self._full(dst, dst_dir_fd)
        if self._inside(source) and self._inside(target):
            return _replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        view = self._seen(source, src)
        copy = self._writable(target, dst)
        if _isdir(view):
            # Through the replaced functions: a folder the script changed is part copies.
            _copytree(source, copy, symlinks=True)
        elif self._inside(view):
            _replace(view, copy)
        else:
            _copy2(view, copy, follow_symlinks=False)
        self._delete(source)

    def link(self, src, dst, *, src_dir_fd=None, dst_dir_fd=None, follow_symlinks=True):
        """A copy: a hard link to the user's file would share its bytes."""
        source, target = self._full(src, src_dir_fd), self._full(dst, dst_dir_fd)
        if self._inside(source) and self._inside(target):
            return _link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks)
        view = self._seen(source, src)
        if self._view(target) is not None:
            raise _error(FileExistsError, errno.EEXIST, dst)
        copy = self._writable(target, dst)
        if self._inside(view):
            return _link(view, copy)
        return _copy2(view, copy)

    def symlink(self, src, dst, target_is_directory=False, *, dir_fd=None):
        """A link in the sandbox folder. A relative one to a copy is made as given (the
        folder mirrors the user's paths); any other points at its target as the script
        sees it now, the user's file or a copy."""
        link = self._full(dst, dir_fd)
        if self._inside(link):
            return _symlink(src, dst, target_is_directory, **_dir_fd(dir_fd))
        if self._view(link) is not None:
            raise _error(FileExistsError, errno.EEXIST, dst)
        pointed = os.path.normpath(os.path.join(os.path.dirname(link), os.fsdecode(src)))
        view = self._view(pointed) or pointed
        kept = not os.path.isabs(os.fsdecode(src)) and self._inside(view)
        return _symlink(src if kept else view, self._writable(link, dst), target_is_directory)


class _Entry:
    """A DirEntry of a copy or of the user's folder, with the path the script listed."""

    def __init__(self, entry, folder):
        self._entry = entry
        self.name = entry.name
        self.path = os.path.join(folder, entry.name)

    def __getattr__(self, name):
        return getattr(self._entry, name)

    def __fspath__(self):
        return self.path


class _Listing:
    """What os.scandir returns: an iterator that is also a context manager."""

    def __init__(self, entries):
        self._entries = iter(entries)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._entries)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass
