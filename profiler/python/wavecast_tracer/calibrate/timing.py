"""Timing backends of the calibration suite, one interface.

The suite runs a workload's steps under an op-recording dispatch mode; around each ATen
op it calls `start()` and `stop(token)`, and after the iteration `finish(tokens, calls)`
gives each op's GPU time in ms (`calls`: the ops' descriptions, in the same order);
`memory_mark()` before an op and `transient_bytes(mark)` after it give the memory the op
held only while it ran (0 where the backend allocates nothing).
Backends:

- `EventsTimer`: a CUDA event recorded on the current stream before and after each op;
  the elapsed time between the two. A short spin kernel queued before the first event
  keeps the GPU busy while the CPU launches the op, so the op's kernels run back to back
  and its time is theirs, not the launch's;
- `CuptiTimer`: each op in a `torch.profiler.record_function` range, its time the sum
  of the CUDA kernels CUPTI attributes to the range (kernel time only);
- `FakeTimer`: no GPU; ops run on meta tensors and each takes a deterministic time from
  its tensors' sizes (`fake_op_ms`), for tests.
"""

import datetime
import subprocess
import sys
import time

import torch


class SetupError(Exception):
    """This machine cannot calibrate (no GPU, CUPTI denied): one message and a hint."""

    def __init__(self, message, hint):
        super().__init__(message)
        self.message = message
        self.hint = hint


# Host cost: a loop of tiny ops timed on the CPU clock. `op`: an out-of-place op whose
# input needs a gradient (dispatch, autograd's node, one kernel launch); `launch`: an
# in-place op without autograd (dispatch and launch only).
HOST_LOOP = 2000


def _host_loop_us(fn, count=HOST_LOOP):
    for _ in range(50):
        fn()
    start = time.perf_counter()
    for _ in range(count):
        fn()
    return (time.perf_counter() - start) / count * 1e6


def measure_host(device):
    """Per-op CPU cost on this machine: {"op_us", "launch_us", "loop"}, and on a GPU its
    copies over the host link ("host_to_device_gbs", "device_to_host_gbs": measure_copies)."""
    x = torch.zeros(16, device=device, requires_grad=True)
    y = torch.zeros(16, device=device)
    op_us = _host_loop_us(lambda: x * 2)
    launch_us = _host_loop_us(lambda: y.add_(1))
    host = {"op_us": round(op_us, 3), "launch_us": round(launch_us, 3), "loop": HOST_LOOP}
    if device != "meta":
        torch.cuda.synchronize()
        try:
            host.update(measure_copies(device))
        except RuntimeError as exc:  # page-locked memory refused: the file keeps the rest
            print(f"copies over the host link not measured: {exc}", file=sys.stderr, flush=True)
    return host


# A batch of images (ResNet's 64 at 224 x 224 is 38.5 MB): copies of this size run at the
# link's rate, not its latency.
HOST_COPY_BYTES = 64 << 20
HOST_COPY_REPEATS = 5


def measure_copies(device):
    """Copies of HOST_COPY_BYTES over the host link, 10^9 B/s, the median of
    HOST_COPY_REPEATS each way ("host_to_device_gbs", "device_to_host_gbs"): "pinned" to or
    from page-locked memory (CUDA events around the DMA), "pageable" as `x.to("cuda")` and
    `x.cpu()` make them (the CPU's clock from the call to its return: the driver's staging,
    the DMA and the stream's synchronization)."""
    gpu = torch.ones(HOST_COPY_BYTES, dtype=torch.uint8, device=device)
    pinned = torch.ones(HOST_COPY_BYTES, dtype=torch.uint8).pin_memory()
    pageable = torch.ones(HOST_COPY_BYTES, dtype=torch.uint8)

    def pinned_ms(target, source):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        target.copy_(source, non_blocking=True)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def pageable_ms(target, source):
        torch.cuda.synchronize()
        started = time.perf_counter()
        target.copy_(source)  # non_blocking=False: returns after the stream synchronizes
        return (time.perf_counter() - started) * 1e3

    def gbs(measure, target, source):
        measure(target, source)  # the first copy maps the pages
        times = sorted(measure(target, source) for _ in range(HOST_COPY_REPEATS))
        return round(HOST_COPY_BYTES / (times[len(times) // 2] * 1e-3) / 1e9, 2)

    return {
        "host_to_device_gbs": {"pinned": gbs(pinned_ms, gpu, pinned),
                               "pageable": gbs(pageable_ms, gpu, pageable), "bytes": HOST_COPY_BYTES},
        "device_to_host_gbs": {"pinned": gbs(pinned_ms, pinned, gpu),
                               "pageable": gbs(pageable_ms, pageable, gpu), "bytes": HOST_COPY_BYTES},
    }


def _nvidia_smi(query):
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits",
                              "--id=" + str(torch.cuda.current_device())],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return [field.strip() for field in out.strip().split(",")]
    except (OSError, subprocess.SubprocessError):
        return None


def describe_cuda_gpu():
    """The GPU, driver and library versions as the calibration file records them."""
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    gpu = {
        "name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_bytes": int(props.total_memory),
    }
    driver = None
    smi = _nvidia_smi("driver_version,clocks.max.sm,clocks.max.mem,clocks.sm")
    if smi and len(smi) == 4:
        driver = smi[0]
        for key, value in zip(("max_sm_clock_mhz", "max_memory_clock_mhz", "sm_clock_mhz"), smi[1:]):
            try:
                gpu[key] = float(value)
            except ValueError:
                pass
    return gpu, {
        "driver": driver,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }


def check_cuda():
    if not torch.cuda.is_available():
        raise SetupError(
            f"no CUDA GPU visible to torch {torch.__version__}; calibrate measures this machine's GPU",
            "run 'wavecast calibrate' on a machine with an NVIDIA GPU, its driver and a CUDA "
            "build of PyTorch; --python-env names the environment that has it")


class CudaMemory:
    """The memory an op holds only while it runs (a cuDNN or cuBLAS workspace, a composite's
    temporaries): the caching allocator's peak during the op above what stays allocated
    after it, which torch.cuda.max_memory_allocated() counts. Read on the CPU, outside the
    timed range."""

    def memory_mark(self):
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()

    def transient_bytes(self, before):
        after = torch.cuda.memory_allocated()
        return max(0, torch.cuda.max_memory_allocated() - max(before, after))


# How long the spin kernel before each op keeps the GPU busy: longer than the CPU takes to
# record an event and dispatch and launch one op, in SM cycles at up to 2 GHz (1 ms). A
# cuDNN convolution's backward can take a few hundred microseconds of CPU to launch its
# kernels; with a 200 us spin the GPU waited inside such ops, and small convolutions were
# timed at 2-4x their kernels (bench/truth/timer_check.py).
LAUNCH_COVER_CYCLES = 2_000_000


class EventsTimer(CudaMemory):
    name = "cuda_events"
    device = "cuda"

    def __init__(self):
        check_cuda()

    def begin(self):
        pass

    def start(self):
        torch.cuda._sleep(LAUNCH_COVER_CYCLES)
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def stop(self, token):
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        return (token, end)

    def finish(self, tokens, calls):
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in tokens]

    def describe(self):
        return describe_cuda_gpu()

    def host(self):
        return measure_host(self.device)


def _device_time_us(event):
    for attribute in ("device_time_total", "cuda_time_total"):
        value = getattr(event, attribute, None)
        if value is not None:
            return value
    return 0.0


class CuptiTimer(CudaMemory):
    """Kernel time per op through torch.profiler (CUPTI inside Kineto)."""

    name = "cupti"
    device = "cuda"

    def __init__(self):
        check_cuda()
        self._profiler = None
        self._check_access()

    def _check_access(self):
        x = torch.ones(1 << 20, device="cuda")
        self.begin()
        token = self.start()
        x.mul_(2)
        times = self.finish([self.stop(token)], [None])
        if not times or times[0] <= 0:
            raise SetupError(
                "CUPTI recorded no kernels: profiling this GPU is not permitted for this user",
                "allow it (NVreg_RestrictProfilingToAdminUsers=0, or run with CAP_SYS_ADMIN), "
                "or time with CUDA events alone (--timer events)")

    def begin(self):
        from torch.profiler import ProfilerActivity, profile
        self._profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        self._profiler.__enter__()
        self._next = 0

    def start(self):
        from torch.profiler import record_function
        index = self._next
        self._next += 1
        scope = record_function(f"wavecast_calibrate#{index}")
        scope.__enter__()
        return (index, scope)

    def stop(self, token):
        token[1].__exit__(None, None, None)
        return token[0]

    def finish(self, tokens, calls):
        torch.cuda.synchronize()
        self._profiler.__exit__(None, None, None)
        by_index = {}
        for event in self._profiler.events():
            if event.name.startswith("wavecast_calibrate#"):
                by_index[int(event.name.split("#")[1])] = _device_time_us(event) / 1000.0
        self._profiler = None
        return [by_index.get(index, 0.0) for index in tokens]

    def describe(self):
        return describe_cuda_gpu()

    def host(self):
        return measure_host(self.device)


def _numel(meta):
    n = 1
    for d in meta["shape"]:
        n *= max(d, 0)
    return n


def fake_op_ms(call):
    """A deterministic time for an op: 2 us plus 1 ns per element of its tensors, and 1 us
    more per backward or optimizer op. Only for tests: it is not any GPU."""
    elements = sum(_numel(m) for m in call["inputs"] + call["outputs"] if m is not None)
    return 0.002 + elements * 1e-6 + (0.001 if call["phase"] != "forward" else 0.0)


class FakeTimer:
    name = "fake"
    device = "meta"

    def __init__(self, gpu_name):
        self.gpu_name = gpu_name

    def memory_mark(self):
        return 0

    def transient_bytes(self, before):
        return 0  # meta tensors allocate nothing

    def begin(self):
        pass

    def start(self):
        return None

    def stop(self, token):
        return None

    def finish(self, tokens, calls):
        return [fake_op_ms(call) for call in calls]

    def describe(self):
        gpu = {"name": self.gpu_name, "compute_capability": "0.0", "sm_count": 0, "memory_bytes": 0}
        return gpu, {"driver": None, "torch": torch.__version__, "cuda": None, "cudnn": None}

    def host(self):
        return {"op_us": 20.0, "launch_us": 5.0, "loop": 0,
                "host_to_device_gbs": {"pinned": 25.0, "pageable": 10.0, "bytes": 0},
                "device_to_host_gbs": {"pinned": 24.0, "pageable": 8.0, "bytes": 0}}


def make_timer(name, fake_gpu=None):
    if name == "fake":
        return FakeTimer(fake_gpu or "Fake GPU")
    if name == "cupti":
        return CuptiTimer()
    return EventsTimer()


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
