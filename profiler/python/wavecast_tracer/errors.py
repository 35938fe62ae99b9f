"""Structured, user-actionable errors (docs/trace-format.md "Errors")."""

import traceback as _traceback

# Every error kind the worker sends; wavecast's ProfileErrorKind lists the same names
# (tests/trace/kind_tables_test.cpp checks that both tables agree).
KINDS = frozenset({
    "missing_provider",
    "bad_provider_signature",
    "syntax_error",
    "import_error",
    "user_exception",
    "unsupported_operation",
    "missing_file",
    "timeout",
    "worker_crashed",
    "out_of_memory",
    "cancelled",
    "environment_error",
    "blocked_call",
    "no_training_step",
    "bad_request",
    "internal",
})


def checked_kind(kind):
    """`kind`, refused unless it is in KINDS: a misspelt kind must not reach the daemon,
    which would read it as an internal error."""
    if kind not in KINDS:
        raise ValueError(f"unknown trace error kind {kind!r}")
    return kind


class TraceError(Exception):
    """A failure the user can act on; serialised as the worker's `error`."""

    def __init__(self, kind, message, file="", line=0, hint="", traceback=""):
        super().__init__(message)
        self.kind = checked_kind(kind)
        self.message = message
        self.file = file
        self.line = line
        self.hint = hint
        self.traceback = traceback

    def to_json(self):
        return {
            "kind": self.kind,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "hint": self.hint,
            "traceback": self.traceback,
        }


def deepest_project_frame(exc, project):
    """(file, line) of the innermost traceback frame inside the project."""
    found = ("", 0)
    for frame in _traceback.extract_tb(exc.__traceback__):
        if project.contains(frame.filename):
            found = (frame.filename, frame.lineno or 0)
    return found


def error_at(kind, message, exc, project, hint, fallback_file=""):
    """A TraceError located at the innermost project frame of `exc`'s traceback."""
    file, line = deepest_project_frame(exc, project)
    return TraceError(
        kind,
        message,
        file=file or fallback_file or project.entry_file,
        line=line,
        hint=hint,
        traceback=format_exception(exc),
    )


class ValuesNeeded(TraceError):
    """Shape-only tracing met an op whose result depends on tensor values it does not
    compute (`.item()` of an activation, `nonzero`, a boolean mask). run_trace traces the
    script again in cpu mode, where the values exist; this error reaches the user only
    when that fails too."""

    HINT = ("Shape-only tracing knows the values of small integer/bool tensors (labels, ids, "
            "masks) only; avoid value-dependent operations (.item(), nonzero, boolean masks) "
            "on computed float tensors in the iteration.")

    def __init__(self, message, file, line, op="", origin=None, made_up=False, traceback=""):
        super().__init__("unsupported_operation", message, file=file, line=line, hint=self.HINT,
                         traceback=traceback)
        self.op = op  # "aten::nonzero"
        # The code that asked for the values, when a library under the user's line did
        # (torchvision's box coder, not the `model(images)` that called it).
        self.origin = origin
        # Whether the trace only suspects the values mattered (read_at): then cpu mode's own
        # failure is the one to report.
        self.made_up = made_up

    @classmethod
    def raised(cls, exc, project, own_code_dirs):
        """Shape-only tracing raised `exc` for want of values."""
        file, line = deepest_project_frame(exc, project)
        file = file or project.entry_file
        schema = getattr(getattr(exc, "func", None), "_schema", None)
        origin = None
        for frame in reversed(_traceback.extract_tb(exc.__traceback__)):
            if not frame.filename.startswith(own_code_dirs):
                if (frame.filename, frame.lineno) != (file, line):
                    origin = (frame.filename, frame.lineno or 0)
                break
        return cls(f"{one_line(exc)}: its result depends on tensor values, which shape-only tracing does not compute",
                   file, line, op=schema.name if schema is not None else "", origin=origin,
                   traceback=format_exception(exc))

    @classmethod
    def read_at(cls, file, line, op, message):
        """Values the script read at (file, line), which the trace made up (zeros), may
        have changed what it did (`message`): no exception says so."""
        return cls(message, file, line, op=op, made_up=True)


def timeout_error(exc, project):
    """The script was interrupted for taking too long: point at the line it was running."""
    return error_at(
        "timeout",
        "the trace took too long and was stopped",
        exc,
        project,
        "The script was still running the line shown; check for an endless loop, "
        "or raise the time-out.",
    )


def out_of_memory_error(exc, project):
    return error_at(
        "out_of_memory",
        f"out of memory: {one_line(exc)}",
        exc,
        project,
        "Use a smaller batch size or model, or trace in shape mode, which allocates no tensor memory.",
    )


_TRACEBACK_LIMIT = 20000


def format_exception(exc):
    text = "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))
    if len(text) > _TRACEBACK_LIMIT:  # e.g. a RecursionError: keep where it ended
        text = "...\n" + text[-_TRACEBACK_LIMIT:]
    return text


def one_line(exc):
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    name = type(exc).__name__
    return f"{name}: {first}" if first else name


class TraceInterrupted(BaseException):
    """Raised in the main thread when the parent asks a running trace to stop (time-out)."""


class ScriptControl(BaseException):
    """Unwinds a script run as written on the tracer's behalf (script_runner.py, sandbox.py):
    never the script's own failure, and past the script's `except Exception`."""
