"""A script that uses torch.distributed traces as one rank of a torchrun launch.

The script runs in the torchrun environment of rank 0 (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) when a world size is asked for, or when it
makes a process group: from the start when its entry file calls init_process_group or
init_device_mesh (torchrun scripts read LOCAL_RANK before either), else from the call.
Any other script sees no such variables: HF Trainer and Accelerate take them to mean a
distributed launch. Whatever backend its
`init_process_group` asks for (nccl, gloo, env://, a DeviceMesh's), it gets torch's fake
process group: collectives move no data but reach the dispatcher with their tensors, so
the recorder sees them as ops (collectives.py). What cannot run as one rank (object
collectives, gloo's monitored_barrier) is skipped with an `unsupported_distributed`
warning at its line.

DDP, FSDP2 and DTensor need a few things adjusted to run on one rank and on fake tensors:
- DDP's constructor compares parameter shapes across ranks with real data: skipped.
- DDP's first iteration all-reduces every gradient in one bucket and then rebuilds its
  buckets (the first one `_DEFAULT_FIRST_BUCKET_BYTES`, then `bucket_cap_mb` each) in the
  order gradients became ready; every later iteration runs those. The traced iteration is
  a later one: DDP starts with the rebuilt sizes, over the parameters in reverse order of
  registration (the order gradients usually become ready), and never rebuilds.
- In shape and cpu mode (CUDA mapped to the CPU), a CUDA DeviceMesh becomes a CPU one, so
  FSDP2 uses no CUDA streams, and DDP gets no device_ids for its CPU-resident module.
- DTensor computes each op's output metadata by running the op on fake global tensors:
  those runs are not the rank's work and are not recorded.
"""

import contextlib
import functools
import sys

import torch

from .patching import variables_set
from .errors import TraceError
from .trace_warnings import warning

DEFAULT_WORLD_SIZE = 8
# A node's GPUs when the request gives only the world size: the usual 8-GPU node.
GPUS_PER_NODE = 8
_RANK = 0
_MASTER_PORT = "29500"
_DISTRIBUTED_MODULES = ("torch.distributed", "torch.nn.parallel")

# torch.distributed calls that cannot run as one rank of a fake process group, and what each
# leaves in its arguments instead (the script goes on).
_UNSUPPORTED = (
    "all_gather_object",
    "gather_object",
    "broadcast_object_list",
    "scatter_object_list",
    "send_object_list",
    "recv_object_list",
    "monitored_barrier",
    "all_reduce_coalesced",
    "all_gather_coalesced",
)


def local_tensor(t):
    """The part of a DTensor (FSDP2's parameters, tensor parallelism's) this rank holds;
    any other tensor as it is."""
    local = getattr(t, "_local_tensor", None)
    return local if isinstance(local, torch.Tensor) else t


def _available():
    """Whether this torch can run a fake process group (torch 2.x built with distributed)."""
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return False
        import torch.testing._internal.distributed.fake_pg  # noqa: F401 - registers "fake"
    except ImportError:
        return False
    return True


# What torchrun sets for each process of a launch.
TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                      "MASTER_PORT")


class OneRank:
    """One trace's rank: its torchrun environment, its process group once the script makes
    one, and what it recorded about collectives."""

    def __init__(self, world_size, project, map_cuda):
        self.world_size = world_size or DEFAULT_WORLD_SIZE
        self.local_world_size = min(self.world_size, GPUS_PER_NODE)
        self.rank = _RANK
        self.project = project
        self.map_cuda = map_cuda
        self.initialized = False  # the script (or a DeviceMesh) made the process group
        # torch's name of a process group -> the DeviceMesh dimension it serves ("tp", ...)
        self.mesh_dimensions = {}
        self.collectives = None  # collectives.Collectives once initialized
        # > 0 while torch computes metadata with ops that are not the rank's work.
        self.hidden = 0
        self.warnings = []
        self._activated = contextlib.ExitStack()
        self._environment_set = False

    def environment(self):
        return dict(zip(TORCHRUN_VARIABLES, (
            str(self.rank), str(self.rank % self.local_world_size), str(self.world_size),
            str(self.local_world_size), str(self.rank // self.local_world_size), "127.0.0.1", _MASTER_PORT)))

    def enter_environment(self):
        """The torchrun variables, from now until the trace ends."""
        if not self._environment_set:
            self._environment_set = True
            self._activated.enter_context(variables_set(self.environment()))

    def device_count(self):
        """GPUs torch.cuda reports: the node's in a distributed launch (torchrun's processes
        each see them all; a script checks it has enough before it makes its process
        group), else one."""
        return self.local_world_size if self.initialized or self._environment_set else 1

    def document(self):
        """The trace's `distributed` object; None for a script that made no process group."""
        if not self.initialized:
            return None
        import torch.distributed as dist
        from .collectives import group_label

        sizes = {"default": self.world_size}
        for pg in list(dist.distributed_c10d._world.pg_map) if dist.is_initialized() else ():
            sizes.setdefault(group_label(pg, self.mesh_dimensions), pg.size())
        for label, size in self.collectives.group_labels.items():
            sizes.setdefault(label, size)
        return {
            "world_size": self.world_size,
            "rank": self.rank,
            "local_world_size": self.local_world_size,
            "backend": "fake",
            "groups": [{"name": name, "size": size} for name, size in sizes.items()],
        }

    # --- notes ---------------------------------------------------------------
    def site(self):
        return self.project.site()

    def unsupported(self, call):
        if self.hidden:  # torch's own one-time set-up (a pipeline stage's shape inference)
            return
        record = warning("unsupported_distributed", *self.site(), call=call)
        if record not in self.warnings:
            self.warnings.append(record)

    # --- the process group ---------------------------------------------------
    def init_process_group(self, original, *args, **kwargs):
        """The script's init_process_group, whatever it asked: the fake process group."""
        import torch.distributed as dist
        from torch.testing._internal.distributed.fake_pg import FakeStore
        from torch.utils._python_dispatch import _disable_current_modes

        from .collectives import Collectives

        timeout = kwargs.get("timeout", args[2] if len(args) > 2 else None)
        group_name = kwargs.get("group_name", args[6] if len(args) > 6 else "")
        options = {"timeout": timeout} if timeout is not None else {}
        if dist.is_initialized():  # a second call fails as it would under torchrun
            return original(*args, **kwargs)
        self.enter_environment()
        with _disable_current_modes():
            original("fake", rank=self.rank, world_size=self.world_size, store=FakeStore(),
                     group_name=group_name or "", **options)
        self.initialized = True
        self.collectives = Collectives(self.mesh_dimensions)
        self._activated.enter_context(_ddp_on_one_rank(self.map_cuda))
        self._activated.enter_context(_dtensor_metadata_hidden(self))
        self._activated.enter_context(_pipeline_set_up_hidden(self))
        return None

    def finish(self):
        self._activated.close()
        if self.initialized:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


@contextlib.contextmanager
def one_rank(world_size, project, map_cuda, default_world_size=None):
    """While active, the script runs as rank 0 of `world_size` (OneRank; None:
    `default_world_size`, else DEFAULT_WORLD_SIZE). torchrun's environment variables are
    set only for a distributed trace: a world size asked for, or a provider script that
    makes a process group (HF Trainer and Accelerate read LOCAL_RANK as a distributed
    launch). A script run as written (a `default_world_size`) is `python train.py` unless
    a world size is asked for: nanoGPT makes its process group only when torchrun set RANK."""
    session = OneRank(world_size or default_world_size, project, map_cuda)
    with contextlib.ExitStack() as stack:
        if world_size is not None or (default_world_size is None and _makes_process_group(project.entry_file)):
            session.enter_environment()
        if _available():
            stack.enter_context(_process_group_calls(session))
        else:
            stack.enter_context(_without_fake_process_group(session))
        try:
            yield session
        finally:
            session.finish()


_PROCESS_GROUP_CALLS = ("init_process_group", "init_device_mesh")


def _makes_process_group(path):
    """Whether the script's entry file makes a process group (named in its text)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    return any(call in text for call in _PROCESS_GROUP_CALLS)


@contextlib.contextmanager
def _replaced(replacements):
    """Each original in `replacements` (original -> replacement) replaced wherever a
    torch.distributed (or DDP) module holds it: torch.distributed.init_process_group is
    also device_mesh's own import, for instance."""
    by_id = {id(original): replacement for original, replacement in replacements.items()}
    holders = []
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(_DISTRIBUTED_MODULES):
            continue
        for attribute, value in list(vars(module).items()):
            replacement = by_id.get(id(value))
            if replacement is not None:
                holders.append((module, attribute, value))
                setattr(module, attribute, replacement)
    try:
        yield
    finally:
        for module, attribute, original in holders:
            setattr(module, attribute, original)


@contextlib.contextmanager
def _process_group_calls(session):
    import torch.distributed as dist
    from torch.distributed import device_mesh

    c10d = dist.distributed_c10d
    original_init = c10d.init_process_group

    @functools.wraps(original_init)
    def init_process_group(*args, **kwargs):
        return session.init_process_group(original_init, *args, **kwargs)

    replacements = {original_init: init_process_group}
    for call in _UNSUPPORTED:
        original = getattr(c10d, call, None)
        if original is not None:
            replacements[original] = _standin(session, call)
    with contextlib.ExitStack() as stack:
        replacements.update(stack.enter_context(_device_meshes(session, device_mesh)))
        stack.enter_context(_replaced(replacements))
        yield


def _standin(session, call):
    """What an unsupported call does instead: a note at its line, and on rank 0 the
    values it would have left were every rank's object this rank's."""
    rank = session.rank

    def standin(*args, **kwargs):
        session.unsupported(call)
        if call == "all_gather_object":
            objects, obj = args[0], args[1] if len(args) > 1 else kwargs.get("obj")
            objects[:] = [obj] * len(objects)
        elif call == "gather_object":
            obj = args[0] if args else kwargs.get("obj")
            gathered = args[1] if len(args) > 1 else kwargs.get("object_gather_list")
            if gathered is not None:
                gathered[:] = [obj] * len(gathered)
        elif call == "scatter_object_list":
            out = args[0] if args else kwargs.get("scatter_object_output_list")
            scattered = args[1] if len(args) > 1 else kwargs.get("scatter_object_input_list")
            if scattered and out:
                out[0] = scattered[rank]
        elif call == "recv_object_list":
            source = args[1] if len(args) > 1 else kwargs.get("src")
            return source if source is not None else rank
        return None

    return standin


@contextlib.contextmanager
def _device_meshes(session, device_mesh):
    """DeviceMeshes name the process groups of their dimensions ("tp", "dp", ...). While
    CUDA is mapped to the CPU, a CUDA mesh is a CPU one. A mesh's rank tables are small
    real tensors, made outside the fake tensor mode. Yields the replacement of
    init_device_mesh."""
    from torch.utils._python_dispatch import _disable_current_modes

    cls = device_mesh.DeviceMesh
    original_class_init = cls.__init__
    original_init_mesh = device_mesh.init_device_mesh

    def device(device_type):
        if session.map_cuda and isinstance(device_type, str) and device_type.split(":")[0] == "cuda":
            return "cpu"
        return device_type

    @functools.wraps(original_class_init)
    def init(self, device_type, *args, **kwargs):
        with _disable_current_modes():
            original_class_init(self, device(device_type), *args, **kwargs)
        names = getattr(self, "_dim_group_names", None) or ()
        for dimension, group in zip(self.mesh_dim_names or (), names):
            session.mesh_dimensions.setdefault(group, dimension)

    @functools.wraps(original_init_mesh)
    def init_device_mesh(device_type, *args, **kwargs):
        with _disable_current_modes():
            return original_init_mesh(device(device_type), *args, **kwargs)

    cls.__init__ = init
    try:
        yield {original_init_mesh: init_device_mesh}
    finally:
        cls.__init__ = original_class_init


@contextlib.contextmanager
def _ddp_on_one_rank(map_cuda):
    """DDP as every iteration after its first runs it, on one rank (module docstring)."""
    import torch.distributed as dist
    from torch.nn.parallel import distributed as ddp_module

    cls = ddp_module.DistributedDataParallel
    original_verify = ddp_module._verify_param_shape_across_processes
    original_rebuild = dist.Reducer._rebuild_buckets
    original_helper = cls._ddp_init_helper
    original_init = cls.__init__

    @functools.wraps(original_helper)
    def init_helper(self, parameters, *args, **kwargs):
        assign = dist._compute_bucket_assignment_by_size
        first = dist._DEFAULT_FIRST_BUCKET_BYTES if self.bucket_bytes_cap_default else self.bucket_bytes_cap

        def rebuilt(tensors, limits, *rest):
            if getattr(self, "bucket_bytes_cap_list", None) or list(limits) != [sys.maxsize]:
                return assign(tensors, limits, *rest)
            count = len(tensors)
            sparse = list(reversed(rest[0])) if rest and rest[0] else []
            buckets, sizes = assign(list(reversed(tensors)), [first, self.bucket_bytes_cap], sparse)
            # DDP reverses the list it is given: the first bucket ready is then first.
            buckets = [[count - 1 - i for i in bucket] for bucket in buckets]
            return list(reversed(buckets)), list(reversed(sizes))

        dist._compute_bucket_assignment_by_size = rebuilt
        try:
            return original_helper(self, parameters, *args, **kwargs)
        finally:
            dist._compute_bucket_assignment_by_size = assign

    @functools.wraps(original_init)
    def init(self, module, *args, **kwargs):
        if map_cuda:  # the module is on the CPU here, where DDP refuses device_ids
            kwargs.pop("device_ids", None)
            kwargs.pop("output_device", None)
            args = (None, None) + tuple(args[2:]) if len(args) > 2 else ()
        return original_init(self, module, *args, **kwargs)

    ddp_module._verify_param_shape_across_processes = lambda *args, **kwargs: None
    dist.Reducer._rebuild_buckets = lambda self: False
    cls._ddp_init_helper = init_helper
    cls.__init__ = init
    try:
        yield
    finally:
        ddp_module._verify_param_shape_across_processes = original_verify
        dist.Reducer._rebuild_buckets = original_rebuild
        cls._ddp_init_helper = original_helper
        cls.__init__ = original_init


@contextlib.contextmanager
def _dtensor_metadata_hidden(session):
    try:
        from torch.distributed.tensor import _sharding_prop
    except ImportError:
        yield
        return
    cls = _sharding_prop.ShardingPropagator
    original = cls._propagate_tensor_meta_non_cached
    cls._propagate_tensor_meta_non_cached = _hiding(session, original)
    try:
        yield
    finally:
        cls._propagate_tensor_meta_non_cached = original


@contextlib.contextmanager
def _pipeline_set_up_hidden(session):
    """A pipeline schedule's first step sets its stage up (a handshake with its neighbours,
    and shape inference: the stage's forward on zeros, its output shapes sent as objects);
    every later step does not, so it is not recorded."""
    try:
        from torch.distributed.pipelining import schedules
    except ImportError:
        yield
        return
    saved = []
    for cls in vars(schedules).values():
        if not isinstance(cls, type):
            continue
        for method in ("_initialize_stage", "_initialize_stages"):
            original = cls.__dict__.get(method)
            if original is not None:
                saved.append((cls, method, original))
                setattr(cls, method, _hiding(session, original))
    try:
        yield
    finally:
        for cls, method, original in saved:
            setattr(cls, method, original)


def _hiding(session, original):
    @functools.wraps(original)
    def hidden(*args, **kwargs):
        session.hidden += 1
        try:
            return original(*args, **kwargs)
        finally:
            session.hidden -= 1

    return hidden


@contextlib.contextmanager
def _without_fake_process_group(session):
    """torch without a fake process group (1.13): a script's init_process_group fails
    with a message saying why, not by waiting for ranks that never come."""
    try:
        import torch.distributed as dist

        original = dist.init_process_group if dist.is_available() else None
    except ImportError:
        original = None
    if original is None:
        yield
        return

    def init_process_group(*args, **kwargs):
        file, line = session.site()
        raise TraceError(
            "unsupported_operation",
            f"tracing a torch.distributed script needs torch's fake process group, which torch "
            f"{torch.__version__} does not have",
            hint="Trace with a torch 2.x environment (--python-env VENV, or the editor's Python "
            "interpreter).",
            file=file,
            line=line,
        )

    with _replaced({original: init_process_group}):
        yield
