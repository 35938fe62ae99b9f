"""Ops whose shape-only kernel refuses inputs CUDA runs: the output CUDA would make.

Each entry takes the op's (args, kwargs) on fake tensors and returns its output, or
None where torch's own shape-only kernel applies.
"""

import torch

from . import compat

_GROUPED_MM = getattr(torch.ops.aten, "_grouped_mm", None)


def _grouped_mm(args, kwargs):
    """`torch._grouped_mm` (transformers' mixture-of-experts layers, torchtitan's experts).
    Its meta kernel accepts bf16 only, but CUDA runs float32 and float16 too, as one mm
    per group (aten/src/ATen/native/cuda/GroupedBlas.cpp, `_grouped_mm_fallback`), so
    their outputs are made here as the meta kernel makes bf16's."""
    func = _GROUPED_MM.default
    mat_a, mat_b = (compat.argument(func, args, kwargs, name) for name in ("self", "mat2"))
    if mat_a.dtype == torch.bfloat16 and mat_b.dtype == torch.bfloat16:
        return None
    from torch._meta_registrations import _create_grouped_mm_output_tensor

    offsets, out_dtype = (compat.argument(func, args, kwargs, name) for name in ("offs", "out_dtype"))
    return _create_grouped_mm_output_tensor(mat_a, mat_b, offsets, out_dtype)


SHAPE_KERNELS = {_GROUPED_MM.default: _grouped_mm} if _GROUPED_MM is not None else {}
