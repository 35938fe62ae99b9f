"""The request loop of wavecast-worker (newline-delimited JSON over pipes).

Requests arrive on `request_fd`, responses leave on `response_fd`; the
process's stdout/stderr are never used for the protocol, so user prints
cannot corrupt it. See profiler/README.md, "Worker protocol".
"""

import faulthandler
import functools
import gc
import json
import logging
import os
import select
import signal
import sys

from . import environment
from .versions import OLDEST_TORCH, release
from .errors import TraceError, TraceInterrupted, error_at, format_exception, one_line, out_of_memory_error, timeout_error
from .project import Project


class _Channel:
    def __init__(self, request_fd, response_fd):
        self._requests = os.fdopen(request_fd, "rb")
        self._response_fd = response_fd

    def waiting(self):
        """Whether a request has arrived and not been read (exact only before the first
        read: requests() reads ahead)."""
        return bool(select.select([self._requests], [], [], 0)[0])

    def requests(self):
        for line in self._requests:
            if line.strip():
                yield line

    def send(self, message):
        data = (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._response_fd, view)
            view = view[written:]


class _Interrupts:
    """SIGUSR1 from the parent stops a running trace (time-out or cancel) with a Python traceback."""

    def __init__(self):
        self.tracing = False
        signal.signal(signal.SIGUSR1, self._handle)
        # Ctrl-C in the parent's terminal reaches the worker too; the parent decides.
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    def _handle(self, _signum, _frame):
        if self.tracing:
            # Once: a second signal must not cut short the tracer's own clean-up (the
            # patches it undoes on the way out), as the worker goes on to the next trace.
            self.tracing = False
            raise TraceInterrupted()


def serve(request_fd, response_fd, crash_fd, show_torch_logs=False, wavecast_version=None, warm_up=False,
          scratch=None):
    # A fatal signal (segfault in an extension) dumps the Python stack to the
    # crash pipe; the parent reads it to name the project line.
    crash_file = os.fdopen(crash_fd, "w")
    faulthandler.enable(file=crash_file, all_threads=False)
    channel = _Channel(request_fd, response_fd)
    try:
        import torch  # imported once here, so traces start warm
    except BaseException as exc:  # noqa: B902
        torch_dir = _torch_dir()
        mismatch = environment.torch_import_failure(exc, torch_dir)
        if mismatch:
            return _not_ready(channel, *mismatch, exc)
        return _not_ready(channel,
                          f"cannot import torch {_torch_location(torch_dir)}: {one_line(exc)}",
                          "Install PyTorch there (VENV/bin/pip install torch; for the system "
                          "python3: apt install python3-torch), or choose a venv that has it "
                          "(--python-env VENV, the editor's wavecast.pythonEnv or "
                          "WAVECAST_PYTHON_ENV).", exc)
    if not show_torch_logs:
        _hide_torch_logs()
    oldest = OLDEST_TORCH
    if release(getattr(torch, "__version__", "")) < oldest:
        return _not_ready(channel, f"torch {getattr(torch, '__version__', '(no version)')} in "
                                   f"{os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))} "
                                   f"is older than {oldest[0]}.{oldest[1]}, the oldest wavecast traces with",
                          "Upgrade torch in that environment, or select another Python environment.")
    try:
        from . import compat
        from .reuse import TraceCache
        from .tracer import run_trace
    except BaseException as exc:  # noqa: B902
        return _not_ready(channel, f"cannot load wavecast's tracer with torch {torch.__version__}: "
                                   f"{one_line(exc)}",
                          "Check that the Python environment's torch is complete.", exc)
    run_trace = functools.partial(run_trace, scratch=scratch)
    interrupts = _Interrupts()
    # Unchanged project modules and model, kept from one trace to the next (reuse.py).
    cache = TraceCache()
    channel.send(dict(compat.versions(), event="ready", pid=os.getpid(),
                      executable=sys.executable))
    if not warm_up or _warm_up(run_trace, channel.waiting):
        _freeze_long_lived()

    for line in channel.requests():
        try:
            message = json.loads(line)
            request_id = message.get("id")
            method = message.get("method")
            params = message.get("params") or {}
        except (ValueError, AttributeError) as exc:
            channel.send({"id": None, "error": _bad_request(f"malformed request: {exc}")})
            continue
        if method == "shutdown":
            channel.send({"id": request_id, "result": {}})
            break
        if method == "ping":
            channel.send({"id": request_id, "result": compat.versions()})
            continue
        if method != "trace":
            channel.send({"id": request_id, "error": _bad_request(f"unknown method {method!r}")})
            continue
        model, modules = cache.model, len(sys.modules)
        channel.send(_trace_response(request_id, params,
                                     functools.partial(run_trace, wavecast_version=wavecast_version, cache=cache),
                                     channel, interrupts))
        if cache.model is not model or len(sys.modules) != modules:
            _freeze_long_lived()
    return 0


class _RequestWaiting(Exception):
    pass


def _warm_up(run_trace, waiting):
    """Traces warmup_model.py once, so that the first trace does not pay torch's first-use
    costs. It gives way to a request that comes meanwhile, at the next phase of its trace
    (the longest, importing torch._dynamo, is one the request's trace needs anyway); returns
    whether it ran to its end. A failure is left for the real trace to report."""

    def progress(_message):
        if waiting():
            raise _RequestWaiting()

    try:
        run_trace(os.path.join(os.path.dirname(os.path.abspath(__file__)), "warmup_model.py"), 2,
                  progress=progress)
    except _RequestWaiting:
        return False
    except BaseException:  # noqa: B902
        pass
    return not waiting()


def _freeze_long_lived():
    """Collects the garbage, then exempts every object alive now from later collections.

    torch, the script's libraries and a kept model are hundreds of thousands of objects
    that live as long as the worker. Python's full collections walk them all: 300-400 ms,
    every third trace or so. Frozen (gc.freeze), they are not walked again; objects freed
    by their reference counts still go. Called after a response, when a trace imported
    modules or built a model, and unfrozen first so that what the last freeze held and is
    garbage now (a replaced model's reference cycles) is collected."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _hide_torch_logs():
    """Keeps torch's log records off the worker's stderr (the terminal, the daemon's log).

    A shape error in the script makes fake tensors log the failed meta kernel with a
    20-line traceback before raising; the exception itself becomes wavecast's one-line
    error. torch's loggers below "torch" inherit its level unless TORCH_LOGS sets theirs.
    """
    logging.getLogger("torch").setLevel(logging.CRITICAL)


def _not_ready(channel, message, hint, exc=None):
    error = TraceError("environment_error", message, hint=hint,
                       traceback=format_exception(exc) if exc is not None else "")
    channel.send({"event": "ready", "error": error.to_json()})
    return 1


def _torch_dir():
    """The folder a failed `import torch` found torch in, or None."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("torch")
    except BaseException:  # noqa: B902 - a broken torch may fail here too
        spec = None
    return os.path.dirname(spec.origin) if spec is not None and spec.origin else None


def _torch_location(found):
    """Where the failed `import torch` found torch (`found`: _torch_dir()), for the error message."""
    return f"from {found}" if found else f"(none on the path of {sys.executable})"


def _trace_response(request_id, params, run_trace, channel, interrupts):
    file = params.get("file")
    if not isinstance(file, str) or not file:
        return {"id": request_id, "error": _bad_request("params.file must be the script's path")}
    file = os.path.abspath(file)

    def progress(text):
        channel.send({"id": request_id, "progress": text})

    interrupts.tracing = True
    try:
        result = run_trace(file, params.get("batch_size"), params.get("mode", "shape"), progress,
                           world_size=params.get("world_size"), script_args=params.get("script_args"),
                           device=params.get("device"), compile_mode=params.get("compile"),
                           working_directory=params.get("working_directory"))
        interrupts.tracing = False
        return {"id": request_id, "result": result}
    except TraceError as error:
        interrupts.tracing = False
        body = error.to_json()
        if getattr(error, "output", ""):
            body["output"] = error.output
        return {"id": request_id, "error": body}
    except TraceInterrupted as exc:
        interrupts.tracing = False
        return {"id": request_id, "error": timeout_error(exc, Project(file)).to_json()}
    except MemoryError as exc:
        interrupts.tracing = False
        return {"id": request_id, "error": out_of_memory_error(exc, Project(file)).to_json()}
    except BaseException as exc:  # noqa: B902 - a tracer bug must not kill the worker
        interrupts.tracing = False
        error = error_at("internal", f"wavecast's tracer failed: {one_line(exc)}", exc,
                         Project(file), "This is a wavecast bug; please report it with the traceback.")
        return {"id": request_id, "error": error.to_json()}


def _bad_request(message):
    return TraceError("bad_request", message,
                      hint="The caller sent a request the worker does not understand.").to_json()
