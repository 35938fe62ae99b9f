"""What a long-lived worker keeps between traces of a project, and when it may.

The worker (worker.py) traces the same script again on every save. Re-importing the
project's modules and rebuilding the model cost as much as a large part of the trace,
so what is unchanged is kept; anything that could make the trace differ from a fresh
one drops it (docs/performance.md).
"""

import ast
import hashlib

import torch


def file_digest(path):
    """The content hash of a source file, or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.blake2b(f.read(), digest_size=16).digest()
    except OSError:
        return None


class ProjectModules:
    """The content hash of each project module's file as it was when last traced.

    Kept only while every one is unchanged: a module that imports from another holds
    names bound from it (`from helpers import f`), so one changed file makes every
    project module stale, and they are all imported again.
    """

    def __init__(self):
        self._digests = {}  # module name -> (file, digest)
        self.root = None

    def unchanged(self, root, loaded):
        """Whether `loaded` ({name: file}: the project modules in sys.modules) are
        exactly the modules recorded for this project root, with the same contents."""
        if root != self.root or set(loaded) != set(self._digests):
            return False
        for name, file in loaded.items():
            recorded_file, digest = self._digests[name]
            if recorded_file != file or file_digest(file) != digest:
                return False
        return True

    def other_projects(self, root):
        """The names recorded for another project root than `root` (a worker that traced
        another project before): dropped, so this project's same-named modules load."""
        return list(self._digests) if self.root not in (None, root) else []

    def record(self, root, loaded):
        self.root = root
        self._digests = {name: (file, file_digest(file)) for name, file in loaded.items()}

    def forget(self):
        self.root = None
        self._digests = {}


def model_key(project, source, module, role_names, mode, world_size):
    """What the model built by the model provider depends on, as a hash; None when it
    cannot be told (the entry does not parse).

    The entry file's syntax tree with line numbers (comments aside), leaving out the
    top-level `def`s of the providers named in `role_names` (the input and iteration
    providers: they run again on every trace anyway). Any other change, including one
    that moves a line of the model's code, gives another key: the model is built again.
    """
    try:
        tree = ast.parse(source, project.entry_file)
    except (SyntaxError, ValueError):
        return None
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr((project.entry_file, mode, world_size)).encode())
    for node in tree.body:
        if _is_provider_def(node, module, role_names):
            digest.update(b"provider " + node.name.encode())
        else:
            digest.update(ast.dump(node, include_attributes=True).encode())
    return digest.digest()


def _is_provider_def(node, module, role_names):
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.decorator_list:
        return False
    if node.name not in role_names:
        return False
    code = getattr(module.__dict__.get(node.name), "__code__", None)
    return code is not None and code.co_firstlineno == node.lineno


class BuiltModel:
    """A model the model provider returned, and what building it left behind in the trace
    state, so that a later trace can start from the same point without building it."""

    def __init__(self, key, model, fake_mode, shadows, warnings, cuda_mapped):
        self.key = key
        self.model = model
        self.fake_mode = fake_mode
        # (tensor, real value) of the model's small integer/bool/constant tensors
        # (values.Shadows.kept_values), as built: the iteration may change them in place.
        self.shadows = shadows
        self.warnings = warnings  # trace warnings the build raised
        self.cuda_mapped = cuda_mapped
        self.training = [(m, m.training) for m in model.modules()]
        self.requires_grad = [(p, p.requires_grad) for p in model.parameters()]
        self.grads = [(p, p.grad) for p in model.parameters()]
        self.fingerprint = fingerprint(model)
        # What the iteration's optimizers built over these parameters in their first step.
        self.optimizer_states = OptimizerStates()
        # Its forward and backward as the last traces recorded them (replay.RecordedCalls).
        self.calls = None

    def restore(self):
        """Puts the model back as it was built; returns False when the last trace changed
        it in a way that cannot be undone (a new or replaced parameter, buffer or submodule,
        another dtype or shape, a hook added)."""
        for module, training in self.training:
            module.training = training
        for parameter, requires_grad in self.requires_grad:
            parameter.requires_grad_(requires_grad)
        for parameter, grad in self.grads:
            parameter.grad = grad
        return fingerprint(self.model) == self.fingerprint


def _hook_counts(owner, names):
    return tuple(len(getattr(owner, name, None) or ()) for name in names)


_MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
                 "_state_dict_hooks", "_load_state_dict_pre_hooks")
_TENSOR_HOOKS = ("_backward_hooks", "_post_accumulate_grad_hooks")


def fingerprint(model):
    modules = []
    for name, module in model.named_modules(remove_duplicate=False):
        modules.append((
            name, id(module), type(module).__qualname__, _hook_counts(module, _MODULE_HOOKS),
            tuple((key, id(value)) for key, value in module._parameters.items()),
            tuple((key, id(value)) for key, value in module._buffers.items()),
        ))
    tensors = []
    for tensor in (*model.parameters(), *model.buffers()):
        tensors.append((id(tensor), tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()),
                        tensor.storage_offset(), _hook_counts(tensor, _TENSOR_HOOKS)))
    return tuple(modules), tuple(tensors)


def adopt_classes(model, module, entry_module_name):
    """Gives the model's submodules whose classes the entry defines the same classes of the
    newly run entry `module` (the source is unchanged, so they are equivalent): the
    iteration's `isinstance(model, Net)` then holds as for a fresh model. False when a
    class cannot be found there (defined inside a function)."""
    swaps = []
    for submodule in model.modules():
        cls = type(submodule)
        if cls.__module__ != entry_module_name:
            continue
        found = module
        for part in cls.__qualname__.split("."):
            found = getattr(found, part, None)
        if not isinstance(found, type) or found.__qualname__ != cls.__qualname__:
            return False
        swaps.append((submodule, found))
    for submodule, cls in swaps:
        submodule.__class__ = cls
    return True


class OptimizerStates:
    """The state torch.optim optimizers built over a kept model's parameters in their
    unrecorded first step (optimizers.steady_state_steps), for the next trace's optimizer.

    The iteration provider runs again on every trace and makes a new optimizer; its first
    step would build the same state again (a `clone` or `zeros_like` per parameter: as much
    tracing as the recorded step). A new optimizer adopts a kept state when it is of the same
    class, over the same parameters in the same groups, with the same options apart from the
    learning rate (`lr`, and `initial_lr`, which an LR scheduler copies from it): no option of
    torch.optim's optimizers but those decides what state a step builds from the learning
    rate. Only torch.optim's own classes qualify, whose state is per parameter and nothing
    else, and only states of tensors and numbers (not LBFGS's history lists).
    """

    _LEARNING_RATE = ("lr", "initial_lr")

    def __init__(self):
        self._kept = []  # (signature, {parameter: state}, [(tensor, real value)], tensor metadata)

    @classmethod
    def signature(cls, optimizer):
        """What must match for `optimizer` to adopt a kept state; None when it may not.
        Taken before its first step (which may add options to its groups)."""
        if not type(optimizer).__module__.startswith("torch.optim."):
            return None
        groups = []
        for group in optimizer.param_groups:
            options = []
            for key, value in sorted(group.items()):
                if key == "params" or key in cls._LEARNING_RATE:
                    continue
                # A tensor option (capturable steps, a tensor beta) matches only itself.
                options.append((key, ("tensor", id(value)) if _is_tensor(value) else repr(value)))
            groups.append((tuple(id(p) for p in group["params"]), tuple(options)))
        return type(optimizer), tuple(groups)

    def keep(self, signature, optimizer, kept_values):
        """Keeps the state `optimizer` built in its first step; `kept_values(tensors)`: the
        real values the trace follows of some of them (values.Shadows.kept_values)."""
        if signature is None:
            return
        state = {}
        for parameter, per_param in optimizer.state.items():
            if not all(_is_tensor(v) or isinstance(v, (bool, int, float)) for v in per_param.values()):
                return
            state[parameter] = dict(per_param)
        tensors = [v for per_param in state.values() for v in per_param.values() if _is_tensor(v)]
        self._kept = [kept for kept in self._kept if kept[0] != signature]
        self._kept.append((signature, state, kept_values(tensors), _metadata(tensors)))

    def adopt(self, signature, optimizer, restore_values):
        """Gives `optimizer` the state kept for its signature and its tensors' followed values
        (`restore_values`: values.Shadows.restore); returns the state's tensors
        (to count as memory live since before the iteration), or None when there is none or
        the last trace changed it (another shape, dtype or stride)."""
        for kept_signature, state, values, metadata in self._kept:
            if kept_signature != signature:
                continue
            tensors = [v for per_param in state.values() for v in per_param.values() if _is_tensor(v)]
            if _metadata(tensors) != metadata:
                return None
            for parameter, per_param in state.items():
                optimizer.state[parameter] = dict(per_param)
            restore_values(values)
            return tensors
        return None


def _is_tensor(value):
    return isinstance(value, torch.Tensor)


def _metadata(tensors):
    return [(id(t), t.dtype, tuple(t.shape), tuple(t.stride()), t.storage_offset()) for t in tensors]


class TraceCache:
    """What one worker keeps between the traces it runs (worker.py creates one)."""

    def __init__(self):
        self.modules = ProjectModules()
        self.model = None  # a BuiltModel, or None

    def forget(self):
        self.modules.forget()
        self.model = None
