"""torch.cuda's device questions answered as the first target GPU would (scripts run as
written ask them: Lightning and Accelerate pick bf16 or TF32 from the capability, timm
and many loops print the device's name and memory).

The request names the GPU (`device`: its name, memory, compute capability,
multiprocessors and L2 cache, from wavecast's GPU database); without one, an H100 SXM
answers.
"""

import contextlib
import types

import torch

from .patching import attributes_set

DEFAULT = {"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 80 * 1024 ** 3, "capability": [9, 0],
           "multiprocessors": 132, "l2_cache_bytes": 50 * 1024 ** 2}


class _Event:
    """torch.cuda.Event: timing a GPU that is not there gives 0 ms; waiting for one is the
    CPU waiting for the GPU."""

    def __init__(self, streams):
        self._streams = streams

    def record(self, stream=None):
        pass

    def synchronize(self):
        self._streams.synchronized()

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def elapsed_time(self, other):
        return 0.0


class Streams:
    """Which stream the script issues work on: one it made (`torch.cuda.Stream()`) while
    `torch.cuda.stream(s)`, `with s:` or `torch.cuda.set_stream(s)` makes it current, else
    the default stream. The trace's ops are recorded in one order whatever their stream; a
    copy to the GPU notes a stream of the script's own (timm's prefetcher copies the next
    batch on one, beside the compute)."""

    def __init__(self, synchronized=None):
        self._entered = []  # streams made current by a `with`, innermost last
        self._set = None  # the stream set_stream made current
        # Called where the script waits for the GPU: torch.cuda.synchronize(), a stream's or
        # an event's synchronize().
        self.synchronized = synchronized or (lambda: None)

    def current(self):
        """The stream made current, or None for the default stream."""
        return self._entered[-1] if self._entered else self._set

    def on_side_stream(self):
        current = self.current()
        return current is not None and current.side

    def enter(self, stream):
        self._entered.append(stream)

    def leave(self):
        self._entered.pop()

    @contextlib.contextmanager
    def using(self, stream):
        """torch.cuda.stream(stream): None leaves the current stream as it is."""
        if stream is None:
            yield
            return
        self.enter(stream)
        try:
            yield
        finally:
            self.leave()

    def set(self, stream):
        self._set = stream


class _Stream:
    """torch.cuda.Stream: work on it is the trace's; one the script made is a side stream,
    the current and default streams are not."""

    def __init__(self, streams, side):
        self._streams = streams
        self.side = side

    def synchronize(self):
        self._streams.synchronized()

    def query(self):
        return True

    def wait_stream(self, stream):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        return event if event is not None else _Event(self._streams)

    def __enter__(self):
        self._streams.enter(self)
        return self

    def __exit__(self, *exc):
        self._streams.leave()
        return False


def _properties(device):
    capability = device["capability"]
    return types.SimpleNamespace(
        name=device["name"], total_memory=int(device["memory_bytes"]), major=int(capability[0]),
        minor=int(capability[1]), multi_processor_count=int(device["multiprocessors"]),
        is_integrated=False, is_multi_gpu_board=False, uuid="GPU-00000000-0000-0000-0000-000000000000",
        L2_cache_size=int(device["l2_cache_bytes"]), gcnArchName="")


@contextlib.contextmanager
def answering_as(device=None, streams=None):
    """While active, torch.cuda's device queries answer for `device` (DEFAULT when None);
    `streams` (a Streams) follows the stream the script makes current."""
    device = dict(DEFAULT, **(device or {}))
    properties = _properties(device)
    streams = streams if streams is not None else Streams()

    class Stream(_Stream):
        def __init__(self, *args, **kwargs):
            super().__init__(streams, side=True)

    class Event(_Event):
        def __init__(self, *args, **kwargs):
            super().__init__(streams)

    def synchronize(device=None):
        streams.synchronized()

    def default_stream(device=None):
        return _Stream(streams, side=False)

    def current_stream(device=None):
        return streams.current() or default_stream()

    # A function of its own for each name: torch._dynamo maps torch's functions to its rules
    # by identity, and refuses one function under two names with different rules.
    def zero():  # memory counters of a GPU the trace never uses
        return lambda *args, **kwargs: 0

    def nothing():
        return lambda *args, **kwargs: None

    answers = {
        "get_device_properties": lambda device=None: properties,
        "get_device_capability": lambda device=None: (properties.major, properties.minor),
        "get_device_name": lambda device=None: properties.name,
        "mem_get_info": lambda device=None: (properties.total_memory, properties.total_memory),
        "memory_allocated": zero(), "max_memory_allocated": zero(), "memory_reserved": zero(),
        "max_memory_reserved": zero(), "reset_peak_memory_stats": nothing(), "reset_max_memory_allocated": nothing(),
        "manual_seed": nothing(), "manual_seed_all": nothing(), "seed": nothing(), "seed_all": nothing(),
        # A CUDA generator's state: its seed and offset, 16 bytes.
        "get_rng_state": lambda device="cuda": torch.zeros(16, dtype=torch.uint8),
        "get_rng_state_all": lambda: [torch.zeros(16, dtype=torch.uint8)],
        "set_rng_state": nothing(), "set_rng_state_all": nothing(), "initial_seed": zero(),
        "ipc_collect": nothing(), "init": nothing(), "is_initialized": lambda: True,
        "Event": Event, "Stream": Stream, "current_stream": current_stream, "default_stream": default_stream,
        "stream": streams.using, "set_stream": streams.set, "synchronize": synchronize,
        "device": lambda device=None: contextlib.nullcontext(),
        # As torch answers: bf16 kernels from sm_80 on; before that, emulated (a T4 runs
        # bf16 autocast), unless the caller asks without emulation (transformers' bf16 check).
        "is_bf16_supported": lambda including_emulation=True: properties.major >= 8 or including_emulation,
        "get_arch_list": lambda: [f"sm_{properties.major}{properties.minor}"],
    }
    # torch.accelerator's (torch >= 2.6) memory and stream questions, the same answers.
    accelerator = {name: answers[name] for name in (
        "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
        "reset_peak_memory_stats", "current_stream", "synchronize")}
    accelerator.update(get_memory_info=answers["mem_get_info"], memory_stats=lambda device=None: {},
                       reset_accumulated_memory_stats=nothing(), set_stream=streams.set)
    with contextlib.ExitStack() as stack:
        stack.enter_context(attributes_set(torch.cuda, answers))
        if hasattr(torch, "accelerator"):
            stack.enter_context(attributes_set(torch.accelerator, accelerator))
        yield properties
