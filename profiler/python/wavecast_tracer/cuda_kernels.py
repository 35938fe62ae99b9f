"""Ops whose shape-only kernel refuses inputs CUDA runs: the output CUDA would make.

Each entry takes the op's (args, kwargs) on fake tensors and returns its output, or
None where torch's own shape-only kernel applies.
"""

import torch


def _grouped_mm(args, kwargs):
    """`torch._grouped_mm` (transformers' mixture-of-experts layers, torchtitan's experts).
    Its meta kernel accepts bf16 only, but CUDA runs float32 and float16 too, as one mm
    per group (aten/src/ATen/native/cuda/GroupedBlas.cpp, `_grouped_mm_fallback`), so
    their outputs are made here as the meta kernel makes bf16's."""
    names = ("mat_a", "mat_b", "offs", "bias", "out_dtype")
    bound = dict(zip(names, args), **kwargs)
    mat_a, mat_b = bound["mat_a"], bound["mat_b"]
    if mat_a.dtype == torch.bfloat16 and mat_b.dtype == torch.bfloat16:
        return None
    from torch._meta_registrations import _create_grouped_mm_output_tensor

    return _create_grouped_mm_output_tensor(mat_a, mat_b, bound.get("offs"), bound.get("out_dtype"))


SHAPE_KERNELS = {}
if hasattr(torch.ops.aten, "_grouped_mm"):
    SHAPE_KERNELS[torch.ops.aten._grouped_mm.default] = _grouped_mm
