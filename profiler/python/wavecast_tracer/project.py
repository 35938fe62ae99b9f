"""Which source files belong to the user's project."""

import dis
import inspect
import os
import sys
import sysconfig

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_LIBRARY_MARKERS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
# What marks a folder as a repository's or a Python project's top.
_ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
# The tracer's functions that run the user's code: the frames that called them (the worker,
# or a test in the same repository) are not the user's.
_ENTRIES = frozenset({"load_entry_module", "_call_provider", "_call_user"})
_VARARGS_AND_KEYWORDS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
_CALL_UNPACKING = dis.opmap.get("CALL_FUNCTION_EX")


def forwards_its_arguments(frame):
    """Whether `frame` is a wrapper handing its *args and **kwargs on at the call it is
    making (`return fn(*args, **kwargs)`: a decorator's inner function, torchtitan's forward
    that redistributes a module's inputs): the work below it is the wrapped callable's,
    the line that called the wrapper's."""
    code = frame.f_code
    return (code.co_flags & _VARARGS_AND_KEYWORDS == _VARARGS_AND_KEYWORDS
            and 0 <= frame.f_lasti < len(code.co_code) and code.co_code[frame.f_lasti] == _CALL_UNPACKING)


def _interpreter_dirs():
    """The running Python's standard library and install folders: never the user's code,
    wherever they live (a conda install under a home folder kept in git)."""
    paths = sysconfig.get_paths()
    return tuple(os.path.abspath(paths[key]).rstrip(os.sep) + os.sep
                 for key in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(key))


# Never the user's code: the tracer's own package and the interpreter's folders.
_NOT_USER_CODE = (_PACKAGE_DIR + os.sep, *_interpreter_dirs())


def repository_root(folder):
    """The nearest folder at or above `folder` that a repository or Python project starts
    in (_ROOT_MARKERS), below the home folder and the file system's root; else `folder`.
    A script under scripts/ or projects/x/ imports its model from a package beside them."""
    home = os.path.abspath(os.path.expanduser("~"))
    current = folder
    while True:
        if current in (home, os.path.dirname(current)):
            return folder
        if any(os.path.exists(os.path.join(current, marker)) for marker in _ROOT_MARKERS):
            return current
        current = os.path.dirname(current)


class Project:
    """The user's code: the repository the entry file is in (repository_root), minus
    installed packages and the interpreter's own files inside it. `folder` is the entry
    file's: first on sys.path and the working directory, as for `python file.py` there."""

    def __init__(self, entry_file):
        self.entry_file = os.path.abspath(entry_file)
        self.folder = os.path.dirname(self.entry_file)
        self.root = repository_root(self.folder)
        self._prefix = self.root.rstrip(os.sep) + os.sep
        self._cache = {}

    def contains(self, filename):
        known = self._cache.get(filename)
        if known is not None:
            return known
        # Not a relative name: a compiled extension's source as Cython records it
        # ("pyarrow/error.pxi") would read as one in the working directory.
        path = os.path.normpath(filename) if filename and os.path.isabs(filename) else ""
        inside = (
            path.startswith(self._prefix)
            and not path.startswith(_NOT_USER_CODE)
            and not any(marker in path for marker in _LIBRARY_MARKERS)
        )
        self._cache[filename] = inside
        return inside

    def site(self):
        """(file, line) of the innermost project frame running now, past wrappers that
        forward their arguments (forwards_its_arguments) where another is outside them;
        ("", 0) outside."""
        frame = sys._getframe(1)
        wrapper = None
        while frame is not None and not enters_user_code(frame.f_code):
            if self.contains(frame.f_code.co_filename):
                if not forwards_its_arguments(frame):
                    return frame.f_code.co_filename, frame.f_lineno
                wrapper = wrapper or (frame.f_code.co_filename, frame.f_lineno)
            frame = frame.f_back
        return wrapper or ("", 0)


def enters_user_code(code):
    """Whether `code` is the tracer's call into the user's code: a stack walk outward from
    the user's code ends there."""
    return code.co_name in _ENTRIES and code.co_filename.startswith(_PACKAGE_DIR + os.sep)
