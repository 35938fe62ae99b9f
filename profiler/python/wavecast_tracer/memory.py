"""Follows tensor storages through the traced iteration, as the GPU allocator would see them.

Every output of a dispatched op is a Python tensor; its storage is live from the
op that created it until the last tensor viewing it dies (a weakref callback).
Autograd's saved tensors are seen through `saved_tensors_hooks`: the pack hook
returns the tensor itself (0-dim numbers aside, compat.saveable), so autograd
keeps exactly what it keeps anyway.
"""

import functools
import weakref

import torch

from . import compat


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

    # --- allocation ---------------------------------------------------------
    def add_baseline(self, tensors):
        """Parameters, buffers and inputs: live before the iteration starts."""
        with compat.no_torch_function():
            for t in tensors:
                storage = self._follow(t, None, None)
                if storage is not None and storage.serial not in self._baseline_serials:
                    self._baseline_serials.add(storage.serial)
                    self._baseline_bytes += storage.nbytes
        self._events.clear()

    def allocated(self, tensors, op_index, phase):
        """`tensors`: the outputs of op `op_index` (a storage may already be live: views)."""
        refs = self._refs
        with compat.no_torch_function():
            for t in tensors:
                if id(t) not in refs:
                    self._follow(t, op_index, phase)

    def _follow(self, t, op_index, phase):
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
        return compat.saveable(t)

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

    def summary(self, persistent_tensors):
        """The trace's memory figures. `persistent_tensors` (gradients, optimizer state) live
        on from one iteration to the next, so they count from the start of the iteration."""
        persistent = {}
        with compat.no_torch_function():
            for t in persistent_tensors:
                identity = compat.storage_identity(t)
                storage = self._live.get(identity[0]) if identity else None
                if storage is not None and storage.serial not in self._baseline_serials:
                    persistent[storage.serial] = storage.nbytes
        live = self._baseline_bytes + sum(persistent.values())
        peak, peak_at = live, (None, None)
        for serial, delta, op_index, phase in self._events:
            if serial in persistent:
                continue
            live += delta
            if live > peak:
                peak, peak_at = live, (op_index, phase)
        figures = {"activations_saved_bytes": self._saved_at_backward, "peak_live_bytes": peak}
        if peak_at[1] is not None:
            figures["peak_phase"] = peak_at[1]
            figures["peak_op_id"] = peak_at[0]
        return figures


def _unpack(t):
    return t
