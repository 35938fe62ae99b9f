"""Measured (cuda) mode: runs the iteration on a real GPU and gives every op its kernels.

CUPTI records every kernel, copy and fill with its GPU start and end. While the
recorder runs an op, the op's index is pushed as CUPTI's external correlation id
on the thread that runs it (the main thread forward, autograd's device thread
backward: CUPTI keeps one stack per thread), so each kernel is credited to the
op that launched it, however late the GPU runs it. An op's time is the GPU time
of its kernels, not a CPU-visible window, so the tracer's own overhead and the
GPU idling between launches are not in it.

The model and the batch are moved to the GPU. CUPTI is enabled before
`WARMUP_ITERATIONS` unrecorded iterations (cuDNN's algorithm choice, the
caching allocator, lazy module loading and CUPTI's own first-launch cost all
land there), then the iteration runs `REPEATS` times: the first recorded op by
op, the others only tagged with (repeat << 32 | op index). Each kernel's
duration is its median over the repeats.
"""

import statistics
from collections import defaultdict

import torch

from . import compat
from .errors import TraceError
from .trace_warnings import warning

WARMUP_ITERATIONS = 3
REPEATS = 5
_REPEAT_SHIFT = 32
_OP_MASK = (1 << _REPEAT_SHIFT) - 1


def check_cuda_available():
    """Raises a TraceError unless a GPU and this build's CUPTI module can measure."""
    if not torch.cuda.is_available():
        raise TraceError(
            "environment_error",
            "no CUDA GPU visible to torch; use shape mode",
            hint="Measured mode runs the iteration on a GPU: run wavecast on a machine with an "
            "NVIDIA GPU, its driver and a CUDA build of PyTorch, or trace in shape mode.",
        )
    try:
        import wavecast_measured  # noqa: F401 - embedded in wavecast-worker built with CUPTI
    except ImportError:
        raise TraceError(
            "environment_error",
            "this wavecast-worker was built without CUPTI, so it cannot record kernels",
            hint="Rebuild wavecast where CUPTI's headers are (the CUDA toolkit, or the "
            "nvidia-cuda-cupti wheel of a CUDA build of torch in its Python environment), "
            "or trace in shape mode.",
        ) from None


def open_session():
    import wavecast_measured

    try:
        return wavecast_measured.Session()
    except RuntimeError as exc:  # wavecast_measured.CuptiError: the message names the fix
        raise TraceError("environment_error", str(exc),
                         hint="Fix the CUPTI problem above, or trace in shape mode.") from None


def to_gpu(model, inputs):
    """The model and the batch on the GPU, as the truth harness runs the samples."""
    device = torch.device("cuda", torch.cuda.current_device())
    model.to(device)  # in place: parameters keep their identity for the optimizer
    return model, _moved(inputs, device)


def _moved(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_moved(v, device) for v in value)
    if isinstance(value, dict):
        return {key: _moved(v, device) for key, v in value.items()}
    return value


def correlation_id(repeat, op_index):
    return (repeat << _REPEAT_SHIFT) | op_index


class OpTimer:
    """Tags each recorded op's GPU work with its index (repeat 0)."""

    def __init__(self, session):
        self.session = session
        self.names = []  # the recorded ops' names, in order, to check the repeats against

    def run(self, func, args, kwargs, op_index):
        self.names.append(compat.op_name(func))
        return tagged(self.session, correlation_id(0, op_index), func, args, kwargs)


def tagged(session, external_id, func, args, kwargs):
    # Pushed and popped on the thread that runs the op: its launches carry the id.
    session.push_op(external_id)
    try:
        return func(*args, **kwargs)
    finally:
        session.pop_op()


class RepeatMode(compat.TorchDispatchMode):
    """Later repeats: tags the ops the recorder would record, in the same order."""

    def __init__(self, session, repeat, is_recorded):
        super().__init__()
        self.session = session
        self.repeat = repeat
        self.is_recorded = is_recorded  # name -> whether the recorder records such an op
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = compat.op_name(func)
        if not self.is_recorded(name):
            return func(*args, **kwargs)
        index = len(self.names)
        self.names.append(name)
        return tagged(self.session, correlation_id(self.repeat, index), func, args, kwargs)


def combine_repeats(kernels_by_id, op_count, repeats):
    """{op index: (kernels, time_ms)} from {external id: [kernel]} over `repeats` runs.

    Each kernel's duration is its median over the repeats when every repeat ran the
    same number of kernels for the op (the usual case); otherwise the op keeps the
    repeat whose total is the median. time_ms is the sum of the kernels' durations.
    """
    by_op = defaultdict(dict)
    for external_id, kernels in kernels_by_id.items():
        by_op[external_id & _OP_MASK][external_id >> _REPEAT_SHIFT] = kernels
    out = {}
    for index in range(op_count):
        runs = [by_op[index].get(r, []) for r in repeats]
        if not runs:
            continue
        if all(len(run) == len(runs[0]) for run in runs):
            kernels = []
            for position, first in enumerate(runs[0]):
                kernel = dict(first)
                kernel["duration_ms"] = statistics.median(run[position]["duration_ms"] for run in runs)
                kernels.append(kernel)
        else:
            totals = sorted(runs, key=lambda run: sum(k["duration_ms"] for k in run))
            kernels = [dict(k) for k in totals[len(totals) // 2]]
        out[index] = (kernels, sum(k["duration_ms"] for k in kernels))
    return out


def attach(ops, collected, repeats, skipped_repeats=()):
    """Adds `measured` and `kernels` to the recorded ops; returns warnings."""
    combined = combine_repeats(collected["kernels"], len(ops), repeats)
    for index, op in enumerate(ops):
        kernels, time_ms = combined.get(index, ([], 0.0))
        op["measured"] = {"time_ms": round(time_ms, 6), "repeats": len(repeats)}
        op["kernels"] = kernels
    warnings = []
    if collected["dropped"]:
        warnings.append(warning("cupti_dropped", count=collected["dropped"]))
    if collected["unmatched"]:
        unmatched_ms = collected["unmatched_ms"] / max(1, len(repeats) + len(skipped_repeats))
        warnings.append(warning("kernels_outside_ops", count=collected["unmatched"], ms=round(unmatched_ms, 6)))
    for repeat in skipped_repeats:
        warnings.append(warning("repeat_skipped", repeat=repeat + 1))
    return warnings
