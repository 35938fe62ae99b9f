"""Traces one training iteration of the user's script and returns the trace document."""

import contextlib
import functools
import io
import os
import random
import sys
import time

import torch

from . import compat, distributed, measured
from .attention import cuda_attention
from .autocast import TorchvisionAutocast, checked_autocast_regions, cuda_autocast, precision
from .compiled import COMPILE_MODES, eager_compile
from .optimizers import cuda_multi_tensor_defaults, state_tensors, steady_state_steps
from .devices import cuda_mapped_to_cpu
from .errors import TraceError, TraceInterrupted, ValuesNeeded, out_of_memory_error, timeout_error
from .loader import (ENTRY_MODULE_NAME, PROVIDER_NAMES, find_providers, load_entry_module, project_modules,
                     purge_project_modules, user_exception)
from .memory import MemoryTracker
from .norms import cuda_rms_norm
from .project import Project
from .recorder import OpRecorder
from .trace_state import TraceState
from .replay import ModelCalls, ReplayMismatch
from . import reuse
from .trace_warnings import location, warning
from .values import flatten_tensors
from .versions import VALIDATED_TORCH, release
from .rnn import fuse_recurrent_layers
from .containment import provider_script_contained
from .script_runner import runs_as_written, trace_script
from .target_gpu import answering_as

TRACE_FORMAT_VERSION = 2
MODES = ("shape", "cpu", "cuda")
_USER_OUTPUT_LIMIT = 8192
_OOM_MARKERS = ("can't allocate memory", "not enough memory", "DefaultCPUAllocator", "out of memory")


def run_trace(file, batch_size=None, mode="shape", progress=None, assume_gpu=False, wavecast_version=None,
              world_size=None, script_args=None, device=None, cache=None, compile_mode=None,
              working_directory=None, scratch=None):
    """Returns the trace document (docs/trace-format.md); raises TraceError.

    assume_gpu: the caller runs the script's model and batch on a GPU (as the truth
    harness does with the samples), so CPU tensors the iteration mixes with them are
    warned about even if the script never asks for CUDA itself.
    world_size: the ranks of a torch.distributed script's launch, which traces as rank 0
    (distributed.py); None: distributed.DEFAULT_WORLD_SIZE (a script run as written: one
    process), and the torchrun environment only for a script that makes a process group.
    script_args: a script without provider functions runs as written (script_runner.py)
    with these as its sys.argv[1:], from working_directory (None: the script's folder) as
    `python FILE` run there; device: the GPU its torch.cuda queries answer for
    (target_gpu.py); compile_mode: predict the script as if the modules its iteration calls
    were passed through torch.compile(mode=compile_mode) (compiled.what_if).
    cache: a reuse.TraceCache a long-lived worker keeps between traces: unchanged project
    modules stay imported and an unchanged model is not built again; None: everything fresh.
    scratch: the folder the sandbox makes its own folder in (None: the system's temporary
    folder); a worker's parent gives it one, and removes it however the worker ends.
    """
    progress = progress or (lambda message: None)
    if mode not in MODES:
        hint = ("Use mode \"shape\" (no arithmetic), \"cpu\" (real execution on the CPU) or "
                "\"cuda\" (measured on a GPU).")
        raise TraceError("bad_request", f"unsupported trace mode \"{mode}\"", hint=hint)
    if mode == "cuda":
        measured.check_cuda_available()
    if compile_mode is not None and compile_mode not in COMPILE_MODES:
        raise TraceError("bad_request", f"unknown torch.compile mode {compile_mode!r}",
                         hint="Use one of " + ", ".join(COMPILE_MODES) + ".")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise TraceError("bad_request", f"batch size must be a positive integer, got {batch_size!r}",
                         hint="Pass a batch size of 1 or more.")
    as_written = runs_as_written(file)
    default_world_size = 1 if as_written else None  # `python train.py` is one process
    if world_size is not None and (not isinstance(world_size, int) or isinstance(world_size, bool)
                                   or world_size < 1):
        raise TraceError("bad_request", f"world size must be a positive integer, got {world_size!r}",
                         hint="Pass the number of ranks (GPUs) of the launch, 1 or more.")

    project = Project(file)
    one_rank = functools.partial(distributed.one_rank, world_size, project, map_cuda=mode != "cuda",
                                 default_world_size=default_world_size)
    document = None
    started = time.perf_counter()
    captured = io.StringIO()

    def attempt(mode):
        _seed_generators()
        if as_written:
            # Nothing is kept for a script run as written: its modules are imported anew.
            if cache is not None:
                cache.forget()
            purge_project_modules(project)
            with one_rank() as rank:
                return trace_script(project, mode, progress, assume_gpu, rank, script_args or [], device,
                                    compile_mode, working_directory, scratch)
        # Measured on a GPU, the script runs as the user would run it there.
        contained = provider_script_contained(project, scratch) if mode != "cuda" else contextlib.nullcontext([])
        with contained as stubbed_notes:
            try:
                with one_rank() as rank:
                    document = _trace(project, batch_size, mode, progress, assume_gpu, rank, cache, device,
                                      compile_mode)
            except _ReusedModelFailed:
                # The kept model may hold state a fresh build would not (the provider set a
                # global the iteration reads): a failure is only believed from a fresh one.
                cache.forget()
                captured.seek(0)
                captured.truncate()
                _seed_generators()
                with one_rank() as rank:
                    document = _trace(project, batch_size, mode, progress, assume_gpu, rank, cache, device,
                                      compile_mode)
        document["warnings"].extend(stubbed_notes)
        return document

    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
        try:
            try:
                document = attempt(mode)
            except ValuesNeeded as needed:
                if mode != "shape":
                    raise
                document = _traced_with_values(needed, attempt, cache, captured, progress)
        except TraceError as error:
            error.output = _tail(captured.getvalue())
            raise
        finally:
            if cache is not None and document is None:
                cache.forget()  # a failed trace may leave modules and the model half-changed
            if cache is None or as_written or document is None:
                # Not kept: another project's trace would find them in sys.modules first
                # (its own `helpers` must not be this one's).
                purge_project_modules(project)
    if wavecast_version:  # the worker's, from CMake's project version
        document["producer"]["wavecast"] = wavecast_version
    document["trace_seconds"] = round(time.perf_counter() - started, 3)
    output = captured.getvalue()
    if output:
        document["user_output"] = _tail(output)
    return document


def _traced_with_values(needed, attempt, cache, captured, progress):
    """The trace in cpu mode, where the values shape-only tracing stopped at exist: the same
    ops (the arithmetic runs for real on this CPU). Its warning says why; when cpu mode fails
    too, the error is the one shape mode met, with cpu mode's failure in its hint."""
    progress(f"line {needed.line} needs tensor values: tracing in cpu mode")
    if cache is not None:
        cache.forget()  # the next attempt purges the project's modules
    captured.seek(0)
    captured.truncate()
    try:
        document = attempt("cpu")
    except TraceError as failed:
        if needed.made_up:
            raise
        where = f" at {os.path.basename(failed.file)}:{failed.line}" if failed.file and failed.line else ""
        needed.hint += f" Tracing in cpu mode was tried instead, and failed{where}: {failed.message}."
        raise needed from None
    facts = {"call": needed.op} if needed.op else {}
    if needed.origin is not None:
        facts["origin"] = location(*needed.origin)
    document["warnings"].append(warning("traced_in_cpu_mode", needed.file, needed.line, **facts))
    return document


def _seed_generators():
    """The same draws on every trace of a script that does not seed them itself: a random
    value the script branches on (LayerDrop's `torch.rand([]) < p`) takes the same branch
    each time, so a save does not move the prediction by chance. A script's own seeding
    still decides."""
    torch.manual_seed(0)
    random.seed(0)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(0)


def _tail(text):
    return text[-_USER_OUTPUT_LIMIT:]


class _ReusedModelFailed(Exception):
    """A trace with a kept model failed; run_trace traces again with a fresh one."""


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _reusable_model(cache, modules_kept, project, module, source, mode, world_size):
    """(the kept reuse.BuiltModel when it may stand for a fresh build, else None; the key
    of this trace's model, or None when no model of it may be kept).

    source: the entry file's bytes read before and after it ran, or None when they differ
    (saved again meanwhile: which one ran cannot be told)."""
    if cache is None:
        return None, None
    built, cache.model = cache.model, None  # kept again only once this trace succeeds
    if mode != "shape" or source is None:
        return None, None
    roles = PROVIDER_NAMES["input"] + PROVIDER_NAMES["iteration"]
    key = reuse.model_key(project, source, module, roles, mode, world_size)
    if (key is None or built is None or not modules_kept or built.key != key or not built.restore()
            or not reuse.adopt_classes(built.model, module, ENTRY_MODULE_NAME)):
        return None, key
    return built, key


def _trace(project, batch_size, mode, progress, assume_gpu, rank, cache=None, device=None, compile_mode=None):
    modules_kept = purge_project_modules(project, cache.modules if cache is not None else None)
    progress("loading script")
    source = _read(project.entry_file) if cache is not None else None
    # A function compiled as the script loads (`@torch.compile` on a module-level function)
    # is marked too, with its decorator's line.
    with eager_compile(project.site):
        module = load_entry_module(project)
    if source is not None and _read(project.entry_file) != source:
        source = None
    providers = find_providers(module, project)
    reused, model_key = _reusable_model(cache, modules_kept, project, module, source, mode,
                                        rank.world_size)
    output = sys.stdout  # run_trace's StringIO: what the script printed
    printed = output.tell() if isinstance(output, io.StringIO) else None
    try:
        try:
            document = _trace_providers(project, providers, batch_size, mode, progress, assume_gpu, rank,
                                        cache, reused, model_key, device, compile_mode)
        except ReplayMismatch:
            # The kept model's call was replayed, and its backward then met another gradient
            # (the loss changed): traced again, the call is recorded anew.
            if reused is None or not reused.restore():
                raise _ReusedModelFailed() from None
            if printed is not None:  # the iteration prints again
                output.seek(printed)
                output.truncate()
            document = _trace_providers(project, providers, batch_size, mode, progress, assume_gpu, rank,
                                        cache, reused, model_key, device, compile_mode)
    except TraceError as error:
        if reused is not None and error.kind != "timeout":
            raise _ReusedModelFailed() from None
        raise
    if cache is not None:
        cache.modules.record(project.root, project_modules(project))
    return document


def _trace_providers(project, providers, batch_size, mode, progress, assume_gpu, rank, cache, reused, model_key,
                     device=None, compile_mode=None):
    if batch_size is None:
        batch_size = providers.default_batch_size
    if batch_size is None:
        raise TraceError(
            "bad_provider_signature",
            f"no batch size given and `{providers.input.__name__}` has no default for batch_size",
            file=project.entry_file,
            line=providers.lines()["input"],
            hint="Give batch_size a default, e.g. `def wavecast_input(batch_size=32):`, "
            "or pass a batch size.",
        )

    state = TraceState(project, progress)
    state.compile_what_if(compile_mode)
    built = None  # the model this trace may leave to the next (reuse.BuiltModel)
    state.assume_gpu = assume_gpu
    state.distributed = rank
    compat.ensure_meta_kernels()
    shape_only = mode == "shape"
    # A kept model's fake tensors belong to the fake mode that made them.
    fake_mode = (reused.fake_mode if reused is not None else compat.make_fake_mode()) if shape_only \
        else contextlib.nullcontext()
    try:
        with contextlib.ExitStack() as stack:
            autocast = enter_tracing_contexts(stack, state, mode, rank, fake_mode, device=device)

            # In shape mode the recorder also follows the providers' small integer tensors
            # (labels, ids, masks) for value-dependent ops; it records only the iteration.
            recorder = OpRecorder(state, fake_mode if shape_only else None)
            recorder.recording = False
            if shape_only:
                stack.enter_context(compat.readable_fake_values(recorder.shadows.read))
                stack.enter_context(recorder.checkpoints_read_for_real())
            with recorder if shape_only else contextlib.nullcontext():
                if reused is not None:
                    progress("reusing the model")
                    built = reused
                    model = reused.model
                    _resume_build(reused, recorder, state)
                else:
                    progress("building model")
                    warnings_before = len(state.warnings)
                    model = _call_provider(providers.model, project, "the model provider")
                    if not isinstance(model, torch.nn.Module):
                        raise _bad_return(providers.model, project, "an nn.Module", model)
                    if model_key is not None and not rank.initialized:
                        built = _kept_build(model_key, model, fake_mode, recorder, state, warnings_before)
                progress("creating inputs")
                inputs = _call_provider(providers.input, project, "the input provider", batch_size=batch_size)
                if isinstance(inputs, torch.Tensor):
                    inputs = (inputs,)
                if not isinstance(inputs, (tuple, list)):
                    raise _bad_return(providers.input, project, "a tuple of inputs", inputs)
                if mode == "cuda":  # measured as the truth harness runs it: model and batch on the GPU
                    model, inputs = measured.to_gpu(model, inputs)
                iteration = _call_provider(providers.iteration, project, "the iteration provider", model)
                if not callable(iteration):
                    raise _bad_return(providers.iteration, project, "a callable iteration(*inputs)", iteration)

            if built is not None and shape_only:
                state.kept_optimizer_states = KeptOptimizerStates(built.optimizer_states, recorder.shadows, state)
            state.name_modules(model)
            stack.enter_context(_module_hooks(state))
            if mode == "cuda":  # cuDNN already runs a recurrent layer as one op
                _measure(state, project, iteration, inputs, progress)
            else:
                stack.enter_context(fuse_recurrent_layers(state, compute_values=not shape_only))
                state.memory = MemoryTracker()
                state.memory.add_baseline(_baseline_tensors(model, inputs))
                calls = None
                if built is not None and shape_only and not rank.initialized:
                    built.calls = {} if built.calls is None else built.calls
                    calls = stack.enter_context(ModelCalls(model, built.calls, recorder, state, autocast))
                progress("tracing forward")
                recorder.recording = True
                state.placement.recording = True
                try:
                    with recorder, state.memory.saved_tensors_hooks(), state.memory.watching_zero_grad(), \
                            state.memory.watching_storage_resizes(), \
                            state.memory.watching_selective_checkpoints():
                        _call_user(iteration, project, "during the training iteration", *inputs)
                finally:
                    state.placement.recording = False
                if calls is not None:
                    calls.finish()
            state.finish()
            precision_settings = precision(autocast)
            memory = _memory(model, state.optimizers)
            if state.memory is not None:
                memory.update(_tracked_memory(state, model))
    except TraceInterrupted as exc:
        raise timeout_error(exc, project) from None

    document = {
        "format": "wavecast-trace",
        "version": TRACE_FORMAT_VERSION,
        "producer": compat.versions(),
        "entry_file": project.entry_file,
        "project_root": project.root,
        "batch_size": batch_size,
        "mode": mode,
        "providers": providers.lines(),
        "ops": state.ops,
        "fallback_ops": state.fallback_ops,
        "memory": memory,
        "precision": precision_settings,
        "warnings": _torch_warnings() + state.warnings + rank.warnings,
    }
    layout = rank.document()
    if layout is not None:
        document["distributed"] = layout
    if cache is not None and built is not None and layout is None:
        cache.model = built
    if mode == "cuda":
        document["device"] = torch.cuda.get_device_name()
    return document


def _kept_build(key, model, fake_mode, recorder, state, warnings_before):
    """A reuse.BuiltModel of the model just built: the values its small tensors have now and
    the warnings the build raised."""
    shadows = recorder.shadows.kept_values((*model.parameters(), *model.buffers()))
    return reuse.BuiltModel(key, model, fake_mode, shadows, list(state.warnings[warnings_before:]),
                            state.cuda_mapped)


def _resume_build(built, recorder, state):
    """The trace state as building the kept model left it."""
    recorder.shadows.restore(built.shadows)
    state.warnings.extend(built.warnings)
    state.cuda_mapped = state.cuda_mapped or built.cuda_mapped


class KeptOptimizerStates:
    """A kept model's optimizer states (reuse.OptimizerStates) as this trace's optimizers
    adopt and keep them: with the real values of their small tensors (the steps) and as
    memory live since before the iteration."""

    signature = staticmethod(reuse.OptimizerStates.signature)

    def __init__(self, states, shadows, state):
        self._states = states
        self._shadows = shadows
        self._state = state

    def adopt(self, signature, optimizer):
        tensors = self._states.adopt(signature, optimizer, self._shadows.restore)
        if tensors is None:
            return False
        self._state.progress("reusing the optimizer state")
        self._state.live_before_iteration(tensors)
        return True

    def keep(self, signature, optimizer):
        self._states.keep(signature, optimizer, self._shadows.kept_values)


def enter_tracing_contexts(stack, state, mode, rank, fake_mode, steady_state=True, device=None):
    """Enters on `stack` the modes and patches a trace runs under (fake tensors, CUDA mapped
    to the CPU, optimizer and autocast as on a GPU, torch.cuda's queries answered for
    `device`, ...); returns the autocast tracker (None in cuda mode). `steady_state`: an
    optimizer's first step is preceded by an unrecorded one that builds its state
    (optimizers.steady_state_steps)."""
    shape_only = mode == "shape"
    stack.enter_context(fake_mode)
    if shape_only:
        stack.enter_context(compat.deepcopyable_fake_tensors())
        stack.enter_context(compat.convertible_fake_parameters())
        stack.enter_context(cuda_attention())
        stack.enter_context(cuda_rms_norm())
    stack.enter_context(compat.track_optimizers(state.optimizers.append))
    stack.enter_context(compat.spy_on_fallbacks(state.on_fallback))
    stack.enter_context(compat.replace_record_function(state.record_function_factory()))
    stack.enter_context(_backward_hooks(state))
    stack.enter_context(compat.default_precision())
    state.compiled_functions = stack.enter_context(eager_compile(state.site))
    if mode == "cuda":
        return None
    torchvision_ops = stack.enter_context(TorchvisionAutocast())
    stack.enter_context(cuda_mapped_to_cpu(state.on_cuda_mapped, state.placement, rank.device_count))
    stack.enter_context(compat.fused_dropout())
    stack.enter_context(cuda_multi_tensor_defaults())
    stack.enter_context(compat.grad_scalers_stepping())
    if steady_state:
        stack.enter_context(steady_state_steps(state))
    autocast = stack.enter_context(cuda_autocast())  # after cuda_attention: wraps it
    torchvision_ops.autocast = autocast
    stack.enter_context(checked_autocast_regions(state.on_unmodelled_autocast))
    # Last: the target GPU's answers (bf16 from sm_80 on) replace the stand-ins for any GPU.
    stack.enter_context(answering_as(device, state.streams))
    return autocast


def _measure(state, project, iteration, inputs, progress):
    """cuda mode: CUPTI on, warm-up iterations, then the iteration recorded op by op and
    repeated (measured.py)."""
    session = measured.open_session()
    try:
        progress("warming up on the GPU")
        with state.suppressing():
            for _ in range(measured.WARMUP_ITERATIONS):
                _call_user(iteration, project, "during the training iteration", *inputs)
        torch.cuda.synchronize()
        session.collect()  # the warm-up's kernels are not measurements
        timer = measured.OpTimer(session)
        progress("tracing forward")
        with OpRecorder(state, None, timer):
            _call_user(iteration, project, "during the training iteration", *inputs)
        repeats, skipped = [0], []
        for repeat in range(1, measured.REPEATS):
            progress(f"measuring (repeat {repeat + 1} of {measured.REPEATS})")
            mode = measured.RepeatMode(session, repeat, state.records)
            with mode:
                _call_user(iteration, project, "during the training iteration", *inputs)
            (repeats if mode.names == timer.names else skipped).append(repeat)
        torch.cuda.synchronize()  # CUPTI's flush does not wait for the GPU
        # Only the repeats that ran the recorded ops count (combine_repeats reads those).
        state.warnings.extend(measured.attach(state.ops, session.collect(), repeats, skipped))
    finally:
        session.close()  # cuptiFinalize: the next trace in this worker can subscribe again


def _torch_warnings():
    """An older torch runs other ops and kernels than the one the predictor is checked on."""
    return [warning("old_torch", version=torch.__version__)] if release(torch.__version__) < VALIDATED_TORCH else []


def _call_provider(fn, project, what, *args, **kwargs):
    return _call_user(fn, project, f"in {what} `{fn.__name__}`", *args, **kwargs)


def _call_user(fn, project, during, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except (TraceError, TraceInterrupted, ReplayMismatch):
        raise
    except MemoryError as exc:
        raise out_of_memory_error(exc, project) from None
    except Exception as exc:  # noqa: B902 - any failure of user code is reported
        if isinstance(exc, RuntimeError) and any(m in str(exc) for m in _OOM_MARKERS):
            raise out_of_memory_error(exc, project) from None
        raise user_exception(exc, project, during) from None


def _bad_return(fn, project, expected, value):
    from .loader import _def_line

    return TraceError(
        "bad_provider_signature",
        f"`{fn.__name__}` must return {expected}, but returned {type(value).__name__}",
        file=project.entry_file,
        line=_def_line(fn),
        hint=f"Make `{fn.__name__}` return {expected}.",
    )


@contextlib.contextmanager
def _backward_hooks(state):
    """Marks the backward pass: torch.Tensor.backward calls torch.autograd.backward."""
    original = torch.autograd.backward

    def backward(tensors, *args, **kwargs):
        roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        state.begin_backward(roots)
        try:
            return original(tensors, *args, **kwargs)
        finally:
            state.end_backward()

    torch.autograd.backward = backward
    try:
        yield
    finally:
        torch.autograd.backward = original


@contextlib.contextmanager
def _module_hooks(state):
    from torch.nn.modules import module as nn_module

    pre = nn_module.register_module_forward_pre_hook(state.enter_module)
    post = nn_module.register_module_forward_hook(state.exit_module)
    try:
        yield
    finally:
        pre.remove()
        post.remove()


def _tensor_bytes(t):
    t = distributed.local_tensor(t)
    return int(t.numel()) * int(t.element_size())


def _optimizer_state_tensors(optimizers):
    for optimizer in optimizers:
        yield from state_tensors(optimizer)


def _baseline_tensors(model, inputs):
    """What is in GPU memory before the iteration starts: the model and the batch (of a
    DTensor, the part this rank holds)."""
    for t in (*model.parameters(), *model.buffers(), *flatten_tensors(inputs)):
        yield distributed.local_tensor(t)


def _tracked_memory(state, model):
    """Figures of the MemoryTracker (docs/trace-format.md), plus per-op `saved_bytes` and
    `live_bytes`."""
    gradients = [(p, distributed.local_tensor(p.grad)) for p in model.parameters() if p.grad is not None]
    optimizer_state = [distributed.local_tensor(t) for t in _optimizer_state_tensors(state.optimizers)]
    figures, live_after_op = state.memory.summary(optimizer_state, gradients)
    for index, saved in state.memory.saved_bytes_by_op().items():
        if index < len(state.ops):  # else made by an unrecorded dispatch after the last op
            state.ops[index]["saved_bytes"] = saved
    for index, live in live_after_op.items():
        if index < len(state.ops):
            state.ops[index]["live_bytes"] = live
    return figures


def _memory(model, optimizers):
    params = list(model.parameters())
    state_bytes = sum(_tensor_bytes(value) for value in _optimizer_state_tensors(optimizers))
    return {
        "parameters_bytes": sum(_tensor_bytes(p) for p in params),
        "gradients_bytes": sum(_tensor_bytes(p) for p in params if p.requires_grad),
        "optimizer_state_bytes": state_bytes,
    }
