"""Loads the user's file fresh and finds and validates its provider functions."""

import difflib
import importlib
import inspect
import os
import sys
import types

from . import compat, environment
from .errors import ScriptControl, TraceError, TraceInterrupted, ValuesNeeded, error_at, format_exception, one_line

ENTRY_MODULE_NAME = "__wavecast_entry__"

# Accepted names per provider role, preferred first (DeepView and Skyline names
# work unchanged).
PROVIDER_NAMES = {
    "model": ("wavecast_model", "deepview_model_provider", "skyline_model_provider"),
    "input": ("wavecast_input", "deepview_input_provider", "skyline_input_provider"),
    "iteration": (
        "wavecast_iteration",
        "deepview_iteration_provider",
        "skyline_iteration_provider",
    ),
}

_EXAMPLES = {
    "model": "def wavecast_model():\n    return MyModel()",
    "input": "def wavecast_input(batch_size=32):\n    return (torch.randn(batch_size, ...),)",
    "iteration": (
        "def wavecast_iteration(model):\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    def iteration(*inputs):\n"
        "        optimizer.zero_grad()\n"
        "        model(*inputs).sum().backward()\n"
        "        optimizer.step()\n"
        "    return iteration"
    ),
}


class Providers:
    def __init__(self, module, model, input_, iteration):
        self.module = module
        self.model = model
        self.input = input_
        self.iteration = iteration
        self.default_batch_size = _default_batch_size(input_)

    def lines(self):
        return {
            "model": _def_line(self.model),
            "input": _def_line(self.input),
            "iteration": _def_line(self.iteration),
        }


def project_modules(project):
    """{name: file} of the modules in sys.modules loaded from the project, but the entry."""
    loaded = {}
    for name, module in list(sys.modules.items()):
        filename = getattr(module, "__file__", None)
        if name != ENTRY_MODULE_NAME and filename and project.contains(filename):
            loaded[name] = filename
    return loaded


def purge_project_modules(project, kept=None):
    """Drops the entry module and the modules loaded from the project so edits are seen.

    kept: a reuse.ProjectModules the worker keeps between traces; while none of the
    project modules it recorded changed, they stay loaded (only the entry runs again).
    Returns whether they stayed.
    """
    loaded = project_modules(project)
    keep = kept is not None and kept.unchanged(project.root, loaded)
    sys.modules.pop(ENTRY_MODULE_NAME, None)
    if not keep:
        for name in list(loaded) + (kept.other_projects(project.root) if kept is not None else []):
            sys.modules.pop(name, None)
        if kept is not None:
            kept.forget()
    importlib.invalidate_caches()
    return keep


def load_entry_module(project, name=ENTRY_MODULE_NAME, during="while loading the script"):
    """Runs the entry file as module `name` ("__main__": as `python file.py` would)."""
    path = project.entry_file
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        raise TraceError(
            "missing_file",
            f"cannot read {path}: {exc.strerror}",
            file=path,
            hint="Check the path of the training script.",
        ) from None
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise TraceError(
            "syntax_error",
            f"SyntaxError: {exc.msg}",
            file=exc.filename or path,
            line=exc.lineno or 0,
            hint="Fix the syntax error; the script is traced again on the next save.",
            traceback=format_exception(exc),
        ) from None

    module = types.ModuleType(name)
    module.__file__ = path
    # First on the path, as for `python file.py`: a worker that traced another project
    # before has that one's folder on it too, and its `utils` must not be found first.
    if project.folder in sys.path:
        sys.path.remove(project.folder)
    sys.path.insert(0, project.folder)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except SyntaxError as exc:  # raised while importing one of the project's modules
        raise TraceError(
            "syntax_error",
            f"SyntaxError: {exc.msg}",
            file=exc.filename or path,
            line=exc.lineno or 0,
            hint="Fix the syntax error; the script is traced again on the next save.",
            traceback=format_exception(exc),
        ) from None
    except ImportError as exc:
        message, hint = environment.missing_module(exc, project.root) or environment.missing_name(exc) or (
            one_line(exc),
            "Install the missing package in the Python environment wavecast uses, "
            "or select a virtual environment that has it.",
        )
        raise error_at("import_error", message, exc, project, hint, fallback_file=path) from None
    except (TraceInterrupted, ScriptControl, MemoryError):
        raise
    except BaseException as exc:  # noqa: B902 - any failure of user code is reported
        raise user_exception(exc, project, during) from None
    return module


# The tracer's own package: an error whose message quotes its code (TorchScript compiling
# one of its stand-ins) is the tracer's, not the script's.
_TRACER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_exception(exc, project, during):
    if compat.is_value_dependent_error(exc):
        return ValuesNeeded.raised(exc, project, compat.OWN_CODE_DIRS)
    if _TRACER_DIR in str(exc):
        hint = ("The message quotes wavecast's own code: the script met one of the tracer's stand-ins for "
                "torch, a fault of wavecast's, not of the script. Please report it with this message.")
    else:
        hint = getattr(exc, "hint", "Fix the exception raised in your script at the line shown.")
    return error_at("user_exception", f"{one_line(exc)} ({during})", exc, project, hint)


def find_providers(module, project):
    found = {role: _find_provider(module, project, role) for role in PROVIDER_NAMES}
    _check_no_required_args(found["model"], "model", project)
    _check_input_signature(found["input"], project)
    _check_iteration_signature(found["iteration"], project)
    return Providers(module, found["model"], found["input"], found["iteration"])


def _find_provider(module, project, role):
    for name in PROVIDER_NAMES[role]:
        fn = module.__dict__.get(name)
        if fn is None:
            continue
        if not callable(fn):
            raise TraceError(
                "bad_provider_signature",
                f"`{name}` must be a function, not {type(fn).__name__}",
                file=project.entry_file,
                line=_assignment_line(project.entry_file, name),
                hint="Define it as:\n" + _EXAMPLES[role],
            )
        return fn

    defined = {
        name: value
        for name, value in module.__dict__.items()
        if callable(value) and not name.startswith("__")
    }
    wanted = PROVIDER_NAMES[role]
    for name, value in defined.items():
        close = difflib.get_close_matches(name, wanted, n=1, cutoff=0.8)
        if close:
            raise TraceError(
                "missing_provider",
                f"no {role} provider: `{name}` looks like a misspelling of `{close[0]}`",
                file=project.entry_file,
                line=_def_line(value) or 1,
                hint=f"Rename `{name}` to `{close[0]}`.",
            )
    raise TraceError(
        "missing_provider",
        f"no {role} provider: define `{wanted[0]}` in {os.path.basename(project.entry_file)}",
        file=project.entry_file,
        line=1,
        hint="Add:\n" + _EXAMPLES[role],
    )


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _bad_signature(fn, role, project, message):
    return TraceError(
        "bad_provider_signature",
        message,
        file=_def_file(fn) or project.entry_file,
        line=_def_line(fn),
        hint="Expected:\n" + _EXAMPLES[role],
    )


def _check_no_required_args(fn, role, project):
    sig = _signature(fn)
    if sig is None:
        return
    required = [
        p.name
        for p in sig.parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if required:
        raise _bad_signature(
            fn,
            role,
            project,
            f"`{fn.__name__}` must take no arguments, but requires {', '.join(required)}",
        )


def _check_input_signature(fn, project):
    sig = _signature(fn)
    if sig is None:
        return
    params = sig.parameters
    accepts_batch = "batch_size" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
    if not accepts_batch:
        raise _bad_signature(
            fn,
            "input",
            project,
            f"`{fn.__name__}` must accept a `batch_size` keyword argument",
        )
    others = [
        p.name
        for p in params.values()
        if p.name != "batch_size"
        and p.default is p.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if others:
        raise _bad_signature(
            fn,
            "input",
            project,
            f"`{fn.__name__}` may only require `batch_size`, but also requires {', '.join(others)}",
        )


def _check_iteration_signature(fn, project):
    sig = _signature(fn)
    if sig is None:
        return
    try:
        sig.bind(object())
    except TypeError:
        raise _bad_signature(
            fn,
            "iteration",
            project,
            f"`{fn.__name__}` must take exactly one argument, the model returned by the model provider",
        ) from None


def _default_batch_size(fn):
    sig = _signature(fn)
    if sig is None:
        return None
    param = sig.parameters.get("batch_size")
    if param is None or param.default is param.empty:
        return None
    return param.default if isinstance(param.default, int) else None


def _unwrap_code(fn):
    fn = inspect.unwrap(fn) if callable(fn) else fn
    return getattr(fn, "__code__", None)


def _def_line(fn):
    code = _unwrap_code(fn)
    return code.co_firstlineno if code else 0


def _def_file(fn):
    code = _unwrap_code(fn)
    return code.co_filename if code else ""


def _assignment_line(path, name):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, text in enumerate(f, 1):
                if text.startswith(name):
                    return number
    except OSError:
        pass
    return 1
