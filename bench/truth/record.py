#!/usr/bin/env python3
"""Records ground truth on a GPU machine: real training iterations of samples.

For each SAMPLE:BATCH[,BATCH...] it runs the sample's own iteration with the
model and batch on the GPU (as measured mode does) and writes, in the format of
../shared/truth/h100/sweep.json (read by bench/truth/compare.py):

- `fp32_default` / `bf16_autocast`: wall time of one iteration with CUDA
  events around it, WARMUP iterations first, then the median, min and max of
  --iterations timed ones (host work included), as written and with the whole
  iteration under torch.autocast("cuda", bfloat16);
- `lines.kernel_sum_us` and `lines.per_op`: the GPU time of one iteration and
  each ATen op's self GPU time and call count, from torch.profiler;
  `lines.busy_us` the time the GPU was busy on any stream (below the kernel sum where
  kernels overlap) and `lines.streams` how many streams ran them;
  `lines.per_shape` the same per ATen op and input shapes (another profiled
  iteration, with shapes recorded), slowest first: what each layer's kernels
  really took, to hold against the cost model op by op;
  `bf16_lines` the same under bf16 autocast (which kernels mixed precision
  really runs: casts, tensor-core GEMMs, fp32 softmax and norms);
- `lines.lines_us`: GPU time per source line ("samples/x.py:LINE", backward
  and optimizer ops on the lines wavecast credits them to), from `wavecast
  trace --mode cuda` when --wavecast is given (measured mode, CUPTI kernels);
  `lines.measured_kernel_sum_us`: the same trace's total, to hold against
  torch.profiler's;
- `peak_mem_bytes`: torch.cuda.max_memory_allocated() over the runs; and per
  precision (`fp32_default`, `bf16_autocast`), `peak_allocated_bytes` and
  `peak_reserved_bytes` (torch.cuda.max_memory_reserved(): the caching
  allocator's segments), each from a fresh model with the peak statistics reset;
- the GPU, driver, CUDA, torch and cuDNN versions at the top.

Run it from the repository root on the GPU machine:

    build/python-env/bin/python bench/truth/record.py OUT.json \\
        samples/small_cnn.py:64 samples/resnet50.py:32,128 --wavecast build/bin/wavecast

It needs torch with CUDA; wavecast itself only for the per-line figures.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WARMUP = 3


def load_sample(path):
    spec = importlib.util.spec_from_file_location("wavecast_truth_sample", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def to_device(value, device):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def prepare(path, batch, wrap=None):
    """A fresh model, batch and iteration on the GPU; `wrap` (torch.compile, say) is applied
    to the model before the sample's iteration is made of it, as a script would."""
    import torch

    sample = load_sample(path)
    model = sample.wavecast_model().cuda()
    if wrap is not None:
        model = wrap(model)
    inputs = sample.wavecast_input(batch_size=batch)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    return model, to_device(tuple(inputs), torch.device("cuda")), sample.wavecast_iteration(model)


def in_precision(step, autocast):
    """The iteration as run: under bf16 CUDA autocast (the whole of it) or as written."""
    import torch

    def one(*inputs):
        if autocast:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                step(*inputs)
        else:
            step(*inputs)

    return one


def timed(step, inputs, iterations, autocast):
    import torch

    run = in_precision(step, autocast)

    def one():
        run(*inputs)

    for _ in range(WARMUP):
        one()
    torch.cuda.synchronize()
    times, issue = [], []
    for _ in range(iterations):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        issued_from = time.perf_counter()
        one()
        # The CPU's own clock: how long it took to issue the iteration (waits for the GPU
        # included where the script reads a GPU value), what the host model predicts.
        issue.append((time.perf_counter() - issued_from) * 1e3)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "issue_ms": statistics.median(issue)}


def profiled(step, inputs, autocast=False):
    """torch.profiler's GPU time of one iteration, as a truth file's `lines`: the kernel sum,
    per ATen op, the GPU's busy time and streams, and per ATen op and input shapes."""
    import torch

    run = in_precision(step, autocast)
    run(*inputs)
    torch.cuda.synchronize()
    # CPU events too: they name the ATen op each kernel's time belongs to (with CUDA alone,
    # the rows would be kernels).
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        run(*inputs)
        torch.cuda.synchronize()
    per_op = {}
    averages = prof.key_averages()
    for event in averages:
        if event.self_device_time_total > 0 and not str(event.device_type).endswith("CUDA"):
            per_op[event.key] = {"self_device_us": round(event.self_device_time_total, 3),
                                 "count": event.count}
    total = sum(kernel.duration for kernel in kernels_of(prof))
    profile = {"kernel_sum_us": round(total, 3), "per_op": per_op, "host_per_op": host_per_op(averages)}
    profile.update(device_busy(prof))
    profile["per_shape"] = per_shape(run, inputs)
    return profile


def host_per_op(averages):
    """The CPU's own time per op and autograd node over the profiled iteration ({key:
    {"self_cpu_us", "count"}}), what the host model prices per op: dispatch, the kernel
    launches and autograd's bookkeeping, under the profiler's own cost of a few
    microseconds per event; the iteration's issue time less their sum is the Python."""
    return {event.key: {"self_cpu_us": round(event.self_cpu_time_total, 3), "count": event.count}
            for event in averages
            if event.self_cpu_time_total > 0 and not str(event.device_type).endswith("CUDA")}


def device_busy(prof):
    """The GPU's busy time over one iteration, the union of its activities' spans on every
    stream, and the streams they ran on. Below the kernel sum where kernels overlap: cuDNN
    runs an RNN's layers and directions on streams of its own (GNMT's FP32 kernel sum is
    25-30% over its GPU-bound wall time), and the cost model prices elapsed time. Not the
    profiler's GPU-side user annotations (`Optimizer.step#Adam.step`): each spans its first
    kernel to its last, the idle gaps between them included."""
    from torch.autograd import DeviceType

    device = [event for event in prof.events()
              if event.device_type == DeviceType.CUDA and not event.is_user_annotation]
    spans = [(event.time_range.start, event.time_range.end) for event in device]
    return {"busy_us": round(union_length(spans), 3),
            "streams": len({event.device_resource_id for event in device})}


def union_length(spans):
    """How much of the time line the (start, end) spans cover together."""
    covered, start, end = 0.0, None, None
    for first, last in sorted(spans):
        if end is None or first > end:
            covered += 0.0 if end is None else end - start
            start, end = first, last
        else:
            end = max(end, last)
    return covered + (0.0 if end is None else end - start)


def kernels_of(prof):
    """Every kernel of a profile (CPU and CUDA activities) once, as
    ../shared/tools/gpu_truth.py sums them: summing per-op times would count an optimizer
    step's kernels twice (its Optimizer.step# range has them as its own device time as well
    as its ops')."""
    for event in prof.events():
        yield from getattr(event, "kernels", None) or []


def per_shape(run, inputs):
    """Self GPU time per ATen op and input shapes over one iteration, slowest first."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        run(*inputs)
        torch.cuda.synchronize()
    rows = [{"op": event.key, "input_shapes": json.loads(json.dumps(event.input_shapes, default=str)),
             "self_device_us": round(event.self_device_time_total, 3), "count": event.count}
            for event in prof.key_averages(group_by_input_shape=True)
            if event.self_device_time_total > 0 and event.key.startswith("aten::")]
    return sorted(rows, key=lambda row: -row["self_device_us"])


def measured_lines(wavecast, path, batch, root):
    """GPU time per source line from a measured (CUPTI) trace: {"samples/x.py:N": us}."""
    with tempfile.TemporaryDirectory() as directory:
        out = os.path.join(directory, "trace.json")
        subprocess.run([wavecast, "trace", path, "--mode", "cuda", "--batch-size", str(batch),
                        "--out", out], check=True)
        with open(out, encoding="utf-8") as f:
            trace = json.load(f)
    lines, total = {}, 0.0
    for op in trace["ops"]:
        us = sum(k["duration_ms"] for k in op.get("kernels", [])) * 1000.0
        total += us
        loc = op.get("loc") or {}
        key = f"{os.path.relpath(loc['file'], root)}:{loc['line']}" if loc.get("file") else "unattributed"
        lines[key] = lines.get(key, 0.0) + us
    return {key: round(us, 3) for key, us in lines.items()}, round(total, 3), trace.get("warnings", [])


def versions():
    import torch

    props = torch.cuda.get_device_properties(0)
    driver = ""
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        pass
    return {"device": torch.cuda.get_device_name(), "sms": props.multi_processor_count,
            "driver": driver, "cuda": torch.version.cuda, "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(),
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
            "recorded": time.strftime("%Y-%m-%d")}


def release_memory():
    """Frees what earlier runs of this process left allocated, cuBLAS's workspaces included
    (held per thread and stream, and counted by max_memory_allocated()): a run's peak is
    then its own, as in a process of its own. Without it, a sample with no GEMM recorded
    after others (DCGAN) peaked 72 MiB above its own peak."""
    import torch

    torch._C._cuda_clearCublasWorkspaces()
    torch.cuda.empty_cache()


def peak_memory():
    """The caching allocator's peaks since they were last reset."""
    import torch

    return {"peak_allocated_bytes": torch.cuda.max_memory_allocated(),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved()}


def record_run(path, batch, options, root):
    import torch

    started = time.perf_counter()
    release_memory()
    torch.cuda.reset_peak_memory_stats()
    model, inputs, step = prepare(path, batch)
    run = {"batch_size": batch, "fp32_default": timed(step, inputs, options.iterations, autocast=False)}
    run["lines"] = dict(profiled(step, inputs), lines_us={})
    run["fp32_default"].update(peak_memory())
    peak = run["fp32_default"]["peak_allocated_bytes"]
    del model, inputs, step
    if options.bf16:
        # A fresh model and optimizer for bf16, the FP32 one gone first, so its peak is its own.
        release_memory()
        torch.cuda.reset_peak_memory_stats()
        try:
            model, inputs, step = prepare(path, batch)
            run["bf16_autocast"] = timed(step, inputs, options.iterations, autocast=True)
            # Per-op kernel time under autocast too: which kernels bf16 really runs.
            run["bf16_lines"] = profiled(step, inputs, autocast=True)
            run["bf16_autocast"].update(peak_memory())
            del model, inputs, step
        except Exception as error:  # noqa: B902 - e.g. BCELoss refuses autocast: recorded, not fatal
            run["bf16_error"] = f"{type(error).__name__}: {error}"
        peak = max(peak, torch.cuda.max_memory_allocated())
    run["peak_mem_bytes"] = peak
    torch.cuda.empty_cache()
    if options.wavecast:
        lines, total, warnings = measured_lines(options.wavecast, path, batch, root)
        run["lines"]["lines_us"] = lines
        run["lines"]["measured_kernel_sum_us"] = total
        if warnings:
            run["lines"]["measured_warnings"] = warnings
    run["wall_s"] = round(time.perf_counter() - started, 1)
    return run


def gpu_tool_options(parser, argv):
    """A truth tool's options: OUT, SAMPLE:BATCH..., --root, and what the tool added to
    `parser`; exits with one line where torch sees no CUDA GPU."""
    parser.add_argument("out", help="the JSON to write")
    parser.add_argument("runs", nargs="+", help="SAMPLE.py:BATCH[,BATCH...]")
    parser.add_argument("--root", default=os.getcwd(), help="sample paths are relative to this")
    options = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        sys.exit(f"{parser.prog}: no CUDA GPU visible to torch; run it on the GPU machine")
    return options


def each_run(specs, root):
    """(key, path, batch) for each SAMPLE:BATCH[,BATCH...] of `specs`, sample paths relative
    to `root`; the key is "SAMPLE:BATCH"."""
    for spec in specs:
        sample, batches = spec.rsplit(":", 1)
        path = os.path.join(root, sample)
        for batch in (int(b) for b in batches.split(",")):
            yield f"{os.path.relpath(path, root)}:{batch}", path, batch


def write_whole(document, out):
    """Written again after every run, whole and atomically: a run cut off by a time limit
    loses only itself."""
    with open(out + ".partial", "w", encoding="utf-8") as f:
        json.dump(document, f, indent=1)
    os.replace(out + ".partial", out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10, help="timed iterations per run")
    parser.add_argument("--no-bf16", dest="bf16", action="store_false", help="FP32 only")
    parser.add_argument("--wavecast", help="the wavecast binary, for per-line kernel times")
    options = gpu_tool_options(parser, argv)
    truth = dict(versions(), samples={})
    for key, path, batch in each_run(options.runs, options.root):
        print(f"record.py: {key}", file=sys.stderr)
        truth["samples"][key] = record_run(path, batch, options, options.root)
        if "transformers" in sys.modules:  # a sample built with it: which version ran
            truth["transformers"] = sys.modules["transformers"].__version__
        write_whole(truth, options.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
