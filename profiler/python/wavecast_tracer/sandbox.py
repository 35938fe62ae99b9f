"""Keeps a training script, run as written or through its provider functions
(script_runner.py), from touching the user's files and machine.

- Writes go to a temporary folder (sandbox_files.py): what the script writes, makes,
  deletes or renames changes a copy of the path under the sandbox folder, and what it
  reads, lists or stats sees those changes, so output directories, logs and checkpoints
  it makes are thrown away with the folder.
- `torch.save`, `torch.jit.save`, `safetensors.torch.save_file` and the loggers (TensorBoard's
  SummaryWriter, tensorboardX, wandb, mlflow) are stubbed: they do nothing, each with a
  `call_stubbed` note at the line that called it. Hugging Face `TrainingArguments`
  report to nothing, and Lightning's Trainer gets no logger and no checkpointing.
- Network connections fail at once (and the Hugging Face hub is offline), so a download
  stops the trace with a `blocked_call` error at its line and how to work offline.
- `sys.exit`, `input()`, subprocesses and multiprocessing stop it the same way;
  `torch.multiprocessing.spawn` runs rank 0's function in this process instead.
- DataLoaders load in this process (`num_workers=0`) without pinned memory; a loader's
  num_workers and pin_memory still read what the script asked for, and its iterators keep
  them (REQUESTED_WORKERS, REQUESTED_PINNING).

The worker traces again and again in one process: every replacement is undone when the
trace ends, however it ends, and one a library kept a reference to acts as the original.
"""

import builtins
import contextlib
import errno
import functools
import importlib
import importlib.machinery
import inspect
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import types

from . import patching
from .errors import ScriptControl, TraceError
from .patching import PatchOnImport, replace_while_active, variables_set
from .sandbox_files import ShadowFiles

# On a DataLoader's iterators: the worker processes the script asked for (the loader's
# num_workers still reads them), which load in this process while tracing.
REQUESTED_WORKERS = "_wavecast_requested_workers"
# Whether the script's DataLoader pins its batches (pin_memory=True): set on its iterators.
REQUESTED_PINNING = "_wavecast_requested_pinning"
_HF_OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
_STUBBED_MODULES = ("wandb", "mlflow", "tensorboardX", "torch.utils.tensorboard")
_PROCESS_HINT = ("Tracing runs the script in one process: make it do its training loop in this process, "
                 "e.g. behind a command-line flag.")
_SUBPROCESS_HINT = ("Tracing runs no other program: there, starting one fails with FileNotFoundError, as "
                    "for a program that is not installed. Catch that around the call, or skip it behind a "
                    "command-line flag.")
_OFFLINE_HINT = (
    "Tracing never downloads: download the data or weights once by running the script "
    "yourself, then trace with them in the local cache (Hugging Face: HF_HUB_OFFLINE=1 "
    "finds cached files; torchvision datasets: download=False with the files in `root`).")


def _causes(exc):
    """`exc` and the exceptions it was raised from or while handling, innermost last."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


class Blocked(ScriptControl):
    """A call the sandbox refuses; carries the error to report at the script's line."""

    def __init__(self, error):
        super().__init__(error.message)
        self.error = error


class Sandbox:
    """One script run's containment. `site()` is (file, line) of the script line running
    now; `on_stubbed(call, file, line)` is told of each stubbed call. The folder the
    script's writes go to is made in `scratch` (None: the system's temporary folder)."""

    def __init__(self, project, site, on_stubbed, scratch=None):
        self.project = project
        self.site = site
        self.on_stubbed = on_stubbed
        self.scratch = scratch
        self.folder = None
        self.files = None  # the ShadowFiles while active
        # The error each subprocess the script started was refused with -> (file, line):
        # the script may catch it, as a missing program's; a failure it causes is reported
        # at that line.
        self.refused_processes = {}
        # (file, line, host) of the first connection refused: a later failure is its doing.
        self.blocked_download = None

    # --- stubs ------------------------------------------------------------------
    def stub(self, call):
        """A stand-in for a logger or a checkpoint writer: every call does nothing and
        returns another stand-in; the first call from each line is noted."""
        return _Stub(self, call)

    def noted(self, call):
        file, line = self.site()
        self.on_stubbed(call, file, line)

    def _stubs(self):
        import torch
        import torch.jit

        return [(torch, "save", self._stub_function("torch.save")),
                (torch.jit, "save", self._stub_function("torch.jit.save"))]

    def _stub_function(self, call):
        def stub(*args, **kwargs):
            self.noted(call)

        return stub

    @contextlib.contextmanager
    def _framework_settings(self):
        """Hugging Face and Lightning take their loggers and checkpointing from arguments;
        these are set off where the script makes them (the classes are patched when
        the script imports them, through an import hook)."""
        savers = self._patch_savers
        finder = PatchOnImport({
            "safetensors.torch": self._patch_function("save_file", "safetensors save_file"),
            "transformers.training_args": self._patch_training_arguments,
            "transformers.trainer": savers("Trainer", ("save_model", "_save_checkpoint"), "Trainer checkpoint"),
            "transformers.modeling_utils": savers("PreTrainedModel", ("save_pretrained",), "save_pretrained"),
            "accelerate.accelerator": savers("Accelerator", ("save", "save_state", "save_model"), "Accelerator save"),
            "lightning.pytorch.trainer.trainer": self._patch_lightning_trainer,
            "pytorch_lightning.trainer.trainer": self._patch_lightning_trainer,
            "pyarrow": self._patch_pyarrow_reads,
            "typeshed_client": self._patch_typeshed_search,
        })
        with finder.installed():
            yield

    def _patch_pyarrow_reads(self, module, undo):
        """pyarrow opens files in C++, past Python's functions: its readers of a path get
        the copy the script wrote (a datasets cache file its `.map` just made)."""
        def opening(original, mode_at):
            """`original(path, ...)`, whose mode (if any) is argument `mode_at` or `mode=`."""
            def open_(source, *args, **kwargs):
                if not isinstance(source, (str, bytes, os.PathLike)):  # a buffer, a file object
                    return original(source, *args, **kwargs)
                mode = args[mode_at] if mode_at is not None and len(args) > mode_at else kwargs.get("mode", "r")
                path = self.files.readable(source) if mode == "r" else self.files.writable(source)
                return original(path, *args, **kwargs)

            return open_

        for name, mode_at in (("memory_map", 0), ("input_stream", None)):
            if hasattr(module, name):
                replace_while_active(undo.append, module, name, opening(getattr(module, name), mode_at),
                                     self._is_active)

    def _patch_typeshed_search(self, module, undo):
        """typeshed_client (jsonargparse's, which LightningCLI reads a model's arguments
        with) asks a Python subprocess for its sys.path; refused, jsonargparse would find no
        arguments at all. Answered from this process's."""
        finder = module.finder
        original = finder.get_search_context

        def get_search_context(*, search_path=None, python_executable=None, **kwargs):
            if search_path is None and python_executable is None:
                search_path = [pathlib.Path(path) for path in sys.path if path]
            return original(search_path=search_path, python_executable=python_executable, **kwargs)

        for owner in (module, finder):
            if getattr(owner, "get_search_context", None) is original:
                replace_while_active(undo.append, owner, "get_search_context", get_search_context, self._is_active)

    def _patch_function(self, name, call):
        """A patch that stubs the module's function `name`."""
        def patch(module, undo):
            replace_while_active(undo.append, module, name, self._stub_function(call), self._is_active)

        return patch

    def _patch_savers(self, class_name, methods, call):
        """A patch that stubs `methods` of the module's class `class_name`."""
        def patch(module, undo):
            cls = getattr(module, class_name)
            for method in methods:
                if method in cls.__dict__:
                    original = cls.__dict__[method]
                    setattr(cls, method, lambda *args, **kwargs: self.noted(call))
                    undo.append(lambda method=method, original=original: setattr(cls, method, original))

        return patch

    def _patch_training_arguments(self, module, undo):
        cls = module.TrainingArguments
        original = cls.__post_init__
        sandbox = self

        def post_init(args):
            report_to = args.report_to
            if report_to not in (None, "none", [], ["none"]):
                sandbox.noted("report_to")
            args.report_to = "none"
            original(args)
            args.report_to = []

        cls.__post_init__ = post_init
        undo.append(lambda: setattr(cls, "__post_init__", original))

    def _patch_lightning_trainer(self, module, undo):
        cls = module.Trainer
        original = cls.__init__
        checkpoint_types = tuple(
            t for t in (getattr(importlib.import_module(module.__name__.rsplit(".trainer", 2)[0] + ".callbacks"),
                                "Checkpoint", None),) if t is not None)
        sandbox = self

        def init(trainer, *args, **kwargs):
            bound = inspect.signature(original).bind(trainer, *args, **kwargs)
            arguments = bound.arguments
            if arguments.get("logger", True) not in (False, None):
                sandbox.noted("lightning logger")
            arguments["logger"] = False
            callbacks = arguments.get("callbacks") or []
            callbacks = callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]
            kept = [c for c in callbacks if not isinstance(c, checkpoint_types)]
            if len(kept) != len(callbacks) or arguments.get("enable_checkpointing", True) is not False:
                sandbox.noted("lightning checkpointing")
            arguments["callbacks"] = kept
            arguments["enable_checkpointing"] = False
            return original(*bound.args, **bound.kwargs)

        cls.__init__ = functools.wraps(original)(init)
        undo.append(lambda: setattr(cls, "__init__", original))
        self._patch_savers("Trainer", ("save_checkpoint",), "Trainer.save_checkpoint")(module, undo)

    # --- processes, input, exit, network ---------------------------------------------
    def _refuse(self, message, hint):
        file, line = self.site()
        raise Blocked(TraceError("blocked_call", message, file=file or self.project.entry_file, line=line,
                                 hint=hint))

    def _called_from_project(self):
        """Whether the code that made the call being refused is the script's (the first
        frame outside the standard library's process modules, this one and the
        replacements' wrappers)."""
        frame = sys._getframe(2)
        ours = (subprocess.__file__, os.__file__, __file__, patching.__file__)
        while frame is not None and frame.f_code.co_filename in ours:
            frame = frame.f_back
        return frame is not None and self.project.contains(frame.f_code.co_filename)

    def _blocked_calls(self):
        import multiprocessing
        import multiprocessing.pool
        import multiprocessing.process
        import torch.multiprocessing

        sandbox = self

        def exit_(status=None):
            file, line = sandbox.site()
            raise Blocked(sandbox.exit_error(f"sys.exit({status!r})", file, line))

        def input_(prompt=""):
            sandbox._refuse("the script asked for input (input()): tracing has no terminal",
                            "Give the answer as a command-line argument instead.")

        def refuse_process(what):
            def refuse(*args, **kwargs):
                sandbox._refuse(f"the script started {what}, which tracing does not run", _PROCESS_HINT)

            return refuse

        def refuse_subprocess(*args, **kwargs):
            # As a missing program: a library probing the machine (accelerate runs
            # nvidia-smi, torchtitan lspci) or a script asking git for its commit copes.
            error = FileNotFoundError(errno.ENOENT, "no subprocesses while wavecast traces")
            if sandbox._called_from_project():
                sandbox.refused_processes[error] = sandbox.site()
            raise error

        def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
            fn(0, *args)  # rank 0's part, in this process (docs/trace-format.md)

        real_connect = socket.socket.connect

        def connect(sock, address):
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                host = address[0] if isinstance(address, tuple) else str(address)
                if sandbox.blocked_download is None:
                    sandbox.blocked_download = (*sandbox.site(), host)
                raise ConnectionRefusedError(111, "wavecast traces offline")
            return real_connect(sock, address)

        def getaddrinfo(host, *args, **kwargs):
            if host not in (None, "localhost", "127.0.0.1", "::1") and sandbox.blocked_download is None:
                sandbox.blocked_download = (*sandbox.site(), host)
            if host not in (None, "localhost", "127.0.0.1", "::1"):
                raise socket.gaierror(socket.EAI_NONAME, "wavecast traces offline")
            return real_getaddrinfo(host, *args, **kwargs)

        real_getaddrinfo = socket.getaddrinfo
        return [
            (sys, "exit", exit_), (builtins, "input", input_), (socket, "getaddrinfo", getaddrinfo),
            (subprocess.Popen, "__init__", refuse_subprocess),
            (os, "system", refuse_process("a shell command")), (os, "popen", refuse_process("a shell command")),
            (multiprocessing.process.BaseProcess, "start", refuse_process("a process (multiprocessing)")),
            (multiprocessing.pool.Pool, "__init__", refuse_process("a process pool (multiprocessing)")),
            (torch.multiprocessing, "spawn", spawn), (socket.socket, "connect", connect),
        ]

    def exit_error(self, how, file, line):
        """The error of a script that exited (`how`: "sys.exit(2)") before its second step."""
        return TraceError("blocked_call", f"the script exited ({how}) before its second optimizer step",
                          file=file or self.project.entry_file, line=line,
                          hint="Check the script's arguments (`--` after the file on the command line, "
                               "wavecast.scriptArgs in the editor) and its output.")

    def refusal_error(self, exc):
        """The blocked_call error for a failure a refused call caused, or None: a subprocess
        whose error the script let through (`exc` is it or caused by it), else going online
        (the first connection refused: a later failure is its doing)."""
        for cause in _causes(exc):
            site = self.refused_processes.get(cause) if isinstance(cause, FileNotFoundError) else None
            if site is not None:
                file, line = site
                return TraceError("blocked_call", "the script started a subprocess, which tracing does not run",
                                  file=file or self.project.entry_file, line=line, hint=_SUBPROCESS_HINT)
        if self.blocked_download is not None:
            file, line, host = self.blocked_download
            return TraceError("blocked_call", f"the script tried to download from {host}",
                              file=file or self.project.entry_file, line=line, hint=_OFFLINE_HINT)
        for cause in _causes(exc):
            text = str(cause).lower()
            if type(cause).__name__ in ("OfflineModeIsEnabled", "LocalEntryNotFoundError") or \
                    "offline mode" in text or "couldn't connect to" in text:
                return TraceError("blocked_call", "the script tried to download from the Hugging Face hub",
                                  hint=_OFFLINE_HINT)
        return None

    # --- data loading ---------------------------------------------------------------
    def _in_process_data_loading(self):
        from torch.utils.data import DataLoader

        original = DataLoader.__init__
        signature = inspect.signature(original)

        original_iterator = DataLoader._get_iterator

        def init(loader, *args, **kwargs):
            bound = signature.bind(loader, *args, **kwargs)
            workers = bound.arguments.get("num_workers", 0)
            pinning = bool(bound.arguments.get("pin_memory", False))
            bound.arguments.update(num_workers=0, pin_memory=False, persistent_workers=False)
            bound.arguments.pop("prefetch_factor", None)
            bound.arguments.pop("multiprocessing_context", None)
            bound.arguments.pop("worker_init_fn", None)
            original(*bound.args, **bound.kwargs)
            # What the script (and Accelerate, which rebuilds the loader from it) reads back.
            loader.num_workers = workers if isinstance(workers, int) and workers > 0 else 0
            loader.pin_memory = pinning

        def get_iterator(loader):
            workers, pinning = loader.num_workers, loader.pin_memory
            loader.num_workers, loader.pin_memory = 0, False
            try:
                iterator = original_iterator(loader)
            finally:
                loader.num_workers, loader.pin_memory = workers, pinning
            setattr(iterator, REQUESTED_WORKERS, workers)
            setattr(iterator, REQUESTED_PINNING, bool(pinning))
            return iterator

        return [(DataLoader, "__init__", init), (DataLoader, "_get_iterator", get_iterator)]

    # ---------------------------------------------------------------------------------
    def _is_active(self):
        return self.folder is not None

    @contextlib.contextmanager
    def active(self):
        """The sandbox in force. Each replacement is recorded as it is made, so leaving
        sets back exactly what was replaced, however the trace or the setup ends."""
        with contextlib.ExitStack() as stack:
            # Entered first so that it leaves after the variables are set back.
            stack.enter_context(_hub_offline())
            stack.enter_context(variables_set(_HF_OFFLINE))
            if self.scratch is not None:
                # Made again if something removed it meanwhile (a cleaner of /tmp).
                os.makedirs(self.scratch, exist_ok=True)
            self.folder = tempfile.mkdtemp(prefix="wavecast-script-", dir=self.scratch)
            stack.callback(self._remove_folder)
            self.files = ShadowFiles(self.folder)
            replacements = [*self.files.replacements(), *self._stubs(), *self._blocked_calls(),
                            *self._in_process_data_loading()]
            for owner, name, value in replacements:
                replace_while_active(stack.callback, owner, name, value, self._is_active)
            stack.enter_context(self._stand_in_modules())
            stack.enter_context(self._framework_settings())
            yield self

    @contextlib.contextmanager
    def _stand_in_modules(self):
        """The stubbed modules are stand-ins, and so is any module under one (`import
        mlflow.pytorch`), served by a finder; all are taken out of sys.modules after."""
        saved = {name: module for name, module in sys.modules.items() if _stubbed(name)}
        finder = _StandIns(self)
        try:
            sys.meta_path.insert(0, finder)
            sys.modules.update({name: _stub_module(name, self) for name in {*_STUBBED_MODULES, *saved}})
            yield
        finally:
            sys.meta_path.remove(finder)
            for name in [name for name in sys.modules if _stubbed(name)]:
                del sys.modules[name]
            sys.modules.update(saved)

    def _remove_folder(self):
        folder, self.folder = self.folder, None
        shutil.rmtree(folder, ignore_errors=True)


class _Stub:
    """Does nothing, whatever is asked of it; notes its first call from each line."""

    def __init__(self, sandbox, call):
        self._sandbox = sandbox
        self._call = call

    def __call__(self, *args, **kwargs):
        self._sandbox.noted(self._call)
        return self

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False


def _stubbed(name):
    # Every trace asks this of each of sys.modules' thousands of names: str.startswith
    # with a tuple rules out nearly all of them at once.
    return name.startswith(_STUBBED_MODULES) and any(
        name == stubbed or name.startswith(stubbed + ".") for stubbed in _STUBBED_MODULES)


class _StandIns:
    """Finds a stand-in for each module under a stubbed one (the stubbed modules
    themselves are put in sys.modules: one may have been imported for real)."""

    def __init__(self, sandbox):
        self._sandbox = sandbox

    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, self, is_package=True) if _stubbed(name) else None

    def create_module(self, spec):
        return _stub_module(spec.name, self._sandbox)

    def exec_module(self, module):
        pass


def _stub_module(name, sandbox):
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__path__ = []
    call = name.removeprefix("torch.utils.")  # the stubbed call reads `tensorboard.add_scalar`
    for attribute in ("SummaryWriter", "init", "log", "start_run", "log_metric", "log_metrics",
                      "log_param", "log_params", "finish", "watch", "config", "run", "end_run",
                      "set_experiment", "log_artifact", "autolog"):
        setattr(module, attribute, _Stub(sandbox, f"{call}.{attribute}" if attribute != "SummaryWriter"
                                          else "SummaryWriter"))
    module.__file__ = os.path.join(tempfile.gettempdir(), "wavecast-stubs", *name.split(".")) + ".py"

    def attribute_of(attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return _Stub(sandbox, f"{call}.{attribute}")

    module.__getattr__ = attribute_of
    return module


_MISSING = object()


@contextlib.contextmanager
def _hub_offline():
    """huggingface_hub reads HF_HUB_OFFLINE once, when first imported: one imported by an
    earlier trace may be online, and one first imported during this trace (offline) is
    read again after it, as an import outside the trace would have it."""
    name = "huggingface_hub.constants"
    constants = sys.modules.get(name)
    saved = getattr(constants, "HF_HUB_OFFLINE", _MISSING)
    if saved is not _MISSING:
        constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if saved is not _MISSING:
            constants.HF_HUB_OFFLINE = saved
        elif sys.modules.get(name) is not None:
            importlib.reload(sys.modules[name])
