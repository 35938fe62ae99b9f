#!/usr/bin/env python3
"""Records what torch.compile does to the samples' real iterations, on a GPU machine.

The tracer keeps a compiled model's eager ops (profiler/python/wavecast_tracer/compiled.py),
so wavecast prices torch.compile as eager. This records the truth a model of compilation
needs: for each SAMPLE:BATCH and precision (FP32 as written, bf16 autocast), the same
iteration eager and with the model passed through torch.compile as users write it
(`model = torch.compile(model)`, before the optimizer is made), each with

- the wall time (CUDA events; median, min and max of --iterations after warm-up) and the
  CPU's time to issue an iteration (`issue_ms`);
- the kernel sum of one profiled iteration and its kernels by name (total µs and count,
  largest first): Triton's generated kernels (`triton_`) against the library kernels the
  compiled graph still calls (cuBLAS, cuDNN, flash attention);
- the peak allocated and reserved bytes;
- for the compiled model, the seconds its first iterations took (compilation).

    python3 bench/truth/compiled.py OUT.json samples/gpt2.py:8 samples/resnet50.py:32 \\
        [--mode default,reduce-overhead] [--budget 300]

--mode lists torch.compile modes ("reduce-overhead" adds CUDA graphs); each is recorded
under `compiled_<mode>`. Runs are not started past --budget seconds; the file is written
after every run.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402

KERNELS_KEPT = 200


def kernels(step, inputs, autocast):
    """One profiled iteration's kernels: the sum, and per kernel name its total and count."""
    import torch

    run = record.in_precision(step, autocast)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        run(*inputs)
        torch.cuda.synchronize()
    by_name = {}
    for kernel in record.kernels_of(prof):
        entry = by_name.setdefault(kernel.name, {"us": 0.0, "count": 0})
        entry["us"] += kernel.duration
        entry["count"] += 1
    rows = sorted(({"kernel": name, "us": round(v["us"], 3), "count": v["count"]}
                   for name, v in by_name.items()), key=lambda row: -row["us"])
    total = sum(row["us"] for row in rows)
    triton = sum(row["us"] for row in rows if row["kernel"].startswith("triton"))
    return {"kernel_sum_us": round(total, 3), "triton_us": round(triton, 3),
            "kernel_launches": sum(row["count"] for row in rows), "kernels": rows[:KERNELS_KEPT]}


def one_variant(path, batch, autocast, mode, iterations):
    """Eager (mode None) or compiled with `mode`: timed, profiled and its peaks."""
    import torch

    record.release_memory()
    torch.cuda.reset_peak_memory_stats()
    torch._dynamo.reset()
    wrap = None if mode is None else (lambda model: torch.compile(model, mode=mode))
    model, inputs, step = record.prepare(path, batch, wrap)
    result = {}
    started = time.perf_counter()
    first = record.in_precision(step, autocast)
    first(*inputs)
    torch.cuda.synchronize()
    result["first_iteration_s"] = round(time.perf_counter() - started, 2)
    result.update(record.timed(step, inputs, iterations, autocast))
    result.update(kernels(step, inputs, autocast))
    result.update(record.peak_memory())
    del model, inputs, step
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10, help="timed iterations per run")
    parser.add_argument("--mode", default="default", help="torch.compile modes, comma-separated")
    parser.add_argument("--precision", default="fp32,bf16", help="fp32, bf16 or both")
    parser.add_argument("--budget", type=float, default=0.0, help="start no run after this many s")
    options = record.gpu_tool_options(parser, argv)
    import torch

    truth = dict(record.versions(), samples={})
    truth["triton"] = getattr(sys.modules.get("triton"), "__version__", "")
    started = time.perf_counter()
    for key, path, batch in record.each_run(options.runs, options.root):
        for precision in options.precision.split(","):
            if options.budget and time.perf_counter() - started > options.budget:
                print(f"compiled.py: budget spent; {key} {precision} not run", file=sys.stderr)
                return 0
            print(f"compiled.py: {key} {precision}", file=sys.stderr)
            autocast = precision == "bf16"
            run = {"batch_size": batch, "eager": None}
            try:
                run["eager"] = one_variant(path, batch, autocast, None, options.iterations)
                for mode in options.mode.split(","):
                    run[f"compiled_{mode}"] = one_variant(path, batch, autocast, mode,
                                                          options.iterations)
            except Exception as error:  # noqa: B902 - a sample compile refuses: recorded
                run["error"] = f"{type(error).__name__}: {error}"[:2000]
            truth["samples"].setdefault(key, {})[precision] = run
            truth["triton"] = getattr(sys.modules.get("triton"), "__version__", "")
            record.write_whole(truth, options.out)
            torch._dynamo.reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
