"""Every torch-version difference the tracer depends on (1.13 and 2.x)."""

import contextlib
import functools
import importlib
import os
import warnings

import torch
import torch.utils._python_dispatch
from torch._subclasses import fake_tensor as _fake_tensor
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.overrides import TorchFunctionMode  # noqa: F401 - re-exported (1.13 and 2.x)
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: F401 - re-exported

from .patching import attributes_set

# Where torch's own Python and the tracer's live: a frame in either is neither the script's
# code nor a library's it calls.
OWN_CODE_DIRS = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.path.abspath(__file__)) + os.sep)

_meta_library = None  # torch.library.Library registrations live as long as this object


def make_fake_mode():
    try:  # torch 2.x: tolerate real tensors the script created at import time
        return FakeTensorMode(allow_non_fake_inputs=True)
    except TypeError:  # torch 1.13 has no such keyword
        return FakeTensorMode()


def _convolution_backward_meta(
    grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask,
):
    grad_input = input.new_empty(input.shape) if output_mask[0] else None
    grad_weight = weight.new_empty(weight.shape) if output_mask[1] else None
    grad_bias = (
        grad_output.new_empty(bias_sizes) if output_mask[2] and bias_sizes is not None else None
    )
    return grad_input, grad_weight, grad_bias


def _has_meta_kernel(call):
    try:
        call()
        return True
    except NotImplementedError:
        return False
    except RuntimeError as exc:  # 1.13 reports a missing Meta kernel as a RuntimeError
        return "Meta" not in str(exc)


def ensure_meta_kernels():
    """Registers Meta kernels that torch 1.13 lacks, so they do not fall back to real CPU work."""
    global _meta_library
    if _meta_library is not None:
        return
    x = torch.empty(1, 1, 3, 3, device="meta")
    w = torch.empty(1, 1, 1, 1, device="meta")
    probe = lambda: torch.ops.aten.convolution_backward(  # noqa: E731
        x, x, w, [1], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]
    )
    library = torch.library.Library("aten", "IMPL", "Meta")
    if not _has_meta_kernel(probe):
        library.impl("convolution_backward", _convolution_backward_meta)
    _meta_library = library


@contextlib.contextmanager
def spy_on_fallbacks(on_fallback):
    """Calls on_fallback(func) whenever FakeTensorMode runs an op for real on the CPU."""
    original = _fake_tensor.run_fallback_kernel

    def spy(fake_mode, func, *args, **kwargs):
        on_fallback(func)
        return original(fake_mode, func, *args, **kwargs)

    _fake_tensor.run_fallback_kernel = spy
    try:
        yield
    finally:
        _fake_tensor.run_fallback_kernel = original


@contextlib.contextmanager
def replace_record_function(factory):
    """Swaps torch.autograd.profiler.record_function, which Optimizer.step/zero_grad
    enter (and which fails inside a dispatch mode on 1.13), for `factory`."""
    profiler = torch.autograd.profiler
    original = profiler.record_function
    profiler.record_function = factory
    try:
        yield
    finally:
        profiler.record_function = original


@contextlib.contextmanager
def track_optimizers(on_new):
    """Calls on_new(optimizer) for every torch.optim.Optimizer constructed meanwhile."""
    cls = torch.optim.Optimizer
    original = cls.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        on_new(self)

    cls.__init__ = init
    try:
        yield
    finally:
        cls.__init__ = original


@contextlib.contextmanager
def fused_dropout():
    """Training dropout as CUDA runs it: one aten::native_dropout kernel with a 1-byte
    mask and one native_dropout_backward. Off the GPU, torch takes a composite path
    instead (bernoulli_ into a float mask, div_, mul): three more ops and a mask four
    times the size, which would overstate both time and memory."""
    functional = torch.nn.functional
    original_functional, original_torch = functional.dropout, torch.dropout

    def fusable(input, p, training):
        return training and 0.0 < p < 1.0 and isinstance(input, torch.Tensor) and input.is_floating_point()

    @functools.wraps(original_functional)
    def dropout(input, p=0.5, training=True, inplace=False):
        if fusable(input, p, training) and not inplace:
            return torch.native_dropout(input, p, True)[0]
        return original_functional(input, p, training, inplace)

    @functools.wraps(original_torch)
    def torch_dropout(input, p, train):
        if fusable(input, p, train):
            return torch.native_dropout(input, p, True)[0]
        return original_torch(input, p, train)

    functional.dropout, torch.dropout = dropout, torch_dropout
    try:
        yield
    finally:
        functional.dropout, torch.dropout = original_functional, original_torch


def cuda_autocast_dtype():
    """The dtype of the CUDA autocast region in effect, or None outside one."""
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
        enabled = torch.is_autocast_enabled("cuda")
        return torch.get_autocast_dtype("cuda") if enabled else None
    return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None


# torch's defaults (since 1.12): full-FP32 matmuls, TF32 convolutions.
_DEFAULT_PRECISION = {"matmul_tf32": False, "cudnn_tf32": True, "float32_matmul_precision": "highest"}


def tf32_settings():
    """Whether CUDA would run float32 matmuls and convolutions in TF32, as the script set it."""
    with warnings.catch_warnings():  # 2.9+ warns that allow_tf32 will be deprecated
        warnings.simplefilter("ignore")
        matmul_precision = torch.get_float32_matmul_precision()
        return {
            "matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32) or matmul_precision != "highest",
            "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": matmul_precision,
        }


@contextlib.contextmanager
def default_precision():
    """Each trace starts from torch's TF32 defaults, whatever an earlier trace in this
    worker set, and leaves the worker's settings as they were."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
                 torch.get_float32_matmul_precision())
        torch.set_float32_matmul_precision(_DEFAULT_PRECISION["float32_matmul_precision"])
        torch.backends.cuda.matmul.allow_tf32 = _DEFAULT_PRECISION["matmul_tf32"]
        torch.backends.cudnn.allow_tf32 = _DEFAULT_PRECISION["cudnn_tf32"]
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.set_float32_matmul_precision(saved[2])
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]


def real_execution():
    """Inside a dispatch handler: runs torch ops for real, bypassing every mode."""
    from torch.utils._mode_utils import no_dispatch

    return no_dispatch()


@contextlib.contextmanager
def without_modes():
    """Runs torch as without a tracer: no dispatch mode, not even one that could be
    detected (torch.load asks whether a fake mode is active, and then reads no data), and
    no torch function mode (which would take torch's own device arguments for the GPU's)."""
    from torch.utils._mode_utils import no_dispatch

    with contextlib.ExitStack() as stack:
        if _disable_dispatch_modes is not None:  # torch >= 2.0
            stack.enter_context(_disable_dispatch_modes())
        stack.enter_context(no_dispatch())
        states = getattr(torch._C, "_TorchFunctionState", None)  # torch >= 2.4
        if states is not None:
            before = torch._C._get_torch_function_state()
            torch._C._set_torch_function_state(states.ALL_DISABLED)
            stack.callback(torch._C._set_torch_function_state, before)
        else:
            stack.enter_context(torch._C.DisableTorchFunction())
        yield


def is_value_dependent_error(exc):
    """FakeTensorMode could not compute an op's output without tensor values: it said so, or
    an op without a meta kernel read a fake tensor's data (`_pad_packed_sequence` reads its
    batch sizes on the host)."""
    return (isinstance(exc, (_fake_tensor.DynamicOutputShapeException, _fake_tensor.DataDependentOutputException))
            or (type(exc) is RuntimeError and "data is not allocated yet" in str(exc)))


def argument(func, args, kwargs, *names):
    """What this call gives the first of `func`'s schema arguments named in `names`: its
    positional or keyword value, else the schema's default (None without one)."""
    for position, schema_argument in enumerate(func._schema.arguments):
        if schema_argument.name in names:
            if position < len(args):
                return args[position]
            if schema_argument.name in kwargs:
                return kwargs[schema_argument.name]
            return schema_argument.default_value if schema_argument.has_default_value() else None
    return None


def op_name(func):
    return func._schema.name  # "aten::convolution": the overload packet name


@functools.lru_cache(maxsize=None)  # asked on every dispatch
def is_view_op(func):
    """Whether `func` returns a view of an input: an alias that does not write (aten::view,
    select, transpose, ...; not relu_)."""
    return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)


@functools.lru_cache(maxsize=None)
def writes_an_input(func):
    """Whether `func` modifies an input in place (relu_, add_, an out= variant)."""
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def is_fake(tensor):
    return isinstance(tensor, _fake_tensor.FakeTensor)


def has_fake_constant(tensors):
    """Whether a fake tensor among `tensors` carries the real value FakeTensorMode keeps for
    small tensors made from Python numbers (FakeTensor.constant), which its ops update."""
    return any(getattr(t, "constant", None) is not None for t in tensors)


def _wrapper_subclass_check():
    try:
        from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    except ImportError:  # torch 1.13: no DTensor
        return lambda value: False
    return is_traceable_wrapper_subclass


_is_wrapper_subclass = _wrapper_subclass_check()


def has_wrapper_subclass(values):
    """Whether `values` (an op's arguments: tensors, lists of them) hold a tensor subclass
    that wraps other tensors (DTensor, AsyncCollectiveTensor)."""
    for value in values:
        if isinstance(value, torch.Tensor):
            if _is_wrapper_subclass(value):
                return True
        elif isinstance(value, (list, tuple)) and has_wrapper_subclass(value):
            return True
    return False


def versions():
    import platform

    return {"torch": torch.__version__, "python": platform.python_version()}


@contextlib.contextmanager
def deepcopyable_fake_tensors():
    """copy.deepcopy of a FakeTensor (nn.TransformerEncoder copies its layer) yields
    a bare meta tensor on 1.13; clone instead, keeping requires_grad and parameter-ness."""
    cls = _fake_tensor.FakeTensor
    original = cls.__dict__.get("__deepcopy__")

    def deepcopy(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            copy = self.clone()
        copy.requires_grad_(self.requires_grad)
        if getattr(self, "_is_param", False):
            copy._is_param = True
        memo[id(self)] = copy
        return copy

    cls.__deepcopy__ = deepcopy
    try:
        yield
    finally:
        if original is None:
            del cls.__deepcopy__
        else:
            cls.__deepcopy__ = original


@contextlib.contextmanager
def grad_scalers_stepping():
    """A GradScaler skips the optimizer's step while its scaled gradients overflow, as the
    first steps do until its scale comes down; a run soon steps every time, and that is the
    iteration traced. Its check of found_inf stays (the reads a GPU makes); the step runs
    whatever they say, in cpu mode as in shape mode, where they read as 0."""
    owners = []
    for module in ("torch.amp.grad_scaler", "torch.cuda.amp.grad_scaler"):
        try:
            owner = importlib.import_module(module).GradScaler
        except (ImportError, AttributeError):
            continue
        if "_maybe_opt_step" in owner.__dict__:
            owners.append(owner)

    def maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        if sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):
            # Gradients cpu mode computed that overflowed: zeroed unseen, so the step leaves
            # the weights finite, as the step a GPU would skip does.
            with without_modes():
                for group in optimizer.param_groups:
                    for parameter in group["params"]:
                        if parameter.grad is not None:
                            parameter.grad.zero_()
        return optimizer.step(*args, **kwargs)

    with contextlib.ExitStack() as stack:
        for owner in owners:
            stack.enter_context(attributes_set(owner, {"_maybe_opt_step": maybe_opt_step}))
        yield


@contextlib.contextmanager
def readable_fake_values(value_of):
    """What a script reads of a fake tensor to print or measure it: `.numpy()` (a metric
    computed with NumPy or scikit-learn, an image saved), which refuses a tensor subclass,
    read `value_of(fake)` instead: a real CPU tensor, the value the trace follows or the
    stand-in a read of one it does not compute gets. A 0-d tensor's format
    (`f"{acc1[0]:6.2f}"`), which torch reads as `.item()` for a real tensor only, reads it
    so for a fake one too."""
    cls = _fake_tensor.FakeTensor
    originals = {name: cls.__dict__.get(name) for name in ("numpy", "__format__")}

    def numpy(self, *, force=False):
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        with real_execution():
            return value_of(self).detach().clone().numpy()  # a copy, as `.cpu()` of a GPU tensor

    def format_(self, spec):
        if self.dim() == 0:  # read as `.item()`, which waits for the GPU as it does there
            return self.item().__format__(spec)
        return torch.Tensor.__format__(self, spec)

    cls.numpy = numpy
    cls.__format__ = format_
    try:
        yield
    finally:
        for name, original in originals.items():
            if original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)


@contextlib.contextmanager
def convertible_fake_parameters():
    """torch 2.x's Module._apply (model.cuda(), model.to(memory_format=...)) swaps a fake
    parameter with its converted copy, and torch.utils.swap_tensors refuses: the fake mode
    holds a weakref to every fake tensor. Setting .data instead is what _apply does for real
    tensors, and keeps the Parameter object the optimizer holds. 1.13 never swaps."""
    utils = torch.utils
    original = getattr(utils, "swap_tensors", None)
    if original is None:
        yield
        return

    def swap_tensors(t1, t2):
        if not (is_fake(t1) and is_fake(t2)):
            return original(t1, t2)
        with torch.no_grad():
            t1.data = t2
        return None

    utils.swap_tensors = swap_tensors
    try:
        yield
    finally:
        utils.swap_tensors = original


# The C methods, called with torch functions disabled (compat.no_torch_function): Tensor.storage()
# builds a TypedStorage in Python and goes through FakeTensor's and the device mode's
# __torch_function__, 50x slower, and it runs for every op output.
_TensorBase = getattr(torch._C, "TensorBase", None) or torch._C._TensorBase
_raw_storage = getattr(_TensorBase, "untyped_storage", None) or _TensorBase._storage  # 2.x, 1.13
no_torch_function = torch._C.DisableTorchFunction


_disable_dispatch_modes = getattr(torch.utils._python_dispatch, "_disable_current_modes", None)


def fake_tensors(fake_mode, layouts):
    """Fake tensors of `layouts` ((shape, stride, storage offset, dtype, storage elements,
    device) each), made as FakeTensorMode makes its outputs, without dispatching through the
    modes: a fraction of the cost. None where this torch cannot (1.13)."""
    if _disable_dispatch_modes is None:
        return None
    fakes = []
    with _disable_dispatch_modes(), no_torch_function():
        for shape, stride, offset, dtype, elements, device in layouts:
            meta = torch.empty_strided((elements,), (1,), dtype=dtype, device="meta")
            fakes.append(_fake_tensor.FakeTensor(fake_mode, meta.as_strided(shape, stride, offset), device))
    return fakes


def storage_identity(tensor):
    """(key, bytes) of the storage under `tensor`, shared by its views; None without one.
    Call inside no_torch_function()."""
    try:
        storage = _raw_storage(tensor)
    except (RuntimeError, NotImplementedError):  # sparse, nested: no plain storage
        return None
    return storage._cdata, storage.nbytes()


def saveable(tensor):
    """What a saved-tensors pack hook may return for `tensor`. torch 1.13 under a dispatch mode
    turns a saved Python number (a 0-dim "wrapped number" tensor) back into a float when it is
    unpacked, and backward fails; a plain copy of the 0-dim tensor does not."""
    if tensor.dim() == 0 and not tensor.requires_grad and not is_fake(tensor):
        with real_execution():
            return tensor.clone()
    return tensor



@contextlib.contextmanager
def scripted_as_originals(replaced):
    """While active, TorchScript takes each (replacement, original) of `replaced` (the
    tracer's wrappers of torch functions: autocast's F.linear, F.layer_norm) for the
    original, as a script that `torch.jit.script`s its model has it compiled on a GPU, not
    our wrappers' Python: a builtin op by TorchScript's table of builtins (keyed by id, so a
    dead wrapper's is removed after), a Python function by compiling it, not the wrapper."""
    from torch.jit import _builtins, _recursive

    table = _builtins._get_builtin_table()
    registered = []
    originals = {}
    for replacement, original in replaced:
        op = _builtins._find_builtin(original)
        if op is not None:
            table[id(replacement)] = op
            registered.append(id(replacement))
        else:
            originals[id(replacement)] = (replacement, original)
    try_compile_fn = _recursive.try_compile_fn

    def compiled_as_original(fn, loc):
        entry = originals.get(id(fn))
        return try_compile_fn(entry[1] if entry is not None and entry[0] is fn else fn, loc)

    try:
        with attributes_set(_recursive, {"try_compile_fn": compiled_as_original}):
            yield
    finally:
        for key in registered:
            table.pop(key, None)
