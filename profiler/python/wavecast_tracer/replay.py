"""A kept model's forward and backward, replayed from the last trace instead of traced again.

A save usually edits the iteration (the loss, the optimizer, a learning rate), not the
model. When the model is kept (reuse.py) and called as in the last trace, its ops, their
memory events and its backward are what that trace recorded, and FakeTensorMode need not
run them again: most of a trace's time (docs/performance.md). A call is recorded only when
its records say all it did, and replayed only when everything it could depend on matches.
"""

import functools
import sys

import torch
from torch.nn.modules import module as nn_module
from torch.utils import _pytree as pytree

from . import compat, reuse
from .devices import is_host

# Ops whose result depends on tensor values (FakeTensorMode's fallbacks aside).
_VALUE_READS = frozenset({"aten::_local_scalar_dense", "aten::item", "aten::equal", "aten::is_nonzero"})
_PRIMITIVES = (bool, int, float, str, type(None))
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks", "_global_module_registration_hooks")


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


class _Tensor:
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


class ModelCalls:
    """While active, calls of `model` replay a recorded call that matches, and record the
    others (BuiltModel.calls keeps the records for the next trace)."""

    def __init__(self, model, recorded, recorder, state, autocast):
        self._model = model
        self._autocast = autocast  # autocast.CudaAutocast
        self._recorded = recorded  # key -> RecordedCall, kept between traces
        self._recorder = recorder
        self._state = state
        self._ordinal = 0
        self._captures = []
        self._class = type(model)
        self._saved_call = None

    def __enter__(self):
        cls = self._class
        self._saved_call = cls.__dict__.get("__call__")
        original = cls.__call__
        calls = self

        def call(module, *args, **kwargs):
            if module is not calls._model:
                return original(module, *args, **kwargs)
            return calls._call(original, args, kwargs)

        cls.__call__ = call
        self._state.backward_listeners.append(self._backward_done)
        return self

    def __exit__(self, *exc):
        if self._saved_call is None:
            del self._class.__call__
        else:
            self._class.__call__ = self._saved_call
        self._state.backward_listeners.remove(self._backward_done)
        return False

    # --- keys ---------------------------------------------------------------
    def _key(self, args, kwargs):
        """All a call's ops could depend on that the model key does not cover; None when it
        cannot be told."""
        state = self._state
        if (not state.in_plain_forward() or state.memory is None or not self._recorder.recording
                or (state.distributed is not None and state.distributed.initialized)
                or _cpu_autocast_enabled() or torch.is_inference_mode_enabled()):
            return None
        autocast = self._autocast.dtype()
        if autocast is not None and self._autocast.cache:
            return None  # another call's casts in the cache: this one would reuse them
        leaves, spec = pytree.tree_flatten((args, kwargs))
        described = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                # An input that needs a gradient would need its backward's gradient too. One
                # whose values the trace follows (token ids) is fine: a call whose ops read
                # values is not recorded (_VALUE_READS).
                if leaf.requires_grad:
                    return None
                described.append((tuple(leaf.shape), leaf.stride(), leaf.storage_offset(), leaf.dtype,
                                  str(leaf.device), is_host(leaf)))
            elif isinstance(leaf, _PRIMITIVES):
                described.append((type(leaf), leaf))
            else:
                return None
        parameters = list(self._model.parameters())
        if any(p.grad is not None for p in parameters):
            return None
        return (self._ordinal, repr(spec), tuple(described), torch.is_grad_enabled(), torch.get_default_dtype(),
                tuple(p.requires_grad for p in parameters), _settings(self._model), _flags(),
                tuple(state.module_stack), _entry_globals(), _frozen(reuse.fingerprint(self._model)),
                autocast, autocast is not None and torch.is_autocast_cache_enabled())

    # --- calls --------------------------------------------------------------
    def _call(self, original, args, kwargs):
        key = self._key(args, kwargs)
        self._ordinal += 1
        if key is None:
            return original(self._model, *args, **kwargs)
        recorded = self._recorded.get(key)
        if recorded is not None:
            self._state.progress("replaying the model's traced ops")
            forget = functools.partial(self._recorded.pop, key, None)
            return _Player(recorded, self._recorder, self._state, self._model, self._autocast, forget).call()
        for other in [k for k in self._recorded if k[0] == key[0]]:
            del self._recorded[other]
        capture = _Capture(key, self._model, self._recorder, self._state, self._autocast)
        out = original(self._model, *args, **kwargs)
        if capture.forward_done(out):
            self._captures.append(capture)
        return out

    def _backward_done(self):
        for capture in self._captures:
            capture.backward_done()

    def finish(self):
        """After the iteration: keeps what each recorded call did, where its records say all."""
        for capture in self._captures:
            recorded = capture.recorded()
            if recorded is not None:
                self._recorded[capture.key] = recorded
        self._captures = []


class _Capture:
    """A call being recorded: the trace's marks around it, completed after the iteration."""

    def __init__(self, key, model, recorder, state, autocast):
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
        self._fingerprint = reuse.fingerprint(model)
        self._parameters = [p for p in model.parameters() if p.requires_grad]
        self._op_end = self._event_end = None
        self._leaves = self._spec = None
        self._kept = {}  # storage serial -> ("output", leaf) or ("cast", parameter position)
        self._casts = {}  # parameter position -> _Tensor of its autocast copy
        self._cast_ids = set()
        self._hits_start = None
        self._incoming = {}  # serial of an output's incoming gradient -> leaf
        self._incoming_looks = {}  # leaf -> _looks of its incoming gradient
        self._grads = None  # [(position, serial, description)] after the first backward

    def forward_done(self, out):
        state, memory = self._state, self._state.memory
        self._op_end = len(state.ops)
        self._event_end = len(memory.events())
        self._output[1] = _output_position()
        if len(state.placement.mixed) != self._mixed or reuse.fingerprint(self._model) != self._fingerprint:
            return False  # a host tensor met GPU ones (a warning at a line), or the model changed
        for op in state.ops[self._op_start:self._op_end]:
            if op["fallback"] or op["name"] in _VALUE_READS or op["phase"] != "forward":
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
                self._leaves.append(_Tensor(leaf))
                if leaf.requires_grad:
                    leaf.register_hook(self._incoming_gradient(index))
            elif isinstance(leaf, _PRIMITIVES):
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
            self._casts[position] = _Tensor(cast)
            self._cast_ids.add(id(weight))
        self._hits_start = len(self._autocast.cache_hits)
        return True

    def _incoming_gradient(self, index):
        def hook(grad):
            self._incoming_looks.setdefault(index, _looks(grad))
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
                self._grads.append((position, memory.serial_of(parameter.grad), _Tensor(parameter.grad)))

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
                             if isinstance(leaf, _Tensor)]
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
        needs_gradient = any(isinstance(leaf, _Tensor) and leaf.requires_grad for leaf in self._leaves)
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


class _Player:
    """Replays a RecordedCall into this trace: its op records, its memory events, outputs
    like its outputs and, through an autograd Function, its backward and gradients."""

    def __init__(self, recorded, recorder, state, model, autocast, forget):
        self._recorded = recorded
        self._autocast = autocast
        self._forget = forget
        self._recorder = recorder
        self._state = state
        self._parameters = [p for p in model.parameters() if p.requires_grad]
        self._forward_ops = []
        # kept key -> a saved output or cast, held as autograd holds it until its node ran
        # (the tracker counts Python tensors; the storage must not die and be reused meanwhile)
        self._held = {}
        self._handles = {}

    def call(self):
        recorded, state = self._recorded, self._state
        if recorded.cuda_mapped:
            state.on_cuda_mapped()
        if recorded.any_host:  # the call made a tensor on the host (a mask, moved to the GPU)
            state.placement.any_host = True
        for record in recorded.warnings:
            state.warn_once(record)
        if recorded.output:
            sys.stdout.write(recorded.output)
        results = _Replayed.apply(self, *self._parameters)
        tensors = iter(results)
        leaves = [next(tensors) if isinstance(leaf, _Tensor) else leaf for leaf in recorded.outputs]
        return pytree.tree_unflatten(leaves, recorded.spec)

    def _tensors(self, descriptions):
        """Fake tensors like `descriptions` (_Tensor), not recorded as ops."""
        fakes = compat.fake_tensors(self._recorder.fake_mode, [d.layout() for d in descriptions])
        if fakes is not None:
            return fakes
        recording = self._recorder.recording
        self._recorder.recording = False
        try:
            return [d.make() for d in descriptions]
        finally:
            self._recorder.recording = recording

    def forward(self):
        recorded, state, memory = self._recorded, self._state, self._state.memory
        base = len(state.ops)
        stack = _Restack(state, recorded.frames)
        for op in recorded.forward_ops:
            op = dict(op)
            op["id"] = op["forward_id"] = base + op["id"]
            stack.apply(op)
            self._forward_ops.append(op)
            state.append_replayed(op)
        kept = [("output", index) for index, leaf in enumerate(recorded.outputs) if isinstance(leaf, _Tensor)]
        kept += [("cast", position) for position in recorded.casts]
        made = dict(zip(kept, self._tensors([recorded.outputs[i] if kind == "output" else recorded.casts[i]
                                             for kind, i in kept])))
        handles = {}
        for event in recorded.forward_events:
            if event[0] == "alloc":
                _, local, nbytes, op, saved = event
                handles[local] = memory.allocate_unbacked(nbytes, base + op, "forward", saved)
            elif event[0] == "kept":
                _, key, op, saved = event
                memory.allocated([made[key]], base + op, "forward")
                if saved:
                    memory.mark_saved(made[key])
                    self._held[key] = made[key]
            else:
                memory.release(handles.pop(event[1]))
        self._handles = handles  # saved storages, freed by the backward
        for position in recorded.casts:  # the autocast cache keeps them to the region's end
            self._autocast.clear_listeners.append(functools.partial(_drop, [made[("cast", position)]]))
        for dtype in recorded.autocast_dtypes:
            self._autocast.note(dtype)
        # (tensor outputs, those that needed no gradient); not kept here: the iteration decides
        # when they die.
        tensors = [(made[("output", i)], leaf) for i, leaf in enumerate(recorded.outputs) if isinstance(leaf, _Tensor)]
        return [t for t, _ in tensors], [t for t, leaf in tensors if not leaf.requires_grad]

    def backward(self, incoming):
        recorded, state, memory = self._recorded, self._state, self._state.memory
        if ([_looks(g) if g is not None else None for g in incoming] != recorded.incoming or torch.is_grad_enabled()
                or any(p.grad is not None for p in self._parameters)):
            self._forget()
            raise ReplayMismatch()
        base = len(state.ops)
        for op in recorded.backward_ops:
            op = dict(op)
            forward = self._forward_ops[op["forward_id"]]
            op["id"] = base + op["id"]
            op["forward_id"] = forward["id"]
            op["loc"], op["stack"], op["module"] = forward["loc"], forward["stack"], forward["module"]
            state.append_replayed(op)
        leaf_positions = {}
        position = 0
        for leaf_index, leaf in enumerate(recorded.outputs):
            if isinstance(leaf, _Tensor):
                leaf_positions[leaf_index] = position
                position += 1
        grads = [None] * len(self._parameters)
        # Set here, rather than handed to autograd's AccumulateGrad: each of those dispatches
        # some ops through both dispatch modes (most of a replayed backward's time) only to
        # take the gradient as it is. Not for a parameter with hooks that must see it.
        direct = not any(_hook_count(p) for p in self._parameters)
        handles = self._handles
        positions = sorted(recorded.grads)
        made = dict(zip(positions, self._tensors([recorded.grads[position] for position in positions])))
        for event in recorded.backward_events:
            kind = event[0]
            if kind == "alloc":
                _, local, nbytes, op = event
                handles[local] = memory.allocate_unbacked(nbytes, base + op, "backward", False)
            elif kind == "grad":
                _, parameter, op = event
                grad = made[parameter]
                memory.allocated([grad], base + op, "backward")
                if direct:
                    self._parameters[parameter].grad = grad
                else:
                    grads[parameter] = grad
            elif kind == "free":
                memory.release(handles.pop(event[1]))
            elif kind == "release":
                self._held.pop(event[1], None)
            else:
                gradient = incoming[leaf_positions[event[1]]]
                if gradient is not None:
                    memory.free_now(gradient)
        return grads


class ReplayMismatch(Exception):
    """A replayed call's backward got other gradients than the recorded one (the loss
    changed): its backward ops would differ. The tracer traces the iteration again, and
    the call is recorded anew."""


class _Replayed(torch.autograd.Function):
    @staticmethod
    def forward(ctx, player, *parameters):
        ctx.player = player
        ctx.set_materialize_grads(False)
        outputs, no_gradient = player.forward()
        ctx.mark_non_differentiable(*no_gradient)
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *incoming):
        player, ctx.player = ctx.player, None
        return (None, *player.backward(incoming))


class _Restack:
    """Moves recorded op locations from the recorded call site to this one: the iteration
    that calls the model may have moved, the model's own lines have not (the model key)."""

    def __init__(self, state, recorded_frames):
        self._state = state
        self._old = recorded_frames
        self._new = state.project_frames()
        self._stacks = {}

    def apply(self, op):
        if self._old == self._new:
            return
        stack = op["stack"]
        moved = self._stacks.get(id(stack))
        if moved is None:
            frames = [(f["file"], f["line"], f["function"]) for f in stack]
            frames = tuple(self._new) + tuple(frames[len(self._old):])
            moved = (self._state.stack_json(frames), self._state.loc_json(frames))
            self._stacks[id(stack)] = moved
        op["stack"], op["loc"] = moved


def _output_position():
    """Where the script's output stands (run_trace keeps it in a StringIO), or None."""
    tell = getattr(sys.stdout, "tell", None)
    try:
        return tell() if tell is not None and hasattr(sys.stdout, "getvalue") else None
    except (OSError, ValueError):
        return None


def _drop(held):
    held.clear()


def _frozen(fingerprint):
    modules, tensors = fingerprint  # reuse.fingerprint: two lists of tuples
    return tuple(modules), tuple(tensors)


def _freed_later(events, start, serials):
    """Whether a storage of `serials` with bytes dies after event `start`. One that lives to the end of
    the trace (a tensor whose values the trace follows: Shadows holds it) stays live in a
    replay too; one that dies at some point cannot be told when."""
    return bool(serials) and any(phase is None and delta and serial in serials
                                 for serial, delta, _, phase in events[start:])  # an empty one moves no figure


def _hook_count(parameter):
    return len(getattr(parameter, "_post_accumulate_grad_hooks", None) or ()) + \
        len(getattr(parameter, "_backward_hooks", None) or ())


def _looks(t):
    return tuple(t.shape), t.stride(), t.dtype


def _without_memory(op):
    op = dict(op)
    op.pop("saved_bytes", None)  # set from this trace's own memory figures
    return op


def _cpu_autocast_enabled():
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch 1.13: no device argument
        return torch.is_autocast_cpu_enabled()


def _plain(value):
    if isinstance(value, _PRIMITIVES):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, _PRIMITIVES) for v in value):
        return tuple(value)
    return None


def _settings(model):
    """The plain attributes of every module and of the objects they refer to (a config):
    an iteration may set one (`model.config.use_cache = False`) and change what forward does."""
    described = []
    for module in model.modules():
        entries = []
        for name, value in vars(module).items():
            if name.startswith("_"):
                continue
            plain = _plain(value)
            if plain is not None or value is None:
                entries.append((name, plain))
            elif not isinstance(value, (torch.Tensor, torch.nn.Module)) and hasattr(value, "__dict__"):
                entries.append((name, type(value).__qualname__,
                                tuple((k, _plain(v)) for k, v in sorted(vars(value).items()) if _plain(v) is not None)))
        described.append((module.training, tuple(entries)))
    return tuple(described)


def _flags():
    """torch's switches that pick other ops for the same call (the attention backends)."""
    cuda = torch.backends.cuda
    switches = [torch.backends.cudnn.enabled, torch.are_deterministic_algorithms_enabled()]
    for name in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled", "cudnn_sdp_enabled"):
        query = getattr(cuda, name, None)
        switches.append(query() if query is not None else None)
    switches.append(tuple(len(getattr(nn_module, name, None) or ()) for name in _GLOBAL_HOOKS))
    return tuple(switches)


def _entry_globals():
    """The plain module-level values of the running entry file: the iteration may set one
    (`global USE_FLASH`) that the model's forward reads."""
    from .loader import ENTRY_MODULE_NAME

    module = sys.modules.get(ENTRY_MODULE_NAME)
    if module is None:
        return ()
    return tuple(sorted((name, value) for name, value in vars(module).items()
                        if not name.startswith("__") and isinstance(value, _PRIMITIVES)))
