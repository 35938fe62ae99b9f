"""Lets a script written for a GPU (.cuda(), .to("cuda"), device="cuda") trace without one.

Shapes do not depend on the device, so in shape and cpu mode every CUDA device
the script names is mapped to the CPU, and the torch.cuda calls a training
script typically makes answer as if one GPU were present. A GPU tensor reports
the GPU to the script and the libraries it calls (`x.device`, `x.is_cuda`), so
their branches on the device take the GPU's way; torch's own Python is told the
CPU, where it is.

Which device each tensor would be on with a GPU is followed by `placement.Placement`.
"""

import contextlib
import sys

import torch

from . import compat
from .patching import attributes_set
from .placement import Placement, is_host

try:  # torch >= 2.0: torch.set_default_device and `with torch.device(...)`
    from torch.utils import _device as _default_device
except ImportError:
    _default_device = None
# The factories the default device applies to (torch.utils._device._device_constructors).
_DEFAULT_DEVICE_FACTORIES = (
    _default_device._device_constructors() if _default_device is not None else frozenset()
)


def _default_device_is_cuda():
    """Whether torch.set_default_device("cuda") or `with torch.device("cuda"):` is in force."""
    return _default_device is not None and _is_cuda(getattr(_default_device, "CURRENT_DEVICE", None))


def _is_cuda(device):
    """Whether `device` names a CUDA device: a torch.device, a string, or a bare index
    (`x.to(0)`, `device=0`: torch takes it as the accelerator's, CUDA's on a GPU machine)."""
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.split(":", 1)[0] == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


def _cpu_if_cuda(value):
    return torch.device("cpu") if _is_cuda(value) else value


# The device a GPU tensor reports to the script: `x.device`, `x.is_cuda` and
# `x.get_device()` answer as on a GPU, so a branch on them (`autocast(x.device.type)`,
# `if x.is_cuda:`) takes the GPU's way.
REPORTED_GPU = torch.device("cuda", 0)


def actual_device(t):
    """The device a tensor is on in the tracer (the CPU, or meta), not the one it reports."""
    with compat.no_torch_function():
        return t.device


def _is_cpu(device):
    if isinstance(device, torch.device):
        return device.type == "cpu"
    return isinstance(device, str) and device.split(":", 1)[0] == "cpu"


def _names_host(args, kwargs):
    """Whether .to(*args, **kwargs) targets host memory: the CPU by name, or a host tensor."""
    for value in (*args, kwargs.get("device"), kwargs.get("other")):
        if _is_cpu(value) or (isinstance(value, torch.Tensor) and is_host(value)):
            return True
    return False


_ABSENT = object()


def _script_code(caller):
    """Whether the code asking a tensor's device is the script's or a library's it calls,
    not torch's own Python (nn.LSTM's weight flattening and the like call CUDA-only
    functions when told CUDA; the tracer gives torch's CUDA behaviour elsewhere) nor the
    tracer's."""
    return not caller.f_code.co_filename.startswith(compat.OWN_CODE_DIRS)


class _FakeTensorsAsGpuTensors:
    """A fake tensor's `device` is a Python property, and its `tolist()` a Python method,
    that no torch function mode sees: once installed (when the script first asks for CUDA:
    until then nothing is slowed), `device` reports the GPU to the script as _CudaAsCpu does
    for the other queries, and `tolist()` of a GPU tensor is its copy to host memory."""

    def __init__(self, mode):
        self._mode = mode
        self._owner = None
        self._originals = {}

    def install(self):
        try:
            from torch._subclasses.fake_tensor import FakeTensor
        except ImportError:  # torch 1.13
            return
        original = FakeTensor.__dict__.get("device")
        original_tolist = FakeTensor.__dict__.get("tolist")
        if self._owner is not None or not isinstance(original, property):  # 1.13: meta tensors
            return
        mode = self._mode

        def device(tensor):
            actual = original.fget(tensor)
            if (mode.below or actual.type != "cpu" or is_host(tensor) or not _script_code(sys._getframe(1))
                    or not torch._C._is_torch_function_enabled()):
                return actual
            return REPORTED_GPU

        def tolist(tensor):
            if mode.reads_gpu_tensor(tensor, sys._getframe(1)):
                return mode.placement.read_back(original_tolist, (tensor,), {})
            return original_tolist(tensor)

        self._owner = FakeTensor
        self._originals = {"device": original}
        FakeTensor.device = property(device, original.fset)
        if original_tolist is not None:
            self._originals["tolist"] = original_tolist
            FakeTensor.tolist = tolist

    def restore(self):
        if self._owner is not None:
            for name, original in self._originals.items():
                setattr(self._owner, name, original)
            self._owner = None


# Tensor queries _CudaAsCpu answers for a GPU tensor, and the answers.
_DEVICE_QUERIES = {
    torch.Tensor.device.__get__: REPORTED_GPU,
    torch.Tensor.is_cuda.__get__: True,
    torch.Tensor.get_device: 0,
}


class _CudaAsCpu(compat.TorchFunctionMode):
    def __init__(self, on_mapped, placement):
        super().__init__()
        self._on_mapped = on_mapped
        self.placement = placement
        # Whether the script has asked for CUDA: until then its tensors report the CPU, as a
        # script that never does runs on the CPU even on a GPU machine.
        self.cuda_asked = False
        # Torch calls under way through this mode: code below one is torch's, told the CPU.
        self.below = 0
        self.fake_devices = _FakeTensorsAsGpuTensors(self)

    def reads_gpu_tensor(self, tensor, caller):
        """Whether `caller`, the script (not torch's own Python), reads a GPU tensor of the
        recorded iteration into host memory."""
        return (self.cuda_asked and self.placement.recording and not self.below
                and isinstance(tensor, torch.Tensor) and not is_host(tensor) and _script_code(caller))

    def on_mapped(self):
        if not self.cuda_asked:
            self.cuda_asked = True
            self.fake_devices.install()
        self._on_mapped()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        reported = _DEVICE_QUERIES.get(func, _ABSENT)
        if reported is not _ABSENT:
            if (self.cuda_asked and not is_host(args[0]) and actual_device(args[0]).type == "cpu"
                    and _script_code(sys._getframe(1))):
                return reported
            self.below += 1
            try:
                return func(*args, **kwargs)
            finally:
                self.below -= 1
        if func is torch.Tensor.cuda:
            self.on_mapped()
            return self.placement.moved_by_cuda(args[0], args, kwargs)
        if func is torch.Tensor.share_memory_ and compat.is_fake(args[0]):
            # A shape-only tensor has no memory to share (Hogwild's model.share_memory(), a
            # no-op for CUDA memory too).
            return args[0]
        if func is torch.Tensor.tolist and self.reads_gpu_tensor(args[0], sys._getframe(1)):
            return self.placement.read_back(func, args, kwargs)
        if ((func is torch.Tensor.cpu or (func is torch.Tensor.to and _names_host(args[1:], kwargs)))
                and self.reads_gpu_tensor(args[0], sys._getframe(1))):
            return self.placement.copy_to_host(func, args, kwargs)
        to_gpu = False
        if _is_cuda(kwargs.get("device")):
            self.on_mapped()
            kwargs = dict(kwargs, device=torch.device("cpu"))
            to_gpu = True
        elif kwargs.get("device") is None and func in _DEFAULT_DEVICE_FACTORIES and _default_device_is_cuda():
            # The default device's mode sits below this one and would make it on the GPU.
            self.on_mapped()
            kwargs = dict(kwargs, device=torch.device("cpu"))
            to_gpu = True
        if func is torch.Tensor.to:
            # to(device, dtype, non_blocking, copy), to(dtype, ...) or to(other): a bare index
            # names a device only first, where no flag stands.
            devices = [i for i, a in enumerate(args)
                       if i > 0 and _is_cuda(a) and (i == 1 or not isinstance(a, int))]
            if devices:
                self.on_mapped()
                args = tuple(torch.device("cpu") if i in devices else a for i, a in enumerate(args))
                to_gpu = True
        self.below += 1
        try:
            return self.placement.call(func, args, kwargs, to_gpu)
        finally:
            self.below -= 1


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
}
# torch.accelerator (torch >= 2.6), the device-generic API newer scripts ask instead
# (pytorch/examples: `torch.accelerator.current_accelerator()`), answered the same way.
_ACCELERATOR_STANDINS = {
    "is_available": lambda: True,
    "current_accelerator": lambda check_available=False: torch.device("cuda"),
    "current_device_index": lambda: 0,
    "current_device_idx": lambda: 0,
    "set_device_index": lambda device: None,
    "set_device_idx": lambda device: None,
    "device_index": lambda device: contextlib.nullcontext(),
    "synchronize": lambda device=None: None,
    "empty_cache": lambda: None,
}
# The target GPU's own answers (its properties, bf16, memory, streams) are target_gpu.py's.


@contextlib.contextmanager
def cuda_mapped_to_cpu(on_mapped, placement=None, device_count=None):
    """While active, CUDA devices become the CPU; on_mapped() is called on each mapping.
    `placement` (a Placement) follows which tensors would be on the GPU; `device_count()`
    is how many GPUs torch.cuda reports (default one: a distributed script's node has more)."""
    placement = placement if placement is not None else Placement()
    standins = dict(_CUDA_STANDINS)
    if device_count is not None:
        standins["device_count"] = device_count
    saved = {name: getattr(torch.cuda, name) for name in standins}
    for name, standin in standins.items():
        setattr(torch.cuda, name, standin)

    mode = _CudaAsCpu(on_mapped, placement)

    class GeneratorOnCpu(torch.Generator):
        """torch.Generator(device="cuda") draws for the tracer's CPU tensors."""

        def __new__(cls, device="cpu"):
            if _is_cuda(device):
                mode.on_mapped()
            return super().__new__(cls, _cpu_if_cuda(device))

        def __init__(self, device="cpu"):
            pass

    def data_parallel_on_one_gpu(self, *inputs, **kwargs):
        # On one GPU, DataParallel runs its module on the batch (after checking that the
        # parameters are on that GPU, which the tracer's CPU tensors are not).
        return self.module(*inputs, **kwargs)

    generator = torch.Generator
    data_parallel = torch.nn.DataParallel.forward
    torch.Generator = GeneratorOnCpu
    torch.nn.DataParallel.forward = data_parallel_on_one_gpu
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(attributes_set(torch, {
                name: placement.host_memory_view(getattr(torch, name)) for name in ("from_numpy", "frombuffer")}))
            if hasattr(torch, "accelerator"):
                stack.enter_context(attributes_set(
                    torch.accelerator, dict(_ACCELERATOR_STANDINS, device_count=standins["device_count"])))
            stack.enter_context(mode)
            yield
    finally:
        mode.fake_devices.restore()
        torch.Generator = generator
        torch.nn.DataParallel.forward = data_parallel
        for name, original in saved.items():
            setattr(torch.cuda, name, original)
