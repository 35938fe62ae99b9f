"""CUDA autocast without a GPU: each op gets the dtype CUDA autocast would give it.

`torch.autocast("cuda")` only casts CUDA tensors, and the tracer maps CUDA to
the CPU, so under it every op would stay float32 (and CPU autocast uses other
lists). The script's autocast regions still set torch's CUDA autocast state
(torch.cuda.is_available() answers True while tracing), so the tracer reads that
state and applies CUDA's op lists (aten/src/ATen/autocast_mode.cpp,
../shared/reference/torch2-cuda-behaviour.md) itself, at the Python entry
points of the listed ops, above autograd as the real autocast is: the casts
(`aten::_to_copy`), the forward ops and their backward all get CUDA's dtypes.
Inner calls of a listed op are not cast again (autocast runs a listed op with
itself switched off). `cross_entropy`, a C++ composite whose inner calls CUDA
autocast would see, runs as that composite does (LossNLL.cpp): log_softmax in
the input's own dtype, which it passes explicitly, then nll_loss in float32.
softmax and log_softmax run as SoftMax.cpp does on CUDA: a float16 input goes
to the kernel with half_to_float instead of being cast first. binary_cross_entropy
on a GPU tensor raises, as CUDA autocast's banned kernel does: a script that fails
on the GPU fails here too, with torch's message, rather than being predicted.
torchvision's ops (nms, roi_align, ...) run as its own AutocastCUDA kernels run them,
in float32, their features returned in the input's dtype (TorchvisionAutocast).
"""

import contextlib
import functools

import torch

from . import compat
from .placement import is_host

_F = torch.nn.functional
_ABSENT = object()

# Cast floating inputs (not float64) to the autocast dtype.
_LOWER = {
    torch: ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
            "conv_tbc", "convolution", "_convolution", "prelu", "mm", "bmm", "addmm", "addmv", "addr",
            "baddbmm", "addbmm", "matmul", "einsum", "mv", "chain_matmul", "lstm_cell", "gru_cell",
            "rnn_tanh_cell", "rnn_relu_cell"),
    _F: ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d", "prelu", "scaled_dot_product_attention"),
    torch.Tensor: ("matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "addmv", "addr",
                   "baddbmm", "addbmm", "mv"),
}
# Cast floating inputs to float32.
_FP32 = {
    torch: ("acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
            "rsqrt", "sinh", "tan", "pow", "layer_norm", "group_norm", "norm", "frobenius_norm",
            "nuclear_norm", "cosine_similarity", "cdist", "pdist", "dist", "renorm", "logsumexp",
            "poisson_nll_loss", "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss",
            "kl_div", "triplet_margin_loss"),
    _F: ("softplus", "layer_norm", "group_norm", "cosine_similarity", "nll_loss", "mse_loss", "l1_loss",
         "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy_with_logits", "margin_ranking_loss",
         "hinge_embedding_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
         "multi_margin_loss", "poisson_nll_loss", "cosine_embedding_loss", "multilabel_soft_margin_loss",
         "pdist"),
    torch.Tensor: ("acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
                   "reciprocal", "rsqrt", "sinh", "tan", "pow", "__pow__", "norm", "renorm", "dist",
                   "logsumexp"),
}
# Run in float32 when the caller set no dtype: the output is float32 (`dtype=torch.float32`).
_FP32_OUTPUT = {
    torch: ("sum", "prod", "cumsum", "cumprod"),
    torch.Tensor: ("sum", "prod", "cumsum", "cumprod"),
}
# Cast floating inputs to the widest floating dtype among them.
_PROMOTE = {
    torch: ("addcmul", "addcdiv", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put",
            "tensordot", "scatter_add"),
    _F: ("bilinear", "grid_sample"),
    torch.Tensor: ("addcmul", "addcdiv", "atan2", "cross", "dot", "index_put", "scatter_add"),
}

# Refused on a GPU tensor whatever the dtype (autocast_mode.cpp: binary_cross_entropy_banned).
_BANNED = {
    _F: ("binary_cross_entropy",),
}
BANNED_MESSAGE = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast."
)
# The error's `hint` (loader.user_exception shows it).
BANNED_HINT = ("A GPU raises this too: under CUDA autocast, drop the sigmoid before the loss and use "
               "nn.BCEWithLogitsLoss (or F.binary_cross_entropy_with_logits), which autocast runs in float32.")


# torchvision's own ops (called through torch.ops.torchvision) under CUDA autocast, as its
# AutocastCUDA kernels run them (torchvision/csrc/ops/autocast/): in float32, and -> True:
# the features they return (the first output) cast back to their input's dtype.
_TORCHVISION_FP32 = {"nms": False, "roi_align": True, "roi_pool": True, "ps_roi_align": True,
                     "ps_roi_pool": True, "deform_conv2d": True}


# What torch 2.x's CUDA autocast accepts; it disables a region asked for another dtype.
CUDA_AUTOCAST_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _eligible(value):
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64


class CudaAutocast:
    """The patched entry points and the state they share while tracing."""

    def __init__(self):
        self.inside = False  # running a listed op: its inner calls are not cast again
        self.cache = {}  # id(leaf weight) -> (weight, its low-precision copy), per autocast region
        self.cache_hits = []  # id(leaf weight) of each cast the cache answered, in order
        # Called once when the cache is next cleared (a replayed call's casts die then).
        self.clear_listeners = []
        self.dtypes = []  # autocast dtypes the iteration used, in order of first use

    def dtype(self):
        """The CUDA autocast dtype in effect, or None (also for a dtype CUDA autocast
        refuses: torch disables such a region on a GPU)."""
        if self.inside:
            return None
        dtype = compat.cuda_autocast_dtype()
        return dtype if dtype in CUDA_AUTOCAST_DTYPES else None

    def note(self, dtype):
        if dtype not in self.dtypes:
            self.dtypes.append(dtype)

    def cast(self, value, dtype):
        if not _eligible(value) or value.dtype == dtype:
            return value
        cacheable = dtype != torch.float32 and value.is_leaf and value.requires_grad and torch.is_autocast_cache_enabled()
        if cacheable and id(value) in self.cache:
            self.cache_hits.append(id(value))
            return self.cache[id(value)][1]
        cast = value.to(dtype)
        if cacheable:
            self.cache[id(value)] = (value, cast)
        return cast

    def cast_all(self, values, dtype):
        if isinstance(values, (list, tuple)):
            return type(values)(self.cast_all(v, dtype) for v in values)
        return self.cast(values, dtype)

    def _entry(self, original, run):
        """`original` as autocast sees it: `run(dtype, args, kwargs)` inside an autocast
        region, `original` itself outside one."""
        autocast = self

        @functools.wraps(original)
        def entry(*args, **kwargs):
            dtype = autocast.dtype()
            if dtype is None:
                return original(*args, **kwargs)
            autocast.note(dtype)
            return run(dtype, args, kwargs)

        return entry

    def wrap(self, original, policy):
        """A listed op: its inputs cast as `policy` says, then run with autocast off inside."""

        def listed(dtype, args, kwargs):
            target = policy(dtype, args, kwargs)
            if target is not None:
                args = self.cast_all(args, target)
                kwargs = {k: self.cast_all(v, target) for k, v in kwargs.items()}
            self.inside = True
            try:
                return original(*args, **kwargs)
            finally:
                self.inside = False

        return self._entry(original, listed)

    def wrap_composite(self, original, composite):
        """`original` run as `composite(original, *args, **kwargs)`: its inner calls go
        through the patched entry points, as a C++ composite's go through the
        dispatcher's autocast."""
        return self._entry(original, lambda _dtype, args, kwargs: composite(original, *args, **kwargs))


class TorchvisionAutocast(compat.TorchFunctionMode):
    """torchvision's ops under CUDA autocast: they have no Python entry point of their own to
    patch (torchvision calls torch.ops.torchvision.*), so this mode sees their calls, once
    `autocast` (cuda_autocast's) is set. Entered below the mode that maps CUDA to the CPU,
    which reads its caller's frame to tell the script's calls from torch's."""

    def __init__(self):
        super().__init__()
        self.autocast = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(getattr(func, "overloadpacket", func), "_qualified_op_name", "")
        back_to_input = _TORCHVISION_FP32.get(name.replace("torchvision::", "", 1)) \
            if name.startswith("torchvision::") else None
        dtype = self.autocast.dtype() if back_to_input is not None and self.autocast is not None else None
        if dtype is None:
            return func(*args, **kwargs)
        self.autocast.note(dtype)
        first = args[0] if args else None
        args = self.autocast.cast_all(args, torch.float32)
        kwargs = {k: self.autocast.cast_all(v, torch.float32) for k, v in kwargs.items()}
        self.autocast.inside = True
        try:
            out = func(*args, **kwargs)
        finally:
            self.autocast.inside = False
        if not back_to_input or not _eligible(first):
            return out
        if isinstance(out, tuple):  # roi_pool, ps_roi_*: (features, argmax or channel map)
            return (out[0].to(first.dtype), *out[1:])
        return out.to(first.dtype)


def _lower(dtype, _args, _kwargs):
    return dtype


def _fp32(_dtype, _args, _kwargs):
    return torch.float32


def _fp32_output(_dtype, args, kwargs):
    first = args[0] if args else None
    if kwargs.get("dtype") is None and _eligible(first) and first.dtype != torch.float32:
        kwargs["dtype"] = torch.float32
    return None


def _banned(_dtype, args, kwargs):
    first = args[0] if args else kwargs.get("input")
    if isinstance(first, torch.Tensor) and not is_host(first):
        error = RuntimeError(BANNED_MESSAGE)  # torch's own type and text
        error.hint = BANNED_HINT
        raise error
    return None


def _promote(_dtype, args, kwargs):
    floats = [v for v in list(args) + list(kwargs.values()) if _eligible(v)]
    if not floats:
        return None
    widest = floats[0].dtype
    for value in floats[1:]:
        widest = torch.promote_types(widest, value.dtype)
    return widest


_POLICIES = ((_LOWER, _lower), (_FP32, _fp32), (_FP32_OUTPUT, _fp32_output), (_PROMOTE, _promote),
             (_BANNED, _banned))


def _cross_entropy(original, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                   reduction="mean", label_smoothing=0.0):
    """cross_entropy_loss_symint and its two variants (aten/src/ATen/native/LossNLL.cpp)
    in Python, so that autocast sees their inner calls as it does on CUDA: log_softmax keeps
    a 16-bit input's dtype (the composite passes it), nll_loss casts to float32, and sums
    without a dtype give float32. A float32 input runs as it would anyway."""
    if not _eligible(input) or input.dtype == torch.float32 or input.numel() == 0:
        return original(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    if size_average is not None or reduce is not None:
        reduction = torch.nn._reduction.legacy_get_string(size_average, reduce)
    class_dim = 0 if input.dim() == 1 else 1
    classes = input.shape[class_dim]
    log_probs = torch.log_softmax(input, class_dim, dtype=input.dtype)
    if weight is not None:
        shape = [1] * input.dim()
        shape[class_dim] = weight.shape[0]
        weight_view = weight.view(shape)
    if target.shape == input.shape:  # class probabilities
        if label_smoothing > 0.0:
            target = target * (1 - label_smoothing) + (label_smoothing / classes)
        terms = log_probs * target if weight is None else log_probs * target * weight_view
        if reduction == "none":
            return -terms.sum(class_dim)
        loss = -terms.sum()
        return loss / (input.numel() / classes) if reduction == "mean" else loss
    nll = _F.nll_loss(log_probs, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing <= 0.0:
        return nll
    smooth = -log_probs.sum(class_dim) if weight is None else -(log_probs * weight_view).sum(class_dim)
    ignored = target == ignore_index
    smooth.masked_fill_(ignored, 0.0)
    if reduction == "mean":
        if weight is None:
            smooth = smooth.sum() / (~ignored).sum()
        else:
            weights = weight.gather(0, target.masked_fill(ignored, 0).flatten())
            smooth = smooth.sum() / weights.masked_fill_(ignored.flatten(), 0).sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / classes)


def _softmax_like(kernel, dtype_position):
    """softmax or log_softmax as CUDA autocast runs it: with a float32 output unless the
    caller set a dtype, and a float16 input goes straight to the kernel with half_to_float
    (SoftMax.cpp, on CUDA only) where other inputs are cast to float32 first. `kernel`:
    the ATen op; `dtype_position`: where the entry point takes `dtype` positionally."""

    def composite(original, *args, **kwargs):
        input = args[0] if args else kwargs.get("input")
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        dtype = args[dtype_position] if len(args) > dtype_position else kwargs.get("dtype")
        if dtype is not None or not _eligible(input) or input.dtype == torch.float32:
            return original(*args, **kwargs)
        if input.dtype == torch.float16 and dim is not None:
            try:
                return kernel(input, dim, True)
            except RuntimeError:  # the CPU has no half-to-float kernel: cpu mode casts first
                pass
        return original(*args, **dict(kwargs, dtype=torch.float32))

    return composite


# C++ composites whose inner calls autocast sees: run by a Python copy of the composite.
# softmax and log_softmax take `dtype` third from torch and Tensor, fourth from F
# (after `_stacklevel`).
_COMPOSITES = {owner: {name: _softmax_like(kernel, dtype_position)
                       for name, kernel in (("softmax", torch.ops.aten._softmax),
                                            ("log_softmax", torch.ops.aten._log_softmax))}
               for owner, dtype_position in ((_F, 3), (torch, 2), (torch.Tensor, 2))}
_COMPOSITES[_F]["cross_entropy"] = _cross_entropy


@contextlib.contextmanager
def cuda_autocast():
    """While active, the script's CUDA autocast regions cast as on a GPU; yields the
    CudaAutocast (its `dtypes` are the autocast dtypes the trace used)."""
    autocast = CudaAutocast()
    wrappers = [(owner, name, functools.partial(autocast.wrap, policy=policy))
                for table, policy in _POLICIES for owner, names in table.items() for name in names]
    wrappers += [(owner, name, functools.partial(autocast.wrap_composite, composite=composite))
                 for owner, composites in _COMPOSITES.items() for name, composite in composites.items()]
    saved = []
    replaced = []
    for owner, name, wrap in wrappers:
        original = getattr(owner, name, None)
        if original is None:
            continue
        saved.append((owner, name, owner.__dict__.get(name, _ABSENT)))
        wrapped = wrap(original)
        setattr(owner, name, wrapped)
        replaced.append((wrapped, original))
    clear = torch.clear_autocast_cache

    def clear_autocast_cache():  # autocast.__exit__ of the outermost region
        autocast.cache.clear()
        clear()
        listeners, autocast.clear_listeners = autocast.clear_listeners, []
        for listener in listeners:
            listener()

    torch.clear_autocast_cache = clear_autocast_cache
    try:
        with compat.scripted_as_originals(replaced):
            yield autocast
    finally:
        torch.clear_autocast_cache = clear
        for owner, name, original in reversed(saved):
            if original is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


def precision(autocast):
    """The script's precision settings as CUDA would apply them (read at trace end)."""
    dtypes = [str(d).replace("torch.", "") for d in autocast.dtypes] if autocast is not None else []
    return dict(compat.tf32_settings(), autocast=dtypes[0] if dtypes else None)


def _autocast_class():
    amp = getattr(torch, "amp", None)
    module = getattr(amp, "autocast_mode", None) if amp is not None else None
    return getattr(module, "autocast", None)


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


@contextlib.contextmanager
def checked_autocast_regions(on_unmodelled):
    """While active, autocast regions CUDA would not run as the script wrote them call
    on_unmodelled(kind, **facts) (a trace warning kind) and are predicted as CUDA runs them:
    - autocast("cpu") casts only CPU tensors; the script's tensors run on the GPU (the
      tracer runs them on the CPU), so the region is entered disabled;
    - a CUDA dtype torch refuses (float64, ...): torch disables the region on a GPU;
    - another device ("xpu", "mps"): it casts none of the GPU's tensors."""
    cls = _autocast_class()
    if cls is None:  # torch 1.13: torch.autocast is its own class; nothing to check
        yield
        return
    original = cls.__init__

    def init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        device = str(device_type)
        if enabled and device == "cpu":
            on_unmodelled("autocast_cpu_only")
            enabled = False
        elif enabled and device == "cuda" and dtype is not None and dtype not in CUDA_AUTOCAST_DTYPES:
            on_unmodelled("autocast_unsupported_dtype", dtype=_dtype_name(dtype))
        elif enabled and device not in ("cuda", "cpu"):
            on_unmodelled("autocast_other_device", device=device)
        original(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    cls.__init__ = init
    try:
        yield
    finally:
        cls.__init__ = original
