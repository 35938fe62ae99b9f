"""Records every ATen operation of one training iteration (a TorchDispatchMode)."""

import contextlib
import io
import os

import torch

from . import compat, multi_tensor
from .collectives import symmetric_values
from .cuda_kernels import SHAPE_KERNELS
from .patching import attributes_set
from .placement import HOST, ON_GPU
from .trace_warnings import location, warning
from .values import Shadows, flatten_tensors

# FakeTensorMode turns real tensors into fake ones itself through these.
_LIFT_OPS = frozenset({torch.ops.aten.lift_fresh.default, torch.ops.aten.lift.default})
# A tensor's device as torch's C++ asks for it (autograd's engine, the optimizers' grouping
# by device): thousands per iteration, none of them work, answered by the fake mode below.
_DEVICE_QUERY = torch.ops.prim.device.default
_LOCAL_SCALAR_DENSE = torch.ops.aten._local_scalar_dense.default


# Matrix work the CPU runs in float16 tens to hundreds of times slower than in float32 (it
# has no float16 kernels for it): cpu mode computes it in float32 and rounds the results to
# float16, as a GPU's tensor cores accumulate in float32; the op keeps its float16 dtypes.
_SLOW_IN_FLOAT16_ON_CPU = frozenset(
    getattr(torch.ops.aten, name)
    for name in ("convolution", "_convolution", "convolution_backward", "mm", "addmm", "bmm", "baddbmm", "addbmm"))


def _computed_in_float32(func, args, kwargs):
    """Runs `func`, whose floating inputs are all float16 CPU tensors, in float32; its floating
    outputs back in float16."""
    widened = _recast(args, torch.float16, torch.float32)
    out = func(*widened, **{k: _recast(v, torch.float16, torch.float32) for k, v in kwargs.items()})
    return _recast(out, torch.float32, torch.float16)


def _recast(value, source, target):
    """`value` (a tensor, or lists and tuples of them) with its `source` tensors as `target`."""
    if isinstance(value, torch.Tensor) and value.dtype == source:
        return value.to(target)
    if isinstance(value, (list, tuple)):
        return type(value)(_recast(v, source, target) for v in value)
    return value


def _half_on_cpu(func, args, kwargs):
    """Whether `func` is matrix work on float16 CPU tensors only (_SLOW_IN_FLOAT16_ON_CPU)."""
    if func.overloadpacket not in _SLOW_IN_FLOAT16_ON_CPU or func._schema.is_mutable:
        return False
    floats = [t for t in flatten_tensors((args, list(kwargs.values()))) if t.is_floating_point()]
    return bool(floats) and all(t.dtype == torch.float16 and t.device.type == "cpu" for t in floats)


# The most bytes the ops on host data (OpRecorder._host_data_inputs) make for real in one trace:
# past it they are shape-only, so a checkpoint's weights converted on the host (a model's
# gigabytes) do not take this machine's memory; a dataset's tensors fit well within it.
_HOST_DATA_BYTES = 2 << 30


def _checkpoint_bytes(f):
    """The bytes torch.load would read from `f` (a path or an open file), else None."""
    try:
        if isinstance(f, (str, bytes, os.PathLike)):
            return os.path.getsize(f)
        if isinstance(f, io.BytesIO):
            return len(f.getbuffer()) - f.tell()
        return os.fstat(f.fileno()).st_size - f.tell()
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return None


def _maps_to_host(map_location):
    """Whether torch.load's `map_location` puts every tensor on the host (None: where each
    was saved, which the load tells)."""
    if map_location is None:
        return True
    if isinstance(map_location, (str, torch.device)):
        return torch.device(map_location).type == "cpu"
    if isinstance(map_location, dict):
        return all(torch.device(device).type == "cpu" for device in map_location.values())
    return False


def _has_real_tensor(values):
    for value in values:
        if isinstance(value, torch.Tensor):
            if not compat.is_fake(value):
                return True
        elif isinstance(value, (list, tuple)) and _has_real_tensor(value):
            return True
    return False


class OpRecorder(compat.TorchDispatchMode):
    def __init__(self, state, fake_mode=None, timer=None):
        super().__init__()
        self.state = state
        self.fake_mode = fake_mode
        # Measured mode: timer.run(func, args, kwargs, op_index) runs and times a recorded op.
        self.timer = timer
        self.shadows = Shadows(site=state.site) if fake_mode is not None else None
        # False while the providers build the model and inputs: shadows are kept, ops not recorded.
        self.recording = True
        # True while a tensor subclass's op runs with this mode entered again.
        self._in_subclass = False
        # Bytes the ops on host data have made for real in this trace.
        self._host_data_bytes = 0
        if fake_mode is not None:
            state.placement.shape_only = True

    @property
    def recording(self):
        return self.state.recording

    @recording.setter
    def recording(self, value):
        self.state.recording = value

    def _to_fake(self, value):
        if isinstance(value, torch.Tensor) and not compat.is_fake(value):
            fake = self.fake_mode.from_tensor(value)
            self.shadows.remember(fake, value)
            # A host tensor stays one, and one moved to the GPU since its fake was made (the
            # conversion is memoized: a batch read on the host, then moved) is a GPU one.
            site = getattr(value, HOST, None)
            if site is not None:
                setattr(fake, HOST, site)
            elif getattr(fake, HOST, None) is not None:
                delattr(fake, HOST)
            return fake
        if isinstance(value, (list, tuple)):
            return type(value)(self._to_fake(v) for v in value)
        return value

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _DEVICE_QUERY:
            return func(*args)
        kwargs = kwargs or {}
        state = self.state
        rank = state.distributed
        collectives = None
        if rank is not None and rank.initialized:
            if rank.hidden:  # torch's own set-up: DTensor's metadata runs, a pipeline's first step
                return func(*args, **kwargs)
            if compat.has_wrapper_subclass(args) or compat.has_wrapper_subclass(kwargs.values()):
                return self._through_subclass(func, args, kwargs)
            collectives = rank.collectives
        # Real tensors reach shape-only tracing from module-level constants and
        # from torch internals that wrap Python scalars; 1.13's FakeTensorMode
        # refuses them, so they are converted here.
        host_inputs = None
        if self.fake_mode is not None and (_has_real_tensor(args) or _has_real_tensor(kwargs.values())):
            host_inputs = self._host_data_inputs(func, args, kwargs)
            if host_inputs is None and func not in _LIFT_OPS:
                args = self._to_fake(args)
                kwargs = {k: self._to_fake(v) for k, v in kwargs.items()}
        if state._pending_outputs and not compat.is_view_op(func):
            # Not on a view op: after an in-place op on a view (EfficientNet's in-place dropout
            # on a flattened tensor) autograd replays the view through the dispatcher while it
            # holds that view's lock, and reading the view's grad_fn then would deadlock.
            state.resolve_pending_outputs()
        state.fallback_hit = False
        name = compat.op_name(func)
        recorded = self.recording and state.records(name)
        if host_inputs is not None:
            out = self._run_on_host_data(func, args, kwargs, host_inputs)
        elif recorded and self.timer is not None:
            out = self.timer.run(func, args, kwargs, len(state.ops))
        elif self.shadows is not None:
            out = self._run_shape_only(func, args, kwargs)
        elif _half_on_cpu(func, args, kwargs):
            out = _computed_in_float32(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        if self.recording and state.memory is not None:
            state.memory.allocated(flatten_tensors(out), len(state.ops), state.phase)
        on_gradients = state.works_on_gradients(func, args, kwargs, out)
        if (state.unrecorded_stacks is not None and not self.recording and host_inputs is None
                and state.phase != "backward" and not state.suppressed):
            state.unrecorded_stacks[state.project_frames()] += 1
        if recorded:
            state.record(func, name, args, kwargs, out, on_gradients)
        if collectives is not None:
            if self.shadows is not None:
                for result, value in symmetric_values(name, func, args, kwargs, out, self.shadows.real):
                    self.shadows.remember_derived(result, value, func, args)
            pending = collectives.observe(state.ops[-1], func, name, args, kwargs, out) if recorded else None
            out = collectives.traced_work(name, args, out, pending)
        if (state.placement.any_host and self.recording and state.phase != "backward"
                and (not state.suppressed or state.placement.loading)):
            state.placement.follow(args, kwargs, flatten_tensors(out), state.ops[-1] if recorded else None)
        return out

    def _host_data_inputs(self, func, args, kwargs):
        """The tensors of an op that runs for real in shape mode, else None: every tensor it
        is given is a real CPU
        tensor (the script's data: made from bytes, NumPy or Python lists, a DataLoader's
        batch, and what was computed from those), as the script runs it on the host of a GPU
        machine; `torch.tensor(data)` and `torch.from_numpy` stay real (their lift). Its
        values then exist for the script to read (a dataset's `int(self.targets[i])`).
        Tensors copied to the GPU are not host data (placement.ON_GPU): the work on them is
        shape-only."""
        if func.namespace != "aten" or self._host_data_bytes >= _HOST_DATA_BYTES:
            return None
        tensors = flatten_tensors((args, list(kwargs.values())))
        if all(not compat.is_fake(t) and t.device.type == "cpu" and not getattr(t, ON_GPU, False) for t in tensors):
            return tensors
        return None

    @contextlib.contextmanager
    def checkpoints_read_for_real(self):
        """torch.load of a checkpoint on the host, within the host data's budget, reads it as
        without a tracer: its tensors are real CPU tensors, whose values the script may read
        (a resumed Adam's step counts, BatchNorm's num_batches_tracked). Under the fake mode
        torch.load reads no data. A checkpoint restored to the GPU (saved there, or mapped
        there) or past the budget is loaded as before, shape-only."""
        original = torch.load

        def load(f, *args, **kwargs):
            size = _checkpoint_bytes(f)
            map_location = kwargs.get("map_location", args[0] if args else None)
            if (size is None or self._host_data_bytes + size > _HOST_DATA_BYTES
                    or not _maps_to_host(map_location)):
                return original(f, *args, **kwargs)
            saved_at = []

            def on_host(storage, location):
                saved_at.append(location)
                return storage

            start = f.tell() if hasattr(f, "tell") else None
            arguments = (f, on_host, *args[1:]) if args else (f,)
            options = dict(kwargs, map_location=on_host) if not args else kwargs
            with compat.without_modes():
                loaded = original(*arguments, **options)
            if map_location is None and any(not location.startswith("cpu") for location in saved_at):
                if start is not None:
                    f.seek(start)
                return original(f, *args, **kwargs)
            self._host_data_bytes += size
            self.state.placement.loaded_on_host(flatten_tensors(loaded))
            return loaded

        with attributes_set(torch, {"load": load}), attributes_set(torch.serialization, {"load": load}):
            yield

    def _run_on_host_data(self, func, args, kwargs, tensors):
        """Runs it for real, counting the bytes of the storages it made (_HOST_DATA_BYTES)."""
        with compat.no_torch_function():
            inputs = {compat.storage_identity(t) for t in tensors}
            with compat.real_execution():
                out = func(*args, **kwargs)
            made = {compat.storage_identity(t) for t in flatten_tensors(out)} - inputs
        self._host_data_bytes += sum(storage[1] for storage in made if storage is not None)
        return out

    def _report_invented(self, values):
        """A shape or a value read that depends on evenly spread picks (values.py) says so,
        at its line, naming the pick's."""
        origin = self.shadows.invented_origin(values)
        if origin is None or not self.recording:
            return
        if self.shadows.only_invented(values):
            self.state.invented_reads.add(len(self.state.ops))  # the op about to be recorded
        file, line, choices = origin
        facts = {"origin": location(file, line)} if file else {}
        self.state.warn_once(warning("even_routing", *self.state.site(), count=choices, **facts))

    def _through_subclass(self, func, args, kwargs):
        """An op on a tensor subclass (DTensor, AsyncCollectiveTensor) is recorded as the ops
        the subclass runs on this rank's local tensors, collectives included: this mode is
        entered again around the op and lets the subclass handle it. Its output's autograd
        node belongs to the last of those ops (the local computation)."""
        if self._in_subclass:
            return NotImplemented
        state = self.state
        start = len(state.ops)
        self._in_subclass = True
        try:
            with self:
                out = func(*args, **kwargs)
        finally:
            self._in_subclass = False
        if self.recording and state.phase == "forward" and len(state.ops) > start:
            state.expect_grad_fn(len(state.ops) - 1, flatten_tensors(out))
        return out

    def _run_shape_only(self, func, args, kwargs):
        if func is _LOCAL_SCALAR_DENSE:
            # `.item()` of a tensor whose value is known (Adam reads each step tensor twice per
            # step): the value, without FakeTensorMode's way round to it.
            real = getattr(args[0], "constant", None)  # FakeTensorMode's own (torch.tensor(0.0))
            if real is None:
                real = self.shadows.real(args[0])
                if real is not None:
                    self.state.on_fallback(func)  # a value FakeTensorMode does not know
                    self._report_invented(args)  # split sizes, a token count
            if real is not None:
                with compat.real_execution():
                    return real.item()
        if multi_tensor.writes_in_place(func) and not compat.has_fake_constant(args[0]):
            # FakeTensorMode runs these through a Python decomposition per tensor (most of
            # an optimizer step's tracing); they change no metadata and return nothing. Not
            # skipped when FakeTensorMode follows a value (Adam's steps, made by
            # torch.tensor(0.0), which `step.item()` reads).
            self.shadows.follow(func, args, kwargs, None)
            return None
        if multi_tensor.makes_elementwise_list(func):
            # The same per-tensor decomposition (an SGD's weight decay, Adam's sqrt), whose
            # outputs are new tensors like the inputs: made directly.
            layouts = multi_tensor.new_list_layouts(args, kwargs)
            made = compat.fake_tensors(self.fake_mode, layouts) if layouts is not None else None
            if made is not None:
                return made
        shape_kernel = SHAPE_KERNELS.get(func)
        out = shape_kernel(args, kwargs) if shape_kernel is not None else None
        try:
            if out is None:
                out = func(*args, **kwargs)
        except Exception as exc:  # noqa: B902 - only value-dependent failures are handled
            if not compat.is_value_dependent_error(exc):
                raise
            out = self.shadows.fallback(func, args, kwargs, self.fake_mode)
            if out is None:
                raise
            self.state.on_fallback(func)
            self._report_invented((args, list(kwargs.values())))
            return out
        if func in _LIFT_OPS:
            real = args[0] if args else None
            if isinstance(real, torch.Tensor) and not compat.is_fake(real):
                self.shadows.remember(out, real)
        else:
            self.shadows.follow(func, args, kwargs, out)
        return out
