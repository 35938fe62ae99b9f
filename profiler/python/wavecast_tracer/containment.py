"""What keeps a script's own code from changing the process or the user's files past its
trace: `python file.py`'s argv and working directory, put back after with whatever else
of the process the script changed, and the sandbox a provider script's code runs in too."""

import contextlib
import logging
import os
import signal
import sys

from .errors import TraceError
from .sandbox import Blocked, Sandbox
from .trace_warnings import warning


def stubbed_note(call, file, line):
    return warning("call_stubbed", file, line, call=call)


@contextlib.contextmanager
def script_process_state(project, argv, working_directory=None):
    """sys.argv and the working directory as `python file.py ARGS` run from
    `working_directory` (the script's folder when None) has them (relative data paths
    read the user's files; writes go to the sandbox). What the script changes of the process is its own process's, and the worker
    traces again: __main__, sys.argv, the directory, the environment variables, the
    signal handlers (the worker's SIGUSR1 stops a trace that runs too long) and the root
    logger's handlers (a basicConfig's file handler) are put back after, and the
    process-wide state of libraries the script set up is cleared (_library_state_cleared)."""
    saved_argv, saved_main, saved_cwd = sys.argv, sys.modules.get("__main__"), os.getcwd()
    saved_environ = dict(os.environ)
    saved_signals = {number: signal.getsignal(number) for number in _SIGNALS}
    root = logging.getLogger()
    saved_logging = (list(root.handlers), root.level)
    sys.argv = [project.entry_file, *argv]
    os.chdir(working_directory or project.folder)
    try:
        yield
    finally:
        for number, handler in saved_signals.items():
            if signal.getsignal(number) is not handler and handler is not None:
                signal.signal(number, handler)
        for handler in root.handlers:
            if handler not in saved_logging[0]:
                handler.close()
        root.handlers[:], root.level = saved_logging
        if os.environ != saved_environ:
            os.environ.clear()
            os.environ.update(saved_environ)
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        _library_state_cleared()


def _library_state_cleared():
    """Accelerate keeps one state per process: once a script made an Accelerator, another
    with other settings (the next trace's, or this one after an edit) is refused."""
    state = sys.modules.get("accelerate.state")
    if state is not None:
        state.AcceleratorState._reset_state(reset_partial_state=True)
        state.GradientState._reset_state()


_SIGNALS = (signal.SIGUSR1, signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGHUP)


@contextlib.contextmanager
def provider_script_contained(project, scratch=None):
    """A provider script's own code (its top level and its providers) runs as `python
    file.py` would, from its folder, in the sandbox of a script run as written: its writes,
    checkpoints and loggers leave the user's files as they were, and a download, sys.exit,
    input() or a subprocess stops the trace with its blocked_call error. Yields the list
    of the stubbed calls' `call_stubbed` notes, for the trace's warnings."""
    notes = []

    def on_stubbed(call, file, line):
        note = stubbed_note(call, file, line)
        if note not in notes:
            notes.append(note)

    sandbox = Sandbox(project, project.site, on_stubbed, scratch)
    try:
        with script_process_state(project, []), sandbox.active():
            yield notes
    except Blocked as blocked:
        raise sandbox.refusal_error(None) or blocked.error from None
    except TraceError as error:
        refused = sandbox.refusal_error(error.__context__) if error.kind == "user_exception" else None
        if refused is not None:
            raise located(refused, error) from None
        raise


def located(error, source):
    """`error` at the line of `source` (a TraceError or an exception) when it has none."""
    if error.line:
        return error
    if isinstance(source, TraceError):
        error.file, error.line = source.file, source.line
    return error
