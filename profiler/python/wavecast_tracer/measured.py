"""Measured (cuda) mode: times every op on a real GPU and attaches its CUPTI kernels.

The iteration runs `WARMUP_ITERATIONS` times unrecorded (cuDNN autotuning,
allocator warm-up), then once recorded. Each recorded op is timed with CUDA
events around its dispatch and synchronized before the next one, so its
kernels are exactly those launched in between: CUPTI tags them with the op's
index through an external correlation id. Ops that mutate no input are run
`REPEATS` times and their times averaged; the kernels come from the first run.
"""

import torch

from .errors import TraceError

WARMUP_ITERATIONS = 2
REPEATS = 3
# External correlation ids at or above this mark repeated runs, whose kernels are dropped.
_REPEAT_ID_BASE = 1 << 62


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
            hint="Rebuild wavecast on a machine with the CUDA toolkit (CUPTI is found by CMake's "
            "FindCUDAToolkit), or trace in shape mode.",
        ) from None


def open_session():
    import wavecast_measured

    try:
        return wavecast_measured.Session()
    except RuntimeError as exc:  # wavecast_measured.CuptiError: the message names the fix
        raise TraceError("environment_error", str(exc),
                         hint="Fix the CUPTI problem above, or trace in shape mode.") from None


class OpTimer:
    """Runs each recorded op with CUDA events and CUPTI correlation around it."""

    def __init__(self, session):
        import wavecast_measured

        self.session = session
        self.timestamp = wavecast_measured.timestamp
        self.times_ms = {}
        self.windows = []

    def run(self, func, args, kwargs, op_index):
        out, elapsed = self._timed(func, args, kwargs, op_index, op_index)
        self.windows.append(elapsed[1])
        times = [elapsed[0]]
        if not func._schema.is_mutable:
            for repeat in range(1, REPEATS):
                times.append(self._timed(func, args, kwargs, _REPEAT_ID_BASE + op_index, None)[1][0])
        self.times_ms[op_index] = sum(times) / len(times)
        return out

    def _timed(self, func, args, kwargs, correlation_id, op_index):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        self.session.push_op(correlation_id)
        opened = self.timestamp()
        start.record()
        try:
            out = func(*args, **kwargs)
        finally:
            end.record()
            self.session.pop_op()
        end.synchronize()
        closed = self.timestamp()
        return out, (start.elapsed_time(end), (op_index, opened, closed))

    def attach(self, ops):
        """Adds `measured` and `kernels` to the recorded ops; returns warnings."""
        collected = self.session.collect([w for w in self.windows if w[0] is not None])
        kernels = collected["kernels"]
        for index, op in enumerate(ops):
            if index in self.times_ms:
                op["measured"] = {"time_ms": round(self.times_ms[index], 6)}
                op["kernels"] = kernels.get(index, [])
        warnings = []
        if collected["dropped"]:
            warnings.append(f"CUPTI dropped {collected['dropped']} activity records; "
                            "some ops lack kernels")
        return warnings
