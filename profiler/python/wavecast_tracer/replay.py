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
from .call_records import PRIMITIVES, Capture, TensorLayout, looks
from .compiled import compile_mode
from .placement import is_host

_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks", "_global_module_registration_hooks")


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
        # A compiled call's ops say which op wrote their inputs, ids a replay would not keep.
        if (state.compile_mode() is not None or state.compile_requested is not None
                or any(compile_mode(m) for m in self._model.modules())):
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
            elif isinstance(leaf, PRIMITIVES):
                described.append((type(leaf), leaf))
            else:
                return None
        parameters = list(self._model.parameters())
        if any(p.grad is not None for p in parameters):
            return None
        return (self._ordinal, repr(spec), tuple(described), torch.is_grad_enabled(), torch.get_default_dtype(),
                tuple(p.requires_grad for p in parameters), _settings(self._model), _flags(),
                tuple(state.module_stack), _entry_globals(), autocast,
                autocast is not None and torch.is_autocast_cache_enabled(), reuse.fingerprint(self._model))

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
        # The key's last part is the model's fingerprint, which the capture checks again.
        capture = Capture(key, key[-1], self._model, self._recorder, self._state, self._autocast)
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
        leaves = [next(tensors) if isinstance(leaf, TensorLayout) else leaf for leaf in recorded.outputs]
        return pytree.tree_unflatten(leaves, recorded.spec)

    def _tensors(self, descriptions):
        """Fake tensors like `descriptions` (TensorLayout), not recorded as ops."""
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
        kept = [("output", index) for index, leaf in enumerate(recorded.outputs) if isinstance(leaf, TensorLayout)]
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
            self._autocast.clear_listeners.append([made[("cast", position)]].clear)
        for dtype in recorded.autocast_dtypes:
            self._autocast.note(dtype)
        # (tensor outputs, those that needed no gradient); not kept here: the iteration decides
        # when they die.
        tensors = [(made[("output", i)], leaf) for i, leaf in enumerate(recorded.outputs) if isinstance(leaf, TensorLayout)]
        return [t for t, _ in tensors], [t for t, leaf in tensors if not leaf.requires_grad]

    def backward(self, incoming):
        recorded, state, memory = self._recorded, self._state, self._state.memory
        if ([looks(g) if g is not None else None for g in incoming] != recorded.incoming or torch.is_grad_enabled()
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
            if isinstance(leaf, TensorLayout):
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


def _hook_count(parameter):
    return len(getattr(parameter, "_post_accumulate_grad_hooks", None) or ()) + \
        len(getattr(parameter, "_backward_hooks", None) or ())


def _cpu_autocast_enabled():
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch 1.13: no device argument
        return torch.is_autocast_cpu_enabled()


def _plain(value):
    if isinstance(value, PRIMITIVES):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, PRIMITIVES) for v in value):
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
                        if not name.startswith("__") and isinstance(value, PRIMITIVES)))
