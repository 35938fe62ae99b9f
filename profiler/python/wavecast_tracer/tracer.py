"""Traces one training iteration of the user's script and returns the trace document."""

import contextlib
import io
import time

import torch

from . import compat, distributed, measured
from .attention import cuda_attention
from .autocast import checked_autocast_regions, cuda_autocast, precision
from .compiled import eager_compile
from .optimizers import cuda_optimizer_defaults, steady_state_steps
from .devices import cuda_mapped_to_cpu
from .errors import TraceError, TraceInterrupted, error_at, one_line, out_of_memory_error, timeout_error
from .loader import find_providers, load_entry_module, purge_project_modules, user_exception
from .memory import MemoryTracker
from .project import Project
from .recorder import OpRecorder, TraceState
from .trace_warnings import warning
from .values import flatten_tensors
from .versions import VALIDATED_TORCH, release
from .rnn import fuse_recurrent_layers

TRACE_FORMAT_VERSION = 2
MODES = ("shape", "cpu", "cuda")
_USER_OUTPUT_LIMIT = 8192
_OOM_MARKERS = ("can't allocate memory", "not enough memory", "DefaultCPUAllocator", "out of memory")


def run_trace(file, batch_size=None, mode="shape", progress=None, assume_gpu=False, wavecast_version=None,
              world_size=None):
    """Returns the trace document (docs/trace-format.md); raises TraceError.

    assume_gpu: the caller runs the script's model and batch on a GPU (as the truth
    harness does with the samples), so CPU tensors the iteration mixes with them are
    warned about even if the script never asks for CUDA itself.
    world_size: the ranks of a torch.distributed script's launch, which traces as rank 0
    (distributed.py); None: distributed.DEFAULT_WORLD_SIZE, and the torchrun environment
    only for a script that makes a process group.
    """
    progress = progress or (lambda message: None)
    if mode not in MODES:
        hint = ("Use mode \"shape\" (no arithmetic), \"cpu\" (real execution on the CPU) or "
                "\"cuda\" (measured on a GPU).")
        raise TraceError("bad_request", f"unsupported trace mode \"{mode}\"", hint=hint)
    if mode == "cuda":
        measured.check_cuda_available()
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise TraceError("bad_request", f"batch size must be a positive integer, got {batch_size!r}",
                         hint="Pass a batch size of 1 or more.")
    if world_size is not None and not isinstance(world_size, int) or isinstance(world_size, bool) or world_size is not None and world_size < 1:
        raise TraceError("bad_request", f"world size must be a positive integer, got {world_size!r}",
                         hint="Pass the number of ranks (GPUs) of the launch, 1 or more.")

    project = Project(file)
    started = time.perf_counter()
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
        try:
            with distributed.one_rank(world_size, project, map_cuda=mode != "cuda") as rank:
                document = _trace(project, batch_size, mode, progress, assume_gpu, rank)
        except TraceError as error:
            error.output = _tail(captured.getvalue())
            raise
    if wavecast_version:  # the worker's, from CMake's project version
        document["producer"]["wavecast"] = wavecast_version
    document["trace_seconds"] = round(time.perf_counter() - started, 3)
    output = captured.getvalue()
    if output:
        document["user_output"] = _tail(output)
    return document


def _tail(text):
    return text[-_USER_OUTPUT_LIMIT:]


def _trace(project, batch_size, mode, progress, assume_gpu, rank):
    purge_project_modules(project)
    progress("loading script")
    module = load_entry_module(project)
    providers = find_providers(module, project)
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
    state.assume_gpu = assume_gpu
    state.distributed = rank
    compat.ensure_meta_kernels()
    shape_only = mode == "shape"
    fake_mode = compat.make_fake_mode() if shape_only else contextlib.nullcontext()
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(fake_mode)
            if shape_only:
                stack.enter_context(compat.deepcopyable_fake_tensors())
                stack.enter_context(compat.convertible_fake_parameters())
                stack.enter_context(cuda_attention())
            stack.enter_context(compat.track_optimizers(state.optimizers.append))
            stack.enter_context(compat.spy_on_fallbacks(state.on_fallback))
            stack.enter_context(compat.replace_record_function(state.record_function_factory()))
            stack.enter_context(_backward_hooks(state))
            stack.enter_context(compat.default_precision())
            stack.enter_context(eager_compile(state.on_compile))
            autocast = None
            if mode != "cuda":
                stack.enter_context(cuda_mapped_to_cpu(state.on_cuda_mapped, state.placement, rank.device_count))
                stack.enter_context(compat.fused_dropout())
                stack.enter_context(cuda_optimizer_defaults())
                stack.enter_context(steady_state_steps(state))
                autocast = stack.enter_context(cuda_autocast())  # after cuda_attention: wraps it
                stack.enter_context(checked_autocast_regions(state.on_unmodelled_autocast))

            # In shape mode the recorder also follows the providers' small integer tensors
            # (labels, ids, masks) for value-dependent ops; it records only the iteration.
            recorder = OpRecorder(state, fake_mode if shape_only else None)
            recorder.recording = False
            with recorder if shape_only else contextlib.nullcontext():
                progress("building model")
                model = _call_provider(providers.model, project, "the model provider")
                if not isinstance(model, torch.nn.Module):
                    raise _bad_return(providers.model, project, "an nn.Module", model)
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

            state.name_modules(model)
            stack.enter_context(_module_hooks(state))
            if mode == "cuda":  # cuDNN already runs a recurrent layer as one op
                _measure(state, project, iteration, inputs, progress)
            else:
                stack.enter_context(fuse_recurrent_layers(state, compute_values=not shape_only))
                state.memory = MemoryTracker()
                state.memory.add_baseline(_baseline_tensors(model, inputs))
                progress("tracing forward")
                recorder.recording = True
                state.placement.recording = True
                try:
                    with recorder, state.memory.saved_tensors_hooks(), state.memory.watching_zero_grad():
                        _call_user(iteration, project, "during the training iteration", *inputs)
                finally:
                    state.placement.recording = False
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
    if mode == "cuda":
        document["device"] = torch.cuda.get_device_name()
    return document


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
    except (TraceError, TraceInterrupted):
        raise
    except MemoryError as exc:
        raise out_of_memory_error(exc, project) from None
    except Exception as exc:  # noqa: B902 - any failure of user code is reported
        if isinstance(exc, RuntimeError) and any(m in str(exc) for m in _OOM_MARKERS):
            raise out_of_memory_error(exc, project) from None
        if type(exc).__name__ in ("DataDependentOutputException", "DynamicOutputShapeException"):
            raise error_at(
                "unsupported_operation",
                f"{one_line(exc)}: its result depends on tensor values, which shape-only tracing does not compute",
                exc,
                project,
                "Shape-only tracing knows the values of small integer/bool tensors (labels, "
                "ids, masks) only; avoid value-dependent operations (.item(), nonzero, boolean "
                "masks) on computed float tensors in the iteration, or trace in cpu mode.",
            ) from None
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
        for per_param in optimizer.state.values():
            for value in per_param.values():
                if isinstance(value, torch.Tensor):
                    yield value


def _baseline_tensors(model, inputs):
    """What is in GPU memory before the iteration starts: the model and the batch (of a
    DTensor, the part this rank holds)."""
    for t in (*model.parameters(), *model.buffers(), *flatten_tensors(inputs)):
        yield distributed.local_tensor(t)


def _tracked_memory(state, model):
    """Figures of the MemoryTracker (docs/trace-format.md), plus per-op `saved_bytes`."""
    gradients = [(p, distributed.local_tensor(p.grad)) for p in model.parameters() if p.grad is not None]
    optimizer_state = [distributed.local_tensor(t) for t in _optimizer_state_tensors(state.optimizers)]
    figures = state.memory.summary(optimizer_state, gradients)
    for index, saved in state.memory.saved_bytes_by_op().items():
        if index < len(state.ops):  # else made by an unrecorded dispatch after the last op
            state.ops[index]["saved_bytes"] = saved
    return figures


def _memory(model, optimizers):
    params = list(model.parameters())
    state_bytes = sum(_tensor_bytes(value) for value in _optimizer_state_tensors(optimizers))
    return {
        "parameters_bytes": sum(_tensor_bytes(p) for p in params),
        "gradients_bytes": sum(_tensor_bytes(p) for p in params if p.requires_grad),
        "optimizer_state_bytes": state_bytes,
    }
