"""Structured, user-actionable errors (docs/trace-format.md "Errors")."""

import traceback as _traceback


class TraceError(Exception):
    """A failure the user can act on; serialised as the worker's `error`."""

    def __init__(self, kind, message, file="", line=0, hint="", traceback=""):
        super().__init__(message)
        self.kind = kind
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
