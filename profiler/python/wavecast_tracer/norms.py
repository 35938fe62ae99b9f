"""RMSNorm as CUDA runs it, in shape mode.

torch >= 2.8 runs `F.rms_norm` (nn.RMSNorm) on a GPU as one fused op,
`aten::_fused_rms_norm`, whose backward is `aten::_fused_rms_norm_backward`
(aten/src/ATen/native/layer_norm.cpp: rms_norm_symint; channels_last, complex inputs and
a weight of another dtype take the composite path there too). On the CPU the fused op is
CompositeImplicitAutograd: it decomposes into six or more elementwise and reduction ops
above autograd, each recorded and priced as a kernel of its own. While `cuda_rms_norm()`
is active, the fused op has an autograd kernel for (fake) CPU tensors that records it
whole, saving what the CUDA kernel's autograd saves (input, rstd, weight); its backward
op has a shape kernel.
"""

import contextlib

import torch

from . import compat

_FORWARD = getattr(torch.ops.aten, "_fused_rms_norm", None)
_BACKWARD = getattr(torch.ops.aten, "_fused_rms_norm_backward", None)


class _FusedRmsNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, normalized_shape, weight, eps):
        with torch._C._AutoDispatchBelowAutograd():
            output, rstd = _FORWARD.default(input, normalized_shape, weight, eps)
        ctx.normalized_shape = normalized_shape
        ctx.save_for_backward(input, rstd, weight)
        ctx.mark_non_differentiable(rstd)
        ctx.set_materialize_grads(False)  # rstd gets no gradient, as on CUDA: no zeros op
        return output, rstd

    @staticmethod
    def backward(ctx, grad_output, _grad_rstd):
        input, rstd, weight = ctx.saved_tensors
        mask = [ctx.needs_input_grad[0], weight is not None and ctx.needs_input_grad[2]]
        grad_input, grad_weight = _BACKWARD.default(
            grad_output, input, ctx.normalized_shape, rstd, weight, mask)
        return grad_input, None, grad_weight, None


def _fused_rms_norm(input, normalized_shape, weight=None, eps=None):
    if not compat.is_fake(input):  # a real CPU tensor: the CPU's own (composite) path
        return _FORWARD.default.decompose(input, normalized_shape, weight, eps)
    return _FusedRmsNorm.apply(input, list(normalized_shape), weight, eps)


@contextlib.contextmanager
def cuda_rms_norm():
    """While active, `aten::_fused_rms_norm` on fake CPU tensors is recorded as the one op
    CUDA runs, with its backward (torch < 2.8 has no fused op: nothing changes)."""
    if _FORWARD is None or _BACKWARD is None:
        yield
        return
    library = torch.library.Library("aten", "IMPL")
    library.impl("_fused_rms_norm", _fused_rms_norm, "AutogradCPU")
    try:
        yield
    finally:
        library._destroy()
