"""Multi-tensor (`_foreach_*`) ops, which optimizers run per parameter group: FakeTensorMode
decomposes each into one op per tensor, most of an optimizer step's tracing. The recorder
runs those whose outputs it can tell without that (recorder.OpRecorder._run_shape_only).
"""

import functools

import torch

from . import compat


@functools.lru_cache(maxsize=None)
def writes_in_place(func):
    """A multi-tensor op that writes its tensor list in place (`_foreach_add_`)."""
    schema = func._schema
    return schema.name.startswith("aten::_foreach_") and schema.name.endswith("_") and not schema.returns


# Multi-tensor ops whose every output is shaped and laid out as its first list's tensor.
_ELEMENTWISE_FOREACH = frozenset(
    f"aten::_foreach_{name}" for name in (
        "add", "sub", "mul", "div", "sqrt", "neg", "abs", "exp", "log", "reciprocal", "sign", "lerp",
        "addcmul", "addcdiv", "maximum", "minimum", "clamp_min", "clamp_max", "pow"))


@functools.lru_cache(maxsize=None)
def makes_elementwise_list(func):
    """An elementwise multi-tensor op that returns a new list (`_foreach_sqrt`)."""
    schema = func._schema
    return schema.name in _ELEMENTWISE_FOREACH and len(schema.returns) == 1


def new_list_layouts(args, kwargs):
    """The layouts of an elementwise multi-tensor op's outputs (compat.fake_tensors), when each
    is plainly its first list's tensor's: at every position, every list's tensor has the
    same shape, strides and floating dtype, dense; the other arguments are numbers. Else None."""
    lists = [a for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple)) and a
             and isinstance(a[0], torch.Tensor)]
    if not lists or lists[0] is not args[0] or compat.has_fake_constant(args[0]):
        return None
    for value in (*args, *kwargs.values()):
        if not (any(value is l for l in lists) or isinstance(value, (int, float, type(None)))
                or (isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value))):
            return None
    layouts = []
    for tensors in zip(*lists):
        first = tensors[0]
        shape, stride, dtype = first.shape, first.stride(), first.dtype
        if not dtype.is_floating_point or first.storage_offset() or not compat.is_fake(first):
            return None
        if not (first.is_contiguous() or first.is_contiguous(memory_format=torch.channels_last)):
            return None
        for t in tensors[1:]:
            if t.shape != shape or t.stride() != stride or t.dtype != dtype:
                return None
        layouts.append((tuple(shape), stride, 0, dtype, first.numel(), first.device))
    return layouts
