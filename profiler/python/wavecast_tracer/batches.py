"""A script's DataLoader batches, made for real in the tracer's process (script_runner.py):
outside the trace's modes, so they are real CPU tensors until the script moves them to the
GPU. In the recorded iteration the time a batch takes is host work on the line that asked
for it: an op `wavecast::data_loading` with `args.host_ms`, the loader's number in
`args.loader` and the workers the script gave it in `args.workers`, and a
`host_time_measured` note there."""

import contextlib
import math
import time
from collections.abc import Mapping

import torch

from . import compat
from .patching import attributes_set
from .sandbox import REQUESTED_PINNING, REQUESTED_WORKERS
from .trace_warnings import warning
from .values import flatten_tensors

HOST_WORK_OP = "wavecast::data_loading"
_SHAPE_ONLY = "_wavecast_shape_only"  # set on a DataLoader iterator whose batches are fake
_FASTEST_BATCH_MS = "_wavecast_fastest_batch_ms"  # set on a DataLoader iterator: its quickest batch


class BatchLoading:
    """The batches of one script run (`run`: script_runner's _Run, told of each batch wanted
    and taken) and the host work they were."""

    def __init__(self, run):
        self.run = run
        self.host_ms = {}  # (file, line, the loader's workers) -> measured host milliseconds
        self.loaders = {}  # id of a DataLoader iterator -> its number in the trace

    @contextlib.contextmanager
    def real(self):
        """DataLoader batches are made for real, outside the trace's modes."""
        from torch.utils.data import dataloader
        from torch.utils._python_dispatch import _disable_current_modes

        cls = dataloader._BaseDataLoaderIter
        original = cls.__next__
        loading = self
        run = self.run

        def next_(iterator):
            run.batch_wanted(iterator)
            started, waited = time.perf_counter(), waited_for_a_cpu_ns()
            shape_only = getattr(iterator, _SHAPE_ONLY, False)
            run.loading = True
            try:
                if shape_only:
                    # A dataset of tensors the script made with torch: loaded under the trace's
                    # modes, unrecorded, so the real values of its ids and labels are followed
                    # (a model's value checks on them then take the path the real data takes),
                    # and which are host tensors.
                    with run.state.suppressing(), attributes_set(run.state.placement, {"loading": True}):
                        batch = original(iterator)
                else:
                    # Neither mode: the loader's own tensors are the CPU's, its ops not the
                    # iteration's (a transform's `torch.as_tensor(mean, device=x.device)` is
                    # no copy to the GPU), and its time is not the tracer's.
                    with _disable_current_modes(), compat.no_torch_function():
                        batch = original(iterator)
            finally:
                run.loading = False
            tensors = flatten_tensors(batch)
            if not shape_only and any(compat.is_fake(t) for t in tensors):
                setattr(iterator, _SHAPE_ONLY, True)
                shape_only = True
            run.state.placement.loaded(tensors, not shape_only, getattr(iterator, REQUESTED_PINNING, False))
            # Such batches time the tracer, not the loading: only real batches are host work,
            # timed without the time this thread waited for a CPU other processes held, at
            # the least a batch of this loader took in this trace (its warm-up fetches too):
            # the first batch pays what the loader does once, so a save does not move the
            # prediction by the machine's noise.
            if not shape_only:
                took = (time.perf_counter() - started) * 1e3 - (waited_for_a_cpu_ns() - waited) / 1e6
                fastest = min(max(took, 0.0), getattr(iterator, _FASTEST_BATCH_MS, math.inf))
                setattr(iterator, _FASTEST_BATCH_MS, fastest)
                if run.recording:
                    loading._host_work(fastest, iterator)
            if run.recording:
                full = getattr(getattr(iterator, "_index_sampler", None), "batch_size", None)
                run.batch_taken(samples_in(batch), full if isinstance(full, int) else None)
            return batch

        cls.__next__ = next_
        try:
            yield
        finally:
            cls.__next__ = original

    def _host_work(self, ms, iterator):
        """A batch made in `ms` on this CPU, in this process; the script's DataLoader workers
        (REQUESTED_WORKERS) make such batches beside its loop."""
        state = self.run.state
        frames = state.project_frames()
        loc = state.loc_json(frames)
        args = {"host_ms": round(ms, 3), "loader": self.loaders.setdefault(id(iterator), len(self.loaders))}
        workers = getattr(iterator, REQUESTED_WORKERS, 0)
        if workers:
            args["workers"] = workers
        state.ops.append({
            "id": len(state.ops), "name": HOST_WORK_OP, "phase": state.phase, "inputs": [], "outputs": [],
            "args": args, "loc": loc, "stack": state.stack_json(frames), "module": "",
            "fallback": False, "device": "cpu",
        })
        key = (loc["file"], loc["line"], workers)
        self.host_ms[key] = self.host_ms.get(key, 0.0) + ms

    def warnings(self):
        return [warning("host_time_measured", file, line, ms=round(ms, 3), **({"count": workers} if workers else {}))
                for (file, line, workers), ms in self.host_ms.items()]


def samples_in(batch):
    """The samples of a DataLoader batch, from its first field: a collated tensor's first
    dimension, or the length of a list of per-sample items (a detection collate's tuple of
    images, each [3, H, W], whose first dimension is not the batch's)."""
    field = batch
    while isinstance(field, Mapping) and field:  # a dict, a Hugging Face BatchEncoding
        field = next(iter(field.values()))
    if isinstance(field, (list, tuple)) and field:
        field = field[0]
        while isinstance(field, Mapping) and field:
            field = next(iter(field.values()))
        if isinstance(field, (list, tuple)):
            return len(field)
    if isinstance(field, torch.Tensor) and field.dim() > 0:
        return int(field.shape[0])
    return None


def waited_for_a_cpu_ns():
    """How long this thread has waited, runnable, for a CPU (Linux's schedstat: busy with
    other processes, the CPU was not its to use); 0 where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
