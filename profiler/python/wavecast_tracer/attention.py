"""F.scaled_dot_product_attention as CUDA runs it, in shape mode.

Shape mode traces on (fake) CPU tensors, where torch picks a CPU kernel
(`_scaled_dot_product_flash_attention_for_cpu`) or the math decomposition. On
a GPU, torch 2.x picks flash, memory-efficient or math by dtype, head size,
mask and causality (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp), and
each has its own backward. The CUDA ops have shape (Meta) kernels, so the
choice is made here and that op is called: it is recorded, with its backward,
like any other, and `args.backend` names the choice.

The trace is made once for every GPU, so the choice here is torch's on an
sm80+ GPU: flash needs fp16/bf16, no arbitrary mask, head_dim <= 256 and
equal q/k/v head sizes; memory-efficient takes fp32 too and masks, with head
sizes aligned to 16 bytes; anything else runs the math decomposition. The
predictor moves an op to the kernel an older GPU has instead (no flash before
sm80, no memory-efficient bfloat16 before sm80: the math decomposition) and
says so. (torch >= 2.10 with cuDNN > 9.15 may prefer cuDNN attention on
sm90/sm100; the predictor prices it like flash.)
"""

import contextlib
import functools

import torch

# Recorded op -> the backend it implements (args.backend of the op and its backward).
BACKEND_OF_OP = {
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_backward": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_efficient_attention_backward": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_cudnn_attention_backward": "cudnn",
}

_LOW_PRECISION = (torch.float16, torch.bfloat16)
_FLASH_MAX_HEAD_DIM = 256


def _enabled(name):
    check = getattr(torch.backends.cuda, name, None)
    return check() if check is not None else True


def choose_backend(query, key, value, attn_mask, is_causal, enable_gqa=False):
    """"flash", "efficient" or "math", as torch 2.x's CUDA dispatcher decides on sm80+."""
    dense = all(t.dim() == 4 for t in (query, key, value))
    head, key_head, value_head = query.shape[-1], key.shape[-1], value.shape[-1]
    if not dense or min(query.shape[-2], key.shape[-2], head, value_head) == 0:
        return "math"
    same_heads = query.shape[1] == key.shape[1] == value.shape[1]
    strided = all(t.stride(-1) == 1 for t in (query, key, value))
    if (
        _enabled("flash_sdp_enabled")
        and query.dtype in _LOW_PRECISION
        and attn_mask is None
        and head == key_head == value_head <= _FLASH_MAX_HEAD_DIM
        and not (is_causal and query.shape[-2] != key.shape[-2])
        and (same_heads or enable_gqa)
        and strided
    ):
        return "flash"
    alignment = 8 if query.dtype in _LOW_PRECISION else 4  # 16 bytes, sm80+
    if (
        _enabled("mem_efficient_sdp_enabled")
        and query.dtype in (torch.float32,) + _LOW_PRECISION
        and head == key_head
        and head % alignment == 0
        and value_head % alignment == 0
        and same_heads
        and strided
    ):
        return "efficient"
    return "math"


def _float_mask(mask, dtype):
    """A boolean mask as the additive float mask the CUDA kernels take (convert_boolean_attn_mask)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    # On the mask's device, as CUDA does (a CPU scalar would count as a CPU tensor of the iteration).
    return torch.where(mask.logical_not(), float("-inf"), torch.scalar_tensor(0.0, dtype=dtype, device=mask.device))


def _needs_logsumexp(*tensors):
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def cuda_sdpa(original):
    @functools.wraps(original)
    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                     scale=None, **kwargs):
        if not all(isinstance(t, torch.Tensor) for t in (query, key, value)):
            return original(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, **kwargs)
        attn_mask = _float_mask(attn_mask, query.dtype)
        backend = choose_backend(query, key, value, attn_mask, is_causal, kwargs.get("enable_gqa", False))
        if backend == "flash":
            return torch.ops.aten._scaled_dot_product_flash_attention(
                query, key, value, dropout_p, is_causal, False, scale=scale)[0]
        if backend == "efficient":
            if attn_mask is not None:  # the kernel takes a (batch, heads, L, S) bias
                attn_mask = attn_mask.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
            return torch.ops.aten._scaled_dot_product_efficient_attention(
                query, key, value, attn_mask, _needs_logsumexp(query, key, value), dropout_p, is_causal,
                scale=scale)[0]
        math_kwargs = {"scale": scale}
        if "enable_gqa" in kwargs:
            math_kwargs["enable_gqa"] = kwargs["enable_gqa"]
        return torch.ops.aten._scaled_dot_product_attention_math(
            query, key, value, attn_mask, dropout_p, is_causal, None, **math_kwargs)[0]

    return scaled_dot_product_attention


@contextlib.contextmanager
def cuda_attention():
    """While active, SDPA records the CUDA kernel (torch 2.x; 1.13 has no SDPA), and
    nn.MultiheadAttention / TransformerEncoderLayer take their Python path, which calls
    SDPA: their native inference fast path would run the CPU's fused kernels instead."""
    functional = torch.nn.functional
    original = getattr(functional, "scaled_dot_product_attention", None)
    mha = getattr(torch.backends, "mha", None)
    if original is None:
        yield
        return
    fastpath = mha.get_fastpath_enabled() if mha is not None else None
    functional.scaled_dot_product_attention = cuda_sdpa(original)
    if mha is not None:
        mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        functional.scaled_dot_product_attention = original
        if mha is not None:
            mha.set_fastpath_enabled(fastpath)
