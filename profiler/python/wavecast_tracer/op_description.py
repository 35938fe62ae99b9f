"""What the trace records of an op call: its tensors' metadata and its cost-relevant
arguments (docs/trace-format.md, "Operation record"), shared by the recorder and the
calibration suite."""

import math

import torch

from .attention import BACKEND_OF_OP

# Ops that only query or relabel metadata and never launch work. Views (view,
# t, transpose, expand, ...) are kept: they cost nothing but the predictor
# needs them to follow shapes, and it knows they are free.
METADATA_OPS = frozenset(
    {"aten::detach", "prim::device", "prim::layout", "aten::lift_fresh", "aten::lift",
     # torch.profiler.record_function's markers (FSDP2 labels its steps with them)
     "profiler::_record_function_enter", "profiler::_record_function_enter_new",
     "profiler::_record_function_exit"}
)

_SKIP = object()


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def tensor_meta(t):
    meta = {
        "shape": [int(d) for d in t.shape],
        "dtype": _dtype_name(t.dtype),
        "contiguous": bool(t.is_contiguous()),
    }
    if not meta["contiguous"]:
        layout = _CHANNELS_LAST.get(t.dim())
        if layout is not None and t.is_contiguous(memory_format=layout[0]):
            meta["memory_format"] = layout[1]
        # How a kernel walks it: a copy of k.transpose(-2, -1) reads across rows, a head
        # split's copy reads whole rows; both are only "not contiguous".
        meta["strides"] = [int(s) for s in t.stride()]
    return meta


# NHWC / NDHWC layouts (model.to(memory_format=torch.channels_last)): cuDNN picks other kernels.
_CHANNELS_LAST = {4: (torch.channels_last, "channels_last"), 5: (torch.channels_last_3d, "channels_last_3d")}


def _arg_value(value):
    """A cost-relevant scalar argument as JSON, or _SKIP."""
    if isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _SKIP
    if isinstance(value, torch.dtype):
        return _dtype_name(value)
    if isinstance(value, (list, tuple)) and all(isinstance(e, (bool, int)) for e in value):
        return [int(e) for e in value]
    return _SKIP


def describe_call(func, name, args, kwargs, tensors=None):
    """An op call as the trace records it: its tensor inputs' metadata in schema order
    and its cost-relevant arguments (docs/trace-format.md "Operation record"). `tensors`,
    when given, gets the input tensors, parallel to the metadata (None where absent)."""
    inputs = []
    op_args = {}
    first_index = {}  # id of each tensor argument -> the input it first appeared as

    def input_meta(t):
        if tensors is not None:
            tensors.append(t)
        meta = tensor_meta(t)
        first = first_index.setdefault(id(t), len(inputs))
        if first != len(inputs):  # the very tensor again (x * x): memory reads it once
            meta["same_as"] = first
        return meta

    for position, argument in enumerate(func._schema.arguments):
        if position < len(args):
            value = args[position]
        elif argument.name in kwargs:
            value = kwargs[argument.name]
        else:
            value = argument.default_value
        if isinstance(value, torch.Tensor):
            inputs.append(input_meta(value))
        elif value is None and "Tensor" in str(argument.type):
            inputs.append(None)
            if tensors is not None:
                tensors.append(None)
            if argument.name == "bias":
                op_args["bias"] = False
            continue
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
            for t in value:
                if t is None and tensors is not None:
                    tensors.append(None)
                inputs.append(input_meta(t) if t is not None else None)
            op_args["num_tensors"] = len(value)
        else:
            converted = _arg_value(value)
            if converted is not _SKIP:
                op_args[argument.name] = converted
            continue
        if argument.name == "bias":
            op_args["bias"] = True
    if name in BACKEND_OF_OP:
        op_args["backend"] = BACKEND_OF_OP[name]
    if name == "aten::_to_copy" and args and isinstance(args[0], torch.nn.Parameter):
        op_args["of_parameter"] = True  # autocast's weight cast, which FSDP's gather replaces
    return inputs, op_args
