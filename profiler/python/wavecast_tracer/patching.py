"""Patches a trace makes to the process and undoes after it: the worker traces again and
again in one process, so each is restored (or removed) however the trace ends."""

import contextlib
import functools
import os
import sys

_MISSING = object()


@contextlib.contextmanager
def attributes_set(owner, values):
    """While active, `owner`'s attributes `values` ({name: value}) are set; each is put back
    (or removed, where `owner` had none) afterwards."""
    saved = {name: getattr(owner, name, _MISSING) for name in values}
    try:
        for name, value in values.items():
            setattr(owner, name, value)
        yield
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                if hasattr(owner, name):
                    delattr(owner, name)
            else:
                setattr(owner, name, value)


@contextlib.contextmanager
def variables_set(values):
    """While active, the process's environment variables `values` ({name: text}) are set;
    each is restored (or removed) afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def replace_while_active(record, owner, name, replacement, active):
    """Sets `owner.name` to `replacement`, and passes `record` the function that sets it
    back. A module first imported meanwhile may keep the replacement (`from os.path
    import exists`): called when `active()` is false, it hands off to whatever
    `owner.name` is then (the original, or a later trace's replacement)."""
    current = getattr(owner, name)
    # A class's inherited attribute is deleted again rather than set on the class.
    saved = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else current

    @functools.wraps(current)
    def replaced(*args, **kwargs):
        if active():
            return replacement(*args, **kwargs)
        now = getattr(owner, name)
        return (current if now is replaced else now)(*args, **kwargs)

    setattr(owner, name, replaced)
    record(lambda: delattr(owner, name) if saved is _MISSING else setattr(owner, name, saved))


class _PatchingLoader:
    """A module's loader that calls `loaded(module)` once the module has run, and is the
    loader in every other way (importlib.resources asks it for the package's files)."""

    def __init__(self, loader, loaded):
        self._loader = loader
        self._loaded = loaded

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._loaded(module)


class PatchOnImport:
    """Patches a module as soon as it is imported (or at once when it already is), and
    undoes every patch on leaving. `active()` says whether it is in force (for patches
    made with `replace_while_active`)."""

    def __init__(self, patches):
        self._patches = patches
        self._undo = []
        self._done = set()
        self._installed = False

    def active(self):
        return self._installed

    def _loaded(self, name, module):
        sys.modules[name] = module
        self._apply(name)

    def _apply(self, name):
        module = sys.modules.get(name)
        if module is not None and name not in self._done:
            self._done.add(name)
            self._patches[name](module, self._undo)

    def find_spec(self, name, path=None, target=None):
        if name not in self._patches or name in self._done:
            return None
        finder = self

        for other in sys.meta_path:
            if other is self:
                continue
            spec = getattr(other, "find_spec", lambda *a: None)(name, path, target)
            if spec is not None:
                spec.loader = _PatchingLoader(spec.loader, lambda module: finder._loaded(name, module))
                return spec
        return None

    @contextlib.contextmanager
    def installed(self):
        try:
            sys.meta_path.insert(0, self)
            self._installed = True
            for name in self._patches:
                self._apply(name)
            yield
        finally:
            self._installed = False
            sys.meta_path.remove(self)
            with contextlib.ExitStack() as stack:  # every undo runs, even after one fails
                for undo in self._undo:
                    stack.callback(undo)
