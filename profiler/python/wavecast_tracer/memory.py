"""Follows tensor storages through the traced iteration, as the GPU allocator would see them.

Every output of a dispatched op is a Python tensor; its storage is live from the
op that created it until the last tensor viewing it dies (a weakref callback).
Autograd's saved tensors are seen through `saved_tensors_hooks`: the pack hook
returns the tensor itself (0-dim numbers aside, compat.saveable), so autograd
keeps exactly what it keeps anyway.
"""

import contextlib
import functools
import inspect
import weakref

import torch
import torch.utils._pytree as pytree
import torch.utils.checkpoint

from . import allocator, compat, patching


class _Storage:
    __slots__ = ("serial", "nbytes", "tensors", "producer")

    def __init__(self, serial, nbytes, producer):
        self.serial = serial
        self.nbytes = nbytes
        self.tensors = 0  # live Python tensors viewing this storage
        self.producer = producer  # index of the op that allocated it, None for the baseline


class MemoryTracker:
    """Live storages, allocation events and saved-for-backward storages of one iteration."""

    def __init__(self):
        self._live = {}  # storage key -> _Storage
        self._refs = {}  # id(tensor) -> weakref whose callback releases the tensor
        self._serials = 0
        # (serial, bytes delta, op index, phase) for every allocation and free, in order.
        self._events = []
        self._baseline_bytes = 0
        self._baseline_serials = set()
        self._saved = {}  # serial -> _Storage, storages autograd saved for backward
        self._kept = {}  # serial -> _Storage, saved storages still live when a backward began
        self._saved_at_backward = 0
        # id(parameter) -> event index of the first zero_grad(set_to_none=True) over it
        self._grads_dropped_at = {}
        self._gradient_serials = set()  # storages seen as gradients, also ones freed since
        self._paused = 0  # > 0 while work no iteration repeats runs (an optimizer's first step)
        self._last_op = (None, None)  # (op index, phase) of the latest op that allocated
        # Called with a storage's key when it dies: a later storage may get the same key.
        self.release_listeners = []

    @contextlib.contextmanager
    def paused(self):
        """While active, outputs are not followed: what must outlive it is added with
        add_live_before afterwards."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    # --- allocation ---------------------------------------------------------
    def add_baseline(self, tensors):
        """Parameters, buffers and inputs: live before the iteration starts."""
        self.add_live_before(tensors)
        self._events.clear()

    def add_live_before(self, tensors):
        """Tensors live before the iteration started that the trace meets only now (an
        optimizer state kept from an earlier trace)."""
        with compat.no_torch_function():
            for t in tensors:
                storage = self._follow(t, None, None, allocation_event=False)
                if storage is None or storage.serial in self._baseline_serials:
                    continue
                self._baseline_serials.add(storage.serial)
                self._baseline_bytes += storage.nbytes

    def allocated(self, tensors, op_index, phase):
        """`tensors`: the outputs of op `op_index` (a storage may already be live: views)."""
        if self._paused:
            return
        self._last_op = (op_index, phase)
        refs = self._refs
        with compat.no_torch_function():
            for t in tensors:
                if id(t) not in refs:
                    self._follow(t, op_index, phase)

    def _follow(self, t, op_index, phase, allocation_event=True):
        if not isinstance(t, torch.Tensor):
            return None
        identity = compat.storage_identity(t)
        if identity is None:
            return None
        key, nbytes = identity
        storage = self._live.get(key)
        if storage is None:
            self._serials += 1
            storage = _Storage(self._serials, nbytes, op_index)
            self._live[key] = storage
            if allocation_event:
                self._events.append((storage.serial, nbytes, op_index, phase))
        if id(t) not in self._refs:
            storage.tensors += 1
            self._refs[id(t)] = weakref.ref(t, functools.partial(self._released, key, id(t)))
        return storage

    def _released(self, key, tensor_id, _ref):
        self._refs.pop(tensor_id, None)
        storage = self._live.get(key)
        if storage is None:
            return
        storage.tensors -= 1
        if storage.tensors <= 0:
            del self._live[key]
            self._events.append((storage.serial, -storage.nbytes, None, None))
            self._notify_released(key)

    def _notify_released(self, key):
        for listener in self.release_listeners:
            listener(key)

    # --- storages resized in place -----------------------------------------------
    @contextlib.contextmanager
    def watching_storage_resizes(self):
        """While active, a storage resized in place (FSDP2 frees an unsharded parameter with
        `untyped_storage().resize_(0)` and gathers into it again after growing it back) is
        freed or allocated there, though its tensors live on."""
        storage_class = getattr(torch, "UntypedStorage", None)
        original = getattr(storage_class, "resize_", None)
        if original is None:
            yield
            return
        tracker = self

        @functools.wraps(original)
        def resize_(storage, size):
            result = original(storage, size)
            tracker._resized(storage)
            return result

        with patching.attributes_set(storage_class, {"resize_": resize_}):
            yield

    def _resized(self, raw_storage):
        if self._paused:
            return
        tracked = self._live.get(raw_storage._cdata)
        if tracked is None:
            return
        nbytes = raw_storage.nbytes()
        if nbytes != tracked.nbytes:
            op_index, phase = self._last_op
            self._events.append((tracked.serial, nbytes - tracked.nbytes, op_index, phase))
            tracked.nbytes = nbytes

    # --- what selective checkpointing keeps ------------------------------------
    @contextlib.contextmanager
    def watching_selective_checkpoints(self):
        """While active, an op's outputs that a selective checkpoint policy keeps for
        backward (torch.utils.checkpoint with create_selective_checkpoint_contexts, torch
        >= 2.4: its caching mode stores them, past the saved-tensor hooks) count as saved."""
        caching = getattr(torch.utils.checkpoint, "_CachingTorchDispatchMode", None)
        if caching is None:
            yield
            return
        original = caching.__torch_dispatch__
        tracker = self

        @functools.wraps(original)
        def __torch_dispatch__(mode, func, types, args=(), kwargs=None):
            before = len(mode.storage[func]) if func in mode.storage else 0
            out = original(mode, func, types, args, kwargs)
            for entry in mode.storage.get(func, [])[before:]:
                for wrapper in pytree.tree_leaves(entry):
                    value = getattr(wrapper, "val", None)
                    if isinstance(value, torch.Tensor):
                        tracker.mark_saved(value)
            return out

        with patching.attributes_set(caching, {"__torch_dispatch__": __torch_dispatch__}):
            yield

    # --- storages a replayed model call stands for (replay.py) -----------------
    def serial_of(self, t):
        """The serial of the live storage under `t`, or None."""
        with compat.no_torch_function():
            identity = compat.storage_identity(t) if isinstance(t, torch.Tensor) else None
        storage = self._live.get(identity[0]) if identity else None
        return storage.serial if storage is not None else None

    def events(self):
        """(serial, bytes delta, op index or None, phase or None) of every allocation and free
        so far, in order."""
        return self._events

    def saved_serials(self):
        return set(self._saved)

    def allocate_unbacked(self, nbytes, op_index, phase, saved):
        """A storage with no tensor: one a replayed op made and its recorded lifetime frees
        (`release`). Returns its handle."""
        self._serials += 1
        storage = _Storage(self._serials, nbytes, op_index)
        key = ("unbacked", storage.serial)
        self._live[key] = storage
        self._events.append((storage.serial, nbytes, op_index, phase))
        if saved:
            self._saved[storage.serial] = storage
        return key

    def mark_saved(self, t):
        """The storage under `t` is one autograd saved for backward (a replayed call's)."""
        with compat.no_torch_function():
            identity = compat.storage_identity(t)
        storage = self._live.get(identity[0]) if identity else None
        if storage is not None and storage.producer is not None:
            self._saved[storage.serial] = storage

    def release(self, key):
        """The storage of `key` (allocate_unbacked) dies here."""
        storage = self._live.pop(key, None)
        if storage is not None:
            self._events.append((storage.serial, -storage.nbytes, None, None))
            self._notify_released(key)

    def free_now(self, t):
        """The storage under `t` dies here, whatever still refers to it: an incoming gradient
        the engine holds until a replayed backward returns, where the recorded nodes freed
        it earlier."""
        with compat.no_torch_function():
            identity = compat.storage_identity(t)
        storage = self._live.pop(identity[0], None) if identity else None
        if storage is not None:
            self._events.append((storage.serial, -storage.nbytes, None, None))
            self._notify_released(identity[0])

    # --- gradients set to None -----------------------------------------------
    @contextlib.contextmanager
    def watching_zero_grad(self):
        """While active, zero_grad(set_to_none=True) of an optimizer or a module marks
        where, in every iteration after the first, the previous iteration's gradients die
        (torch 2's default): they are live only until there, and backward makes them anew."""
        patched = [(torch.optim.Optimizer, lambda opt: [p for g in opt.param_groups for p in g["params"]]),
                   (torch.nn.Module, lambda module: list(module.parameters()))]
        saved = [(cls, cls.__dict__["zero_grad"]) for cls, _ in patched]
        for (cls, params_of), (_, original) in zip(patched, saved):
            cls.zero_grad = self._zero_grad_watcher(original, params_of)
        try:
            yield
        finally:
            for cls, original in saved:
                cls.zero_grad = original

    def _zero_grad_watcher(self, original, params_of):
        signature = inspect.signature(original)

        @functools.wraps(original)
        def zero_grad(owner, *args, **kwargs):
            try:
                bound = signature.bind(owner, *args, **kwargs)
                bound.apply_defaults()
                set_to_none = bool(bound.arguments.get("set_to_none", False))
            except TypeError:
                set_to_none = False
            if set_to_none:
                position = len(self._events)
                for p in params_of(owner):
                    self._grads_dropped_at.setdefault(id(p), position)
                    self._note_gradient(p.grad)
            return original(owner, *args, **kwargs)

        return zero_grad

    def _note_gradient(self, grad):
        if grad is None:
            return
        with compat.no_torch_function():
            identity = compat.storage_identity(grad)
        storage = self._live.get(identity[0]) if identity else None
        if storage is not None:
            self._gradient_serials.add(storage.serial)

    # --- saved for backward --------------------------------------------------
    def saved_tensors_hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)

    def _pack(self, t):
        with compat.no_torch_function():
            identity = compat.storage_identity(t)
        if identity is not None:
            storage = self._live.get(identity[0])
            if storage is not None and storage.producer is not None:
                self._saved[storage.serial] = storage
        saveable = compat.saveable(t)
        # A copy stands in for `t` (torch 1.13's 0-dim numbers): `t` stays live as long,
        # as the storage autograd saves on a GPU does.
        return saveable if saveable is t else (saveable, t)

    def backward_started(self):
        """Saved storages still live now are what the forward pass kept for backward."""
        live_serials = {s.serial for s in self._live.values()}
        kept = 0
        for serial, storage in self._saved.items():
            if serial in live_serials:
                self._kept[serial] = storage
                kept += storage.nbytes
        self._saved_at_backward = max(self._saved_at_backward, kept)

    # --- results ---------------------------------------------------------------
    def saved_bytes_by_op(self):
        """op index -> bytes of the storages it produced that autograd kept for backward."""
        by_op = {}
        for storage in self._kept.values():
            by_op[storage.producer] = by_op.get(storage.producer, 0) + storage.nbytes
        return by_op

    def summary(self, persistent_tensors, gradients=()):
        """The trace's memory figures, and op index -> bytes live once that op's outputs were
        allocated (what a GPU holds while the op runs, besides its own workspace), counted
        alike. `persistent_tensors` (optimizer state) live on from one iteration to the
        next, so they count from the start of the iteration; so do `gradients` ((parameter,
        gradient) pairs) unless a zero_grad(set_to_none=True) drops them first: then they
        count until that point, and again from where backward makes them."""
        persistent = {}
        gradient_drops = {}  # serial -> (bytes, event index where the next iteration frees it)
        gradient_serials = set(self._gradient_serials)
        counted = set()  # gradient storages already placed as persistent or dropped
        with compat.no_torch_function():
            tensors = [(None, t) for t in persistent_tensors] + [(id(p), g) for p, g in gradients]
            for key, t in tensors:
                identity = compat.storage_identity(t)
                storage = self._live.get(identity[0]) if identity else None
                if storage is None or storage.serial in self._baseline_serials:
                    continue
                if storage.serial in persistent or storage.serial in counted:
                    continue
                if key is not None:
                    gradient_serials.add(storage.serial)
                    counted.add(storage.serial)
                position = self._grads_dropped_at.get(key) if key is not None else None
                if position is None:
                    persistent[storage.serial] = storage.nbytes
                else:
                    gradient_drops[storage.serial] = (storage.nbytes, position)
        dropped = {}  # event index -> bytes of the previous iteration's gradients freed there
        for nbytes, position in gradient_drops.values():
            dropped[position] = dropped.get(position, 0) + nbytes
        gradients_live = sum(persistent.get(s, 0) for s in gradient_serials) + sum(dropped.values())
        live = self._baseline_bytes + sum(persistent.values()) + sum(dropped.values())
        peak, peak_at, gradients_at_peak = live, (None, None), gradients_live
        live_after_op = {}
        for index, (serial, delta, op_index, phase) in enumerate(self._events):
            freed = dropped.pop(index, 0)
            live -= freed
            gradients_live -= freed
            if serial not in persistent:
                live += delta
                if serial in gradient_serials:
                    gradients_live += delta
            if op_index is not None and delta:  # an empty storage (torch.empty(0)) holds nothing
                live_after_op[op_index] = live
            if live > peak:
                peak, peak_at, gradients_at_peak = live, (op_index, phase), gradients_live
        baseline = [s.nbytes for s in self._live.values() if s.serial in self._baseline_serials]
        reserved = allocator.steady_state_reserved(baseline, persistent, gradient_drops, self._events)
        figures = {"activations_saved_bytes": self._saved_at_backward, "peak_live_bytes": peak,
                   "gradients_at_peak_bytes": gradients_at_peak, "peak_reserved_bytes": reserved}
        if peak_at[1] is not None:
            figures["peak_phase"] = peak_at[1]
            figures["peak_op_id"] = peak_at[0]
        return figures, live_after_op


def _unpack(packed):
    return packed[0] if isinstance(packed, tuple) else packed
