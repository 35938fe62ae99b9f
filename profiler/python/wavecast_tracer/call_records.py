"""What a model call did, as a trace records it for replay.py to replay: its op records,
its storages' allocations and frees in order, its outputs and the gradients it gave.

A call's records are kept only when they say all it did (`Capture.recorded`): no op read
a tensor value, every storage it made dies where the records place it or lives to the end
of the trace, its backward ops ran as one run, and every gradient it gave came from them.
"""

import sys

import torch
from torch.utils import _pytree as pytree

from . import compat, reuse
from .placement import is_host

# Ops whose result depends on tensor values (FakeTensorMode's fallbacks aside).
_VALUE_READS = frozenset({"aten::_local_scalar_dense", "aten::item", "aten::equal", "aten::is_nonzero"})
PRIMITIVES = (bool, int, float, str, type(None))


class RecordedCall:
    """One call of the model as a trace recorded it, with its op and storage indices made
    relative to the call (forward ops from 0, backward ops from 0)."""

    __slots__ = ("frames", "warnings", "output", "cuda_mapped", "any_host", "forward_ops", "backward_ops",
                 "forward_events", "backward_events", "outputs", "spec", "grads", "incoming", "casts",
                 "autocast_dtypes")

    def __init__(self):
        self.frames = ()  # the project frames of the call site
        self.warnings = []
        self.output = ""  # what the call printed (a shape it logs, a torch warning)
        self.cuda_mapped = False
        self.any_host = False
        self.forward_ops = []
        self.backward_ops = []
        # forward: ("alloc", local, bytes, op, saved) | ("kept", kept, op, saved) | ("free", local)
        # where `kept` is ("output", leaf) or ("cast", parameter): tensors the replay makes
        self.forward_events = []
        # backward: ("alloc", local, bytes, op) | ("grad", parameter, op) | ("free", local)
        #           | ("release", kept) (a saved one) | ("incoming", leaf) (an output's gradient)
        self.backward_events = []
        self.outputs = []  # per leaf: a tensor description, or the leaf itself
        # parameter position -> description of its autocast copy, which the autocast cache
        # keeps until its region ends
        self.casts = {}
        self.autocast_dtypes = []
        self.spec = None
        self.grads = {}  # parameter position -> description of the gradient it got
        # Per tensor output: what its incoming gradient looked like (None: it got none); the
        # backward ops' inputs follow from it (sum's expanded gradient, mean's, a scaled one).
        self.incoming = []


class TensorLayout:
    """What it takes to make a fake tensor like one the trace saw, and its storage's bytes."""

    __slots__ = ("shape", "stride", "offset", "dtype", "device", "storage_elements", "requires_grad")

    def __init__(self, t):
        self.shape = tuple(t.shape)
        self.stride = t.stride()
        self.offset = t.storage_offset()
        self.dtype = t.dtype
        self.device = t.device
        with compat.no_torch_function():
            self.storage_elements = compat.storage_identity(t)[1] // t.element_size()
        self.requires_grad = t.requires_grad

    def layout(self):
        """For compat.fake_tensors."""
        return self.shape, self.stride, self.offset, self.dtype, self.storage_elements, self.device

    def make(self):
        exact = 1 + sum((size - 1) * stride for size, stride in zip(self.shape, self.stride)) \
            if all(self.shape) else 0
        if self.offset == 0 and exact == self.storage_elements:
            return torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=self.device)
        base = torch.empty(self.storage_elements, dtype=self.dtype, device=self.device)
        return base.as_strided(self.shape, self.stride, self.offset)


class Capture:
    """A call being recorded: the trace's marks around it, completed after the iteration."""

    def __init__(self, key, fingerprint, model, recorder, state, autocast):
        self.key = key
        self._model = model
        self._autocast = autocast
        self._dtypes_start = len(autocast.dtypes)
        self._state = state
        self._recorder = recorder
        memory = state.memory
        self._frames = state.project_frames()
        self._op_start = len(state.ops)
        self._event_start = len(memory.events())
        self._saved_before = memory.saved_serials()
        self._warnings_start = len(state.warnings)
        self._output = [_output_position(), None]
        self._cuda_mapped = state.cuda_mapped
        self._any_host = state.placement.any_host
        self._mixed = len(state.placement.mixed)
        self._fingerprint = fingerprint  # reuse.fingerprint(model) as the call began
        self._parameters = [p for p in model.parameters() if p.requires_grad]
        self._op_end = self._event_end = None
        self._leaves = self._spec = None
        self._kept = {}  # storage serial -> ("output", leaf) or ("cast", parameter position)
        self._casts = {}  # parameter position -> TensorLayout of its autocast copy
        self._cast_ids = set()
        self._hits_start = None
        self._incoming = {}  # serial of an output's incoming gradient -> leaf
        self._incoming_looks = {}  # leaf -> looks of its incoming gradient
        self._grads = None  # [(position, serial, description)] after the first backward

    def forward_done(self, out):
        state, memory = self._state, self._state.memory
        self._op_end = len(state.ops)
        self._event_end = len(memory.events())
        self._output[1] = _output_position()
        if len(state.placement.mixed) != self._mixed or reuse.fingerprint(self._model) != self._fingerprint:
            return False  # a host tensor met GPU ones (a warning at a line), or the model changed
        for index in range(self._op_start, self._op_end):
            op = state.ops[index]
            reads = op["fallback"] or op["name"] in _VALUE_READS
            if (reads and index not in state.invented_reads) or op["phase"] != "forward":
                return False
        leaves, self._spec = pytree.tree_flatten(out)
        self._leaves = []
        for index, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor):
                serial = memory.serial_of(leaf)
                if (serial is None or serial in self._kept or self._recorder.shadows.real(leaf) is not None
                        or is_host(leaf)):
                    return False
                self._kept[serial] = ("output", index)
                self._leaves.append(TensorLayout(leaf))
                if leaf.requires_grad:
                    leaf.register_hook(self._incoming_gradient(index))
            elif isinstance(leaf, PRIMITIVES):
                self._leaves.append(leaf)
            else:
                return False
        return self._cached_casts()

    def _cached_casts(self):
        """Keeps the autocast copies of parameters the call cached (all of them: the cache
        was empty), which live until the region ends."""
        positions = {id(p): position for position, p in enumerate(self._parameters)}
        for weight, cast in self._autocast.cache.values():
            position = positions.get(id(weight))
            serial = self._state.memory.serial_of(cast)
            if position is None or serial is None or serial in self._kept:
                return False
            self._kept[serial] = ("cast", position)
            self._casts[position] = TensorLayout(cast)
            self._cast_ids.add(id(weight))
        self._hits_start = len(self._autocast.cache_hits)
        return True

    def _incoming_gradient(self, index):
        def hook(grad):
            self._incoming_looks.setdefault(index, looks(grad))
            serial = self._state.memory.serial_of(grad)
            if serial is not None:
                self._incoming.setdefault(serial, index)

        return hook

    def backward_done(self):
        if self._grads is not None:
            return
        memory = self._state.memory
        self._grads = []
        for position, parameter in enumerate(self._parameters):
            if parameter.grad is not None:
                self._grads.append((position, memory.serial_of(parameter.grad), TensorLayout(parameter.grad)))

    def recorded(self):
        """The RecordedCall, or None when the records do not say all the call did."""
        state, memory = self._state, self._state.memory
        events = memory.events()
        recorded = RecordedCall()
        recorded.frames = self._frames
        recorded.warnings = list(state.warnings[self._warnings_start:])
        start, end = self._output
        if start != end:
            if start is None or end is None:
                return None  # printed where the trace does not keep it
            recorded.output = sys.stdout.getvalue()[start:end]
        recorded.cuda_mapped = state.cuda_mapped and not self._cuda_mapped
        recorded.any_host = state.placement.any_host and not self._any_host
        recorded.spec = self._spec
        recorded.outputs = self._leaves
        recorded.casts = self._casts
        recorded.autocast_dtypes = list(self._autocast.dtypes[self._dtypes_start:])
        if any(hit in self._cast_ids for hit in self._autocast.cache_hits[self._hits_start:]):
            return None  # code after the call used its casts from the cache
        recorded.incoming = [self._incoming_looks.get(index) for index, leaf in enumerate(self._leaves)
                             if isinstance(leaf, TensorLayout)]
        start, end = self._op_start, self._op_end
        for op in state.ops[start:end]:
            op = _without_memory(op)
            op["id"] = op["forward_id"] = op["id"] - start
            recorded.forward_ops.append(op)
        saved = memory.saved_serials() - self._saved_before
        locals_ = {}  # serial -> local id of a storage only the records know
        live = set()
        first_serial = None
        for serial, delta, op_index, phase in events[self._event_start:self._event_end]:
            if phase is not None:  # an allocation; a free has no phase
                if not start <= op_index <= end:
                    return None
                first_serial = serial if first_serial is None else first_serial
                kept = self._kept.get(serial)
                if kept is not None:
                    recorded.forward_events.append(("kept", kept, op_index - start, serial in saved))
                else:
                    locals_[serial] = len(locals_)
                    recorded.forward_events.append(("alloc", locals_[serial], delta, op_index - start, serial in saved))
                live.add(serial)
            elif serial in live:
                live.discard(serial)
                recorded.forward_events.append(("free", locals_[serial]))
        if not all(serial in live for serial in self._kept):
            return None  # an output the call did not make (a parameter, an input, a view of one)
        return recorded if self._backward(recorded, events, locals_, live, saved) else None

    def _backward(self, recorded, events, locals_, live, saved):
        """Fills the backward part of `recorded`; False when the records do not say all."""
        state = self._state
        start, end = self._op_start, self._op_end
        backward = [index for index, op in enumerate(state.ops[end:], end)
                    if op["phase"] == "backward" and start <= op.get("forward_id", -1) < end]
        needs_gradient = any(isinstance(leaf, TensorLayout) and leaf.requires_grad for leaf in self._leaves)
        if not backward:
            # A call nothing flowed back through: its saved storages die with its outputs.
            return not needs_gradient and not _freed_later(events, self._event_end, live - set(self._kept))
        first, last = backward[0], backward[-1] + 1
        if backward != list(range(first, last)) or self._grads is None:
            return False
        recorded.backward_ops = []
        for op in state.ops[first:last]:
            op = _without_memory(op)
            op["id"] -= first
            op["forward_id"] -= start
            recorded.backward_ops.append(op)
        grad_serials = {serial: position for position, serial, _ in self._grads}
        if None in grad_serials:
            return False
        recorded.grads = {position: description for position, _, description in self._grads}
        released = set()

        known = set(locals_)  # storages of the call, those its backward makes included

        def belongs(serial, op_index, phase):
            if phase is not None:
                if first <= op_index < last:
                    known.add(serial)
                    return True
                return False
            # An output that autograd did not save dies when the iteration drops it, as it will.
            return serial in known or (serial in self._kept and serial in saved) or serial in self._incoming

        indices = [i for i in range(self._event_end, len(events))
                   if events[i][1] != 0 and belongs(events[i][0], events[i][2], events[i][3])]
        if not indices:
            return False
        for serial, delta, op_index, phase in events[indices[0]:indices[-1] + 1]:
            if delta == 0:
                continue  # an empty storage moves no figure
            if not belongs(serial, op_index, phase):
                if phase is not None:
                    return False  # another op's storage made among the call's backward ops
                continue  # a storage from before the call, freed then (a collected cycle)
            if phase is not None:
                position = grad_serials.get(serial)
                if position is not None:
                    recorded.backward_events.append(("grad", position, op_index - first))
                    continue
                locals_[serial] = len(locals_)
                live.add(serial)
                recorded.backward_events.append(("alloc", locals_[serial], delta, op_index - first))
            elif serial in self._kept:
                released.add(serial)
                recorded.backward_events.append(("release", self._kept[serial]))
            elif serial in self._incoming:
                recorded.backward_events.append(("incoming", self._incoming[serial]))
            else:
                if serial not in live:
                    return False
                live.discard(serial)
                recorded.backward_events.append(("free", locals_[serial]))
        if _freed_later(events, indices[-1], live - set(self._kept)):
            return False
        if sum(event[0] == "grad" for event in recorded.backward_events) != len(grad_serials):
            return False  # a gradient another op made (a tied weight's sum after the call's nodes)
        for serial, kept in self._kept.items():
            if serial not in released and serial in saved:
                recorded.backward_events.append(("release", kept))
        return True


def _output_position():
    """Where the script's output stands (run_trace keeps it in a StringIO), or None."""
    tell = getattr(sys.stdout, "tell", None)
    try:
        return tell() if tell is not None and hasattr(sys.stdout, "getvalue") else None
    except (OSError, ValueError):
        return None


def _freed_later(events, start, serials):
    """Whether a storage of `serials` with bytes dies after event `start`. One that lives to the end of
    the trace (a tensor whose values the trace follows: Shadows holds it) stays live in a
    replay too; one that dies at some point cannot be told when."""
    return bool(serials) and any(phase is None and delta and serial in serials
                                 for serial, delta, _, phase in events[start:])  # an empty one moves no figure


def looks(t):
    return tuple(t.shape), t.stride(), t.dtype


def _without_memory(op):
    op = dict(op)
    op.pop("saved_bytes", None)  # set from this trace's own memory figures
    op.pop("live_bytes", None)
    return op
