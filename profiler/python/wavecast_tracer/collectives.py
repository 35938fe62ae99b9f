"""Collective ops of a torch.distributed script as trace ops (docs/trace-format.md "Collectives").

Every collective reaches the dispatcher: the c10d ops that ProcessGroup methods run
(`c10d::allreduce_`, `c10d::_allgather_base_`, ...; DDP's reducer and FSDP2 issue these)
and the functional ones DTensor uses (`_c10d_functional::all_reduce`, ...,
`_c10d_functional::wait_tensor`). Under the fake process group they move no data; the
recorder records them like any op and `Collectives` adds what they communicate: the kind,
the bytes as nccl-tests counts them, the process group, whether the compute stream waits
for them at once and, if not, the op that first needs their result.
"""

import sys
import weakref

import torch
import torch.distributed as dist

from . import compat
from .values import flatten_tensors

# op name -> (kind, which tensors nccl-tests counts: "in", "out" or "buffer")
KINDS = {
    "c10d::allreduce_": ("all_reduce", "buffer"),
    "c10d::allreduce_coalesced_": ("all_reduce", "buffer"),
    "c10d::broadcast_": ("broadcast", "buffer"),
    "c10d::allgather_": ("all_gather", "out"),
    "c10d::_allgather_base_": ("all_gather", "out"),
    "c10d::allgather_coalesced_": ("all_gather", "out"),
    "c10d::allgather_into_tensor_coalesced_": ("all_gather", "out"),
    "c10d::reduce_scatter_": ("reduce_scatter", "in"),
    "c10d::_reduce_scatter_base_": ("reduce_scatter", "in"),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce_scatter", "in"),
    "c10d::alltoall_": ("all_to_all", "in"),
    "c10d::alltoall_base_": ("all_to_all", "in"),
    "c10d::send": ("send", "buffer"),
    "c10d::recv_": ("recv", "buffer"),
    "c10d::recv_any_source_": ("recv", "buffer"),
    "_c10d_functional::all_reduce": ("all_reduce", "in"),
    "_c10d_functional::all_reduce_": ("all_reduce", "in"),
    "_c10d_functional::all_reduce_coalesced": ("all_reduce", "in"),
    "_c10d_functional::all_reduce_coalesced_": ("all_reduce", "in"),
    "_c10d_functional::broadcast": ("broadcast", "in"),
    "_c10d_functional::broadcast_": ("broadcast", "in"),
    "_c10d_functional::all_gather_into_tensor": ("all_gather", "out"),
    "_c10d_functional::all_gather_into_tensor_out": ("all_gather", "out"),
    "_c10d_functional::all_gather_into_tensor_coalesced": ("all_gather", "out"),
    "_c10d_functional::reduce_scatter_tensor": ("reduce_scatter", "in"),
    "_c10d_functional::reduce_scatter_tensor_out": ("reduce_scatter", "in"),
    "_c10d_functional::reduce_scatter_tensor_coalesced": ("reduce_scatter", "in"),
    "_c10d_functional::all_to_all_single": ("all_to_all", "in"),
    "_c10d_functional_autograd::all_gather_into_tensor": ("all_gather", "out"),
    "_c10d_functional_autograd::reduce_scatter_tensor": ("reduce_scatter", "in"),
    "_c10d_functional_autograd::all_to_all_single": ("all_to_all", "in"),
    "_dtensor::shard_dim_alltoall": ("all_to_all", "in"),
}

# The schema arguments holding a c10d op's input and output tensors (the rest are in place:
# their first argument is both).
_INPUT_ARGUMENTS = ("input_tensors", "input_tensor", "input", "inputs", "input_list")
_OUTPUT_ARGUMENTS = ("output_tensors", "output_tensor", "output", "outputs", "output_lists")

# Callers that issue their collectives on streams of their own: FSDP (its all-gather and
# reduce-scatter streams), so the compute stream does not wait where they are issued.
_SIDE_STREAM_CALLERS = ("/torch/distributed/fsdp/",)


def symmetric_values(name, func, args, kwargs, out, real_of):
    """The values a collective's result would hold if every rank held this rank's (a trace
    of one rank sees no other; a mixture of experts' token counts, exchanged before its
    all-to-all, are what its split sizes are read from): [(result, real value)], empty
    where the input's values are not followed or the collective is not one of these."""
    if name == "_c10d_functional::wait_tensor":  # the collective's result, as it is
        real = real_of(args[0]) if args else None
        return [(out, real)] if real is not None and isinstance(out, torch.Tensor) else []
    spec = KINDS.get(name)
    if spec is None:
        return []
    kind = spec[0]
    inputs = flatten_tensors(compat.argument(func, args, kwargs, *_INPUT_ARGUMENTS))
    results = flatten_tensors(compat.argument(func, args, kwargs, *_OUTPUT_ARGUMENTS)) or flatten_tensors(out)
    if name.startswith("c10d::") and kind != "all_to_all":
        return []  # in place on tensor lists, with the reduction as a ScriptObject
    if len(inputs) != 1 or len(results) != 1:
        return []
    real = real_of(inputs[0])
    pg = _process_group(func, args, kwargs)
    if real is None or pg is None:
        return []
    ranks, rank = pg.size(), pg.rank()
    reduce_op = compat.argument(func, args, kwargs, "reduce_op")
    with compat.real_execution():
        if kind == "all_reduce" and reduce_op in ("sum", "avg", "max", "min"):
            value = real * ranks if reduce_op == "sum" else real.clone()
        elif kind == "all_gather":
            value = torch.cat([real] * ranks)
        elif kind == "reduce_scatter" and reduce_op in ("sum", "avg", "max", "min"):
            value = real.chunk(ranks)[rank] * (ranks if reduce_op == "sum" else 1)
        elif kind == "all_to_all":
            # Each peer sends this rank the chunk it sends to this rank's index: this rank's.
            splits = compat.argument(func, args, kwargs, "input_split_sizes")
            own = real.split([int(s) for s in splits])[rank] if splits else real.chunk(ranks)[rank]
            value = torch.cat([own] * ranks)
        elif kind == "broadcast":
            value = real.clone()
        else:
            return []
    return [(results[0], value)] if tuple(value.shape) == tuple(results[0].shape) else []


def tensor_bytes(tensors):
    return sum(int(t.numel()) * int(t.element_size()) for t in tensors)


def _process_group(func, args, kwargs):
    """The op's ProcessGroup: a c10d op's argument, or the group a functional op names."""
    value = compat.argument(func, args, kwargs, "process_group")
    if value is not None:
        return dist.ProcessGroup.unbox(value)
    name = compat.argument(func, args, kwargs, "group_name")
    if isinstance(name, str):
        from torch._C._distributed_c10d import _resolve_process_group

        return _resolve_process_group(name)
    return None


def group_label(pg, mesh_dimensions):
    """The name the trace gives a process group: the DeviceMesh dimension it serves ("dp",
    "tp", ...; `mesh_dimensions` maps torch's group names to them), "default" for the
    world, the description it was made with, else torch's name."""
    if pg is None:
        return "default"
    if pg.group_name in mesh_dimensions:
        return mesh_dimensions[pg.group_name]
    if pg.group_name == dist.distributed_c10d._get_default_group().group_name:
        return "default"
    description = getattr(pg, "group_desc", "") or ""
    if description.startswith("mesh_"):
        return description[len("mesh_"):]
    if description and description not in ("undefined", "default_pg"):
        return description
    return pg.group_name


def _side_stream_caller():
    f = sys._getframe(2)
    while f is not None:
        filename = f.f_code.co_filename.replace("\\", "/")
        if any(part in filename for part in _SIDE_STREAM_CALLERS):
            return True
        f = f.f_back
    return False


def _is_view(func):
    return bool(getattr(func, "is_view", False))


class _Pending:
    """A recorded collective whose wait point is not known yet."""

    __slots__ = ("op", "storages", "waited", "at_once", "side_stream")

    def __init__(self, op, storages, side_stream):
        self.op = op
        self.storages = storages  # storage keys of its results: an op touching one waits
        self.waited = False  # Work.wait() was called: the next recorded op runs after it
        self.at_once = True  # no other op recorded since it was issued
        self.side_stream = side_stream


def _weakly(value):
    if isinstance(value, torch.Tensor):
        return weakref.ref(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_weakly(v) for v in value)
    return value


def _strongly(value):
    if isinstance(value, weakref.ref):
        return value()
    if isinstance(value, (list, tuple)):
        return type(value)(_strongly(v) for v in value)
    return value


class TracedWork(dist.Work):
    """The Work a c10d op returns while tracing: done at once, its future holding the op's
    tensors (DDP's reducer reads them from the future; the fake process group's own Work
    holds none), and its wait() noted as the collective's wait point."""

    def __init__(self, result, on_wait):
        super().__init__()
        # Held weakly: the Work outlives the trace's ops (Collectives._works), and the memory
        # tracker must see the result die where the script drops it (FSDP2's all-gather
        # buffer once it is copied out).
        self._result = _weakly(result)
        self._on_wait = on_wait

    def wait(self, timeout=None):
        if self._on_wait is not None:
            self._on_wait()
        return True

    def is_completed(self):
        return True

    def get_future(self):
        future = torch.futures.Future()
        future.set_result(_strongly(self._result))
        return future


class Collectives:
    """Adds the collective args to recorded collective ops and finds their wait points."""

    def __init__(self, mesh_dimensions):
        self._mesh_dimensions = mesh_dimensions
        self._pending = []
        # C++ (DDP's reducer) holds a TracedWork only through its Work base: the Python
        # object is kept here for the trace, or its methods would be lost.
        self._works = []
        self.group_labels = {}  # label -> size, for every group a collective used

    # --- the Work a c10d op returns -----------------------------------------
    def traced_work(self, name, args, out, pending=None):
        """`out` with its Work replaced by a TracedWork (c10d ops only)."""
        if not name.startswith("c10d::"):
            return out
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], torch.ScriptObject):
            result, boxed = out[0], True
        elif isinstance(out, torch.ScriptObject):
            result, boxed = (args[0] if args else None), False
        else:
            return out
        # A side stream's Work is waited on that stream: the compute stream waits where
        # an op first uses the result.
        on_wait = None
        if pending is not None and not pending.side_stream:
            on_wait = lambda: setattr(pending, "waited", True)  # noqa: E731
        work = TracedWork(result, on_wait)
        self._works.append(work)
        return (out[0], work.boxed()) if boxed else work.boxed()

    # --- recording ------------------------------------------------------------
    def observe(self, op, func, name, args, kwargs, out):
        """Called for every recorded op after it was appended: a collective gets its args;
        any op settles the wait point of earlier collectives. Returns the collective's
        _Pending (for its Work) or None."""
        if self._pending:
            self._settle(op, func, name, args, kwargs)
        spec = KINDS.get(name)
        if spec is None:
            return None
        kind, counted = spec
        pg = _process_group(func, args, kwargs)
        inputs = flatten_tensors(compat.argument(func, args, kwargs, *_INPUT_ARGUMENTS))
        outputs = flatten_tensors(compat.argument(func, args, kwargs, *_OUTPUT_ARGUMENTS))
        if name.startswith("c10d::"):
            results = outputs or flatten_tensors(args[0] if args else None)
        else:
            results = outputs or flatten_tensors(out)
        if counted == "in":
            counted_tensors = inputs or flatten_tensors(args[0] if args else None)
        elif counted == "out":
            counted_tensors = results
        else:
            counted_tensors = inputs or results
        label = group_label(pg, self._mesh_dimensions)
        size = pg.size() if pg is not None else 1
        self.group_labels.setdefault(label, size)
        op["args"] = {
            "collective": kind,
            "bytes": tensor_bytes(counted_tensors),
            "group_size": size,
            "group": label,
            "async": True,  # settled when the next op is recorded
        }
        if kind in ("send", "recv"):
            peer = compat.argument(func, args, kwargs, "dst", "src")
            if isinstance(peer, int):
                op["args"]["peer"] = peer
        pending = _Pending(op, self._storages(results if kind != "send" else ()), _side_stream_caller())
        if pending.side_stream:
            op["args"]["side_stream"] = True
        elif compat.argument(func, args, kwargs, "async_op") is False:
            op["args"]["async"] = False
        self._pending.append(pending)
        return pending

    def _settle(self, op, func, name, args, kwargs):
        touched = None
        still = []
        for pending in self._pending:
            waits = pending.waited
            if not waits and pending.storages and not _is_view(func):
                if touched is None:
                    touched = self._storages(flatten_tensors((args, list(kwargs.values()))))
                waits = bool(touched & pending.storages)
            if waits:
                pending.op["args"]["wait_op"] = op["id"]
                if pending.at_once and not pending.side_stream:
                    pending.op["args"]["async"] = False
            else:
                pending.at_once = False
                still.append(pending)
        self._pending = still

    @staticmethod
    def _storages(tensors):
        keys = set()
        with compat.no_torch_function():
            for t in tensors:
                if isinstance(t, torch.Tensor):
                    identity = compat.storage_identity(t)
                    if identity is not None:
                        keys.add(identity[0])
        return keys
