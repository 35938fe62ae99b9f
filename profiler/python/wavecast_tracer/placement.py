"""Which tensors of the iteration would be on the host with a GPU, and the copies between
host memory and the GPU (`Placement`): the tracer runs everything on the CPU, so where a
tensor would be is followed on the side (devices.py maps CUDA to the CPU)."""

import contextlib
import math
import time

import torch

from . import compat
from .trace_warnings import location, warning

# Set on a tensor that the iteration created on the CPU (and on results of ops on
# such tensors only): the (file, line) it was created at.
HOST = "_wavecast_host"

# Set in shape mode on a real tensor the script copied to the GPU (a module's loaded weights,
# a table it moves): the copy stays real, as its source is, but is taken for a GPU tensor, so
# what ops compute from it is shape-only (recorder.OpRecorder._host_data_inputs). A parameter
# given such a copy's `.data` (Module.to) is marked too: it stays the same object, and tied
# weights stay tied.
ON_GPU = "_wavecast_on_gpu"

# Set on a host tensor in page-locked memory (`pin_memory()`, a DataLoader's pin_memory=True):
# the GPU's copy engine reads it directly, without staging.
PINNED = "_wavecast_pinned"

# The ops the copies between host memory and the GPU are recorded as, and the script's
# waits for the GPU (docs/trace-format.md).
HOST_TO_DEVICE_OP = "wavecast::host_to_device"
DEVICE_TO_HOST_OP = "wavecast::device_to_host"
SYNCHRONIZE_OP = "wavecast::synchronize"

# Functions that create a tensor from sizes or data, on `device=` (the CPU when not given).
_FACTORIES = frozenset(
    f
    for f in (
        getattr(torch, name, None)
        for name in ("arange", "range", "ones", "zeros", "empty", "full", "rand", "randn", "randint",
                     "randperm", "tensor", "as_tensor", "linspace", "logspace", "eye", "empty_strided",
                     "scalar_tensor", "tril_indices", "triu_indices", "normal")
    )
    if f is not None
)
# Calls that put their result on the device of a tensor argument.
_TO_TENSORS_DEVICE = frozenset({torch.Tensor.to, torch.Tensor.type_as})
# Tensor methods that make a tensor on their tensor's device by a factory that is not given it.
_NEW_ON_ITS_DEVICE = frozenset({torch.Tensor.__deepcopy__, torch.Tensor.new})
# `x.data = value` and `x.data` (method-wrappers: equal, not identical, on each access).
_SET_DATA = torch.Tensor.data.__set__
_GET_DATA = torch.Tensor.data.__get__
# Factories that copy the data they are given (a list, a NumPy array, a tensor): on a GPU
# device, from host memory.
_DATA_FACTORIES = frozenset({torch.tensor, torch.as_tensor})
# What such a factory copies when its data is no tensor: the result's bytes.
_HOST_DATA = object()


def _placed_as(t, source):
    """`t`, marked as a GPU copy (ON_GPU) where `source` is one."""
    if getattr(source, ON_GPU, False):
        setattr(t, ON_GPU, True)
    return t


def is_host(t):
    return getattr(t, HOST, None) is not None


def _moves_to_gpu(args):
    """Whether .to(*args) / .type_as(*args) targets a GPU tensor's device."""
    for value in args:
        if isinstance(value, torch.device) or (isinstance(value, torch.Tensor) and not is_host(value)):
            return True
    return False


def _has_tensor(args, kwargs):
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return True
        if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            return True
    return False


def pinned(t):
    """`t.pin_memory()` as the tracer answers it: the tensor itself (page-locking needs a
    GPU, and changes no GPU work), marked as page-locked for its copy to the GPU."""
    setattr(t, PINNED, True)
    return t


def _non_blocking(args, kwargs):
    """The non_blocking flag of `.to(...)` or `.cuda(...)`: by name, or the first bool given
    (none of their other positional arguments is one)."""
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    return next((a for a in args[1:] if isinstance(a, bool)), False)


# The CUDA driver stages a pageable copy through page-locked buffers with one thread's
# memcpy: timed on at most this many bytes, then scaled.
_STAGING_SAMPLE_BYTES = 64 << 20


def staging_ms(nbytes):
    """How long this CPU takes to copy `nbytes` of pageable memory on one thread (the best
    of three copies of a sample block), or None without NumPy."""
    try:
        import numpy as np
    except ImportError:
        return None
    n = max(1, min(nbytes, _STAGING_SAMPLE_BYTES))
    source = np.ones(n, dtype=np.uint8)
    target = np.empty_like(source)
    np.copyto(target, source)  # the target's pages, as the driver's staging buffers are
    best = math.inf
    for _ in range(3):
        started = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - started)
    return best * 1e3 * nbytes / n


class Placement:
    """Which tensors of the iteration the script left on the CPU ("host" tensors).

    The tracer runs everything on the CPU. On a GPU, a tensor the iteration
    creates with a factory (torch.arange, ones, tensor, ...) and no CUDA device
    stays on the CPU, and so do the results of ops on such tensors only;
    `.cuda()`, `.to("cuda")`, `.to(<GPU tensor>)` and `.to(<GPU tensor>.device)`
    move it to the GPU, and a factory given `device=<GPU tensor>.device` creates
    it there. Every other tensor (parameters, the batch, activations)
    is taken to be on the GPU. An op that mixes a host tensor of one or more
    dimensions with GPU tensors fails on a GPU (index ops and copies instead
    copy it to the GPU); a 0-dim host tensor is allowed by torch.
    """

    def __init__(self, ops=None, project_frames=None, copied_to_gpu=None, copied_to_host=None,
                 host_side=None):
        # True while the iteration runs: only its tensors can be host tensors.
        self.recording = False
        # Called with each host tensor the script copies to the GPU, and its non_blocking;
        # with each GPU tensor it copies to host memory, and its non_blocking.
        self._copied_to_gpu = copied_to_gpu or (lambda tensor, non_blocking: None)
        self._copied_to_host = copied_to_host or (lambda tensor, non_blocking: None)
        # A context for the tracer's own work on the host's side of such a copy: neither
        # recorded as GPU ops nor counted as GPU memory.
        self._host_side = host_side or contextlib.nullcontext
        # Set by the first host tensor: until then the ops need no checks.
        self.any_host = False
        # True while a DataLoader makes a batch from the script's tensors: its ops are not
        # recorded, but which of their results are host tensors is followed.
        self.loading = False
        self._ops = ops if ops is not None else []
        self._project_frames = project_frames or (lambda: ())
        # (file, line) of an op that mixed host and GPU tensors -> (file, line) the host one was created at.
        self.mixed = {}
        # True in shape mode (set by recorder.OpRecorder): real tensors are the host's data,
        # and their copies to the GPU are marked ON_GPU.
        self.shape_only = False

    # --- torch function level (devices._CudaAsCpu) ---------------------------
    def call(self, func, args, kwargs, to_gpu):
        """Runs func (its CUDA devices already mapped to the CPU) and updates which tensors are host ones.

        A torch.device given as `device=` or to `.to()` is taken for a GPU tensor's
        (`device=x.device`): the script's GPU tensors report the GPU to the script
        (_CudaAsCpu maps that), but torch's own Python is told the CPU, so its
        `x.device` cannot tell; a device given as a string ("cpu") or none at all means
        the CPU.
        """
        if func == _GET_DATA:
            # An alias of a GPU copy is one (Parameter's deepcopy clones it).
            return _placed_as(func(*args, **kwargs), args[0])
        if func == _SET_DATA and self._real(args[0]):
            value = args[1]
            if compat.is_fake(value):
                # A real tensor given a shape-only value (transformers' resize_token_embeddings
                # sets a loaded weight's `.data` to a new embedding's) stays real, of that
                # shape: allocated, not computed, as the value was never known.
                with compat.real_execution():
                    args = (args[0], torch.empty_strided(value.shape, value.stride(), dtype=value.dtype))
            else:
                _placed_as(args[0], value)
        elif (func in _NEW_ON_ITS_DEVICE and not to_gpu and self.shape_only
              and not compat.is_fake(args[0])):
            # Made by a factory the dispatcher sees without the real tensor, so shape mode
            # would make it shape-only (copy.deepcopy then sets its real storage on it): of
            # a real tensor, a real one, on the GPU where its source is.
            with compat.real_execution():
                return _placed_as(func(*args, **kwargs), args[0])
        if not self.recording:
            out = func(*args, **kwargs)
            return self._gpu_copy(out) if to_gpu and self._real(out) else out
        if not to_gpu:
            if isinstance(kwargs.get("device"), torch.device):
                to_gpu = True
            elif func in _TO_TENSORS_DEVICE:
                to_gpu = _moves_to_gpu(args[1:])
        if not to_gpu and func in _FACTORIES and not _has_tensor(args, kwargs):
            start = len(self._ops)
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                self._created_on_host(out, start)
            return out
        source = self._host_source(func, args) if to_gpu else None
        out = func(*args, **kwargs)
        if to_gpu and isinstance(out, torch.Tensor) and (is_host(out) or self._real(out)):
            out = self._gpu_copy(out)
        if source is not None and isinstance(out, torch.Tensor):
            # torch.tensor(data, device=...) copies without non_blocking
            self._copied_to_gpu(out if source is _HOST_DATA else source, _non_blocking(args, kwargs))
        return out

    def _gpu_copy(self, t):
        """The GPU tensor a host tensor's copy to the GPU makes, as a new tensor: the host
        one stays a host tensor (a CPU tensor the script moves on every pass is copied on
        every pass). An unrecorded view of it in the tracer, where both are on the CPU: no
        data is copied, no memory counted twice."""
        with self._host_side():
            copy = t.view_as(t)
        if is_host(copy):
            delattr(copy, HOST)
        if self._real(copy):
            setattr(copy, ON_GPU, True)
        return copy

    def _real(self, t):
        """Whether `t` is a real tensor of shape mode's host data: not a fake one, nor a copy
        on the GPU (ON_GPU)."""
        return (self.shape_only and isinstance(t, torch.Tensor) and not compat.is_fake(t)
                and not getattr(t, ON_GPU, False))

    @staticmethod
    def _host_source(func, args):
        """What a call that puts its result on the GPU copies from host memory: a host tensor,
        _HOST_DATA for data that is no tensor (a list, a NumPy array), or None when it copies
        nothing from the host."""
        if not args:
            return None
        data = args[0]
        if func in _TO_TENSORS_DEVICE or (func in _DATA_FACTORIES and isinstance(data, torch.Tensor)):
            return data if isinstance(data, torch.Tensor) and is_host(data) else None
        return _HOST_DATA if func in _DATA_FACTORIES else None

    def copy_to_host(self, func, args, kwargs):
        """`x.cpu()`, `x.to("cpu")`, `x.to(<host tensor>)` of a GPU tensor: the copy over the
        host link, whose result is a host tensor (a new one: the tracer's GPU tensor is on
        the CPU already, and `.cpu()` would return it)."""
        source = args[0]
        with self._host_side():
            out = func(*args, **kwargs)
            if out is source:
                out = source.clone()
        if not self.recording or not isinstance(out, torch.Tensor):
            return out
        setattr(out, HOST, self._site())
        self.any_host = True
        self._copied_to_host(out, _non_blocking(args, kwargs))
        return out

    def read_back(self, func, args, kwargs):
        """`x.tolist()` of a GPU tensor: one copy to host memory, read there (not an `.item()`
        per element, as the tracer's tensors would run it)."""
        self._copied_to_host(args[0], False)
        with self._host_side():
            return func(*args, **kwargs)

    def moved_by_cuda(self, t, args, kwargs):
        """`t.cuda(...)`: a host tensor is copied to the GPU, the copy returned."""
        if not is_host(t):
            return self._gpu_copy(t) if self._real(t) else t
        if self.recording:
            self._copied_to_gpu(t, _non_blocking(args, kwargs))
        return self._gpu_copy(t)

    def loaded(self, tensors, made_here, pinned_memory):
        """A DataLoader's batch. `made_here`: made by the loader's own code, so host tensors
        at the line that asked for it; otherwise made from the script's tensors, host ones
        where those were (followed while the loader ran: `loading`). A loader that pins its
        batches puts its host tensors in page-locked memory."""
        if not self.recording:
            return
        if made_here:
            site = self._site()
            for t in tensors:
                if not is_host(t):
                    setattr(t, HOST, site)
                    self.any_host = True
        if pinned_memory:
            for t in tensors:
                if is_host(t):
                    setattr(t, PINNED, True)

    def host_memory_view(self, make):
        """`make` (torch.from_numpy, torch.frombuffer) as the script calls it: a view of
        host memory that no torch function mode sees, a host tensor on a GPU too (nanoGPT
        stacks its batch from such views on the CPU, then copies it over)."""
        def view(*args, **kwargs):
            out = make(*args, **kwargs)
            if self.recording and isinstance(out, torch.Tensor):
                self._created_on_host(out, len(self._ops))
            return out

        return view

    def loaded_on_host(self, tensors):
        """`tensors` (a checkpoint torch.load read) are host tensors, made at the script's line."""
        site = self._site()
        for t in tensors:
            setattr(t, HOST, site)
            self.any_host = True

    def _site(self):
        """(file, line) of the script line running now."""
        frames = self._project_frames()
        return frames[-1][:2] if frames else ("", 0)

    def _created_on_host(self, t, first_op):
        setattr(t, HOST, self._site())
        self.any_host = True
        for op in self._ops[first_op:]:  # what the factory ran (aten::arange, fill_, ...)
            op["device"] = "cpu"

    # --- dispatch level (recorder.OpRecorder) -------------------------------
    def follow(self, args, kwargs, outputs, op):
        """After an op of the iteration: its outputs are host tensors when all its tensor
        inputs are (the op then runs on the CPU: op["device"] = "cpu"); a host tensor with
        dimensions among GPU inputs is remembered in `mixed` under the op's line."""
        host = None
        wide_host = None
        gpu = False
        for group in (args, kwargs.values()):
            for value in group:
                if isinstance(value, torch.Tensor):
                    values = (value,)
                elif isinstance(value, (list, tuple)):
                    values = value
                else:
                    continue
                for t in values:
                    if not isinstance(t, torch.Tensor):
                        continue
                    site = getattr(t, HOST, None)
                    if site is None:
                        gpu = True
                    else:
                        host = site
                        if wide_host is None and t.dim() > 0:
                            wide_host = site
        if host is None:
            return
        if not gpu:
            for t in outputs:
                if not is_host(t):
                    setattr(t, HOST, host)
            if op is not None:
                op["device"] = "cpu"
        elif wide_host is not None and op is not None:
            loc = op["loc"]
            self.mixed.setdefault((loc["file"], loc["line"]), wide_host)

    def warnings(self):
        out = []
        for (file, line), created in self.mixed.items():
            facts = {"origin": location(*created)} if created[0] and created != (file, line) else {}
            out.append(warning("host_tensor_with_gpu", file, line, **facts))
        return out
