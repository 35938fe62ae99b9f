"""Ops whose shape-only kernel refuses inputs CUDA runs: the output CUDA would make.

A script asking a GPU tensor's device is told CUDA (devices.py), so libraries take their
CUDA code paths, with the dtypes those use.

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


def _histc(args, kwargs):
    """`torch.histc` of integers (transformers counts the tokens per expert so on CUDA, where
    the CPU's kernel and the meta kernel that mirrors it take floats only): `bins` counts in
    the input's dtype, as CUDA makes them."""
    func = torch.ops.aten.histc.default
    values = compat.argument(func, args, kwargs, "self")
    if values.is_floating_point():
        return None
    return values.new_empty((compat.argument(func, args, kwargs, "bins"),))


SHAPE_KERNELS = {torch.ops.aten.histc.default: _histc}
if _GROUPED_MM is not None:
    SHAPE_KERNELS[_GROUPED_MM.default] = _grouped_mm
