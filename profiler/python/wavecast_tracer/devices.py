"""Lets a script written for a GPU (.cuda(), .to("cuda"), device="cuda") trace without one.

Shapes do not depend on the device, so in shape and cpu mode every CUDA device
the script names is mapped to the CPU, and the torch.cuda calls a training
script typically makes answer as if one GPU were present.
"""

import contextlib

import torch

from . import compat


def _is_cuda(device):
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.split(":", 1)[0] == "cuda"
    return False


def _cpu_if_cuda(value):
    return torch.device("cpu") if _is_cuda(value) else value


class _CudaAsCpu(compat.TorchFunctionMode):
    def __init__(self, on_mapped):
        super().__init__()
        self.on_mapped = on_mapped

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            self.on_mapped()
            return args[0]
        if _is_cuda(kwargs.get("device")):
            self.on_mapped()
            kwargs = dict(kwargs, device=torch.device("cpu"))
        if func is torch.Tensor.to and any(_is_cuda(a) for a in args[1:]):
            self.on_mapped()
            args = tuple(_cpu_if_cuda(a) for a in args)
        return func(*args, **kwargs)


# torch.cuda functions a training script calls, answered as on a one-GPU machine.
_CUDA_STANDINS = {
    "is_available": lambda: True,
    "device_count": lambda: 1,
    "current_device": lambda: 0,
    "set_device": lambda device: None,
    "synchronize": lambda device=None: None,
    "empty_cache": lambda: None,
    # torch 2.x optimizers ask before each step (CUDA-graph capture check).
    "is_current_stream_capturing": lambda: False,
    # torch.autocast("cuda", dtype=torch.bfloat16) asks; every GPU the predictor prices has bf16.
    "is_bf16_supported": lambda including_emulation=True: True,
}


@contextlib.contextmanager
def cuda_mapped_to_cpu(on_mapped):
    """While active, CUDA devices become the CPU; on_mapped() is called on each mapping."""
    saved = {name: getattr(torch.cuda, name) for name in _CUDA_STANDINS}
    for name, standin in _CUDA_STANDINS.items():
        setattr(torch.cuda, name, standin)
    try:
        with _CudaAsCpu(on_mapped):
            yield
    finally:
        for name, original in saved.items():
            setattr(torch.cuda, name, original)
