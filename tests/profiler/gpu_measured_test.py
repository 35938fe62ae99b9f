"""Measured mode on a real GPU (ctest label `gpu`): the CUPTI session and the op timer.

Without a GPU it prints why and exits 77, which ctest reports as skipped. With one it
records samples/resnet50.py at batch 32 with `wavecast trace --mode cuda` and checks:
every convolution, forward and backward (autograd's thread), has kernels with their
launch shapes; the kernels sum to within 5% of torch.profiler's kernel sum of the same
iteration; and the measured trace takes less than 5x a shape trace.

Run alone: WAVECAST_BINARY=build/bin/wavecast build/python-env/bin/python THIS_FILE
"""

import json
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "samples", "resnet50.py")
BATCH = 32


def skip(reason):
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP)


def profiler_kernel_ms(path, batch):
    """torch.profiler's GPU time of one iteration, run as the truth harness runs it."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("sample", path)
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    model = sample.wavecast_model().cuda()
    inputs = [x.cuda() for x in sample.wavecast_input(batch_size=batch)]
    step = sample.wavecast_iteration(model)
    for _ in range(3):
        step(*inputs)
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        step(*inputs)
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages()) / 1000.0


def trace(mode, out):
    started = time.perf_counter()
    subprocess.run([os.environ["WAVECAST_BINARY"], "trace", SAMPLE, "--mode", mode,
                    "--batch-size", str(BATCH), "--out", out], check=True, timeout=600)
    return time.perf_counter() - started


def main():
    try:
        import torch
    except ImportError:
        skip("torch is not importable in this Python environment")
    if not torch.cuda.is_available():
        skip("no CUDA GPU visible to torch (torch.cuda.is_available() is false): measured mode "
             "needs an NVIDIA GPU; this test runs on a GPU machine")
    failures = []
    with tempfile.TemporaryDirectory() as directory:
        measured_path = os.path.join(directory, "measured.json")
        measured_seconds = trace("cuda", measured_path)
        shape_seconds = trace("shape", os.path.join(directory, "shape.json"))
        with open(measured_path, encoding="utf-8") as f:
            doc = json.load(f)
    ops = doc["ops"]
    print(f"device {doc.get('device')}, {len(ops)} ops, warnings: {doc.get('warnings')}")
    convs = [op for op in ops if "convolution" in op["name"]]
    without = [f"{op['name']} ({op['phase']})" for op in convs if not op.get("kernels")]
    if not convs or without:
        failures.append(f"convolutions without kernels: {without[:5]} of {len(convs)}")
    if not any(op["phase"] == "backward" and op.get("kernels") for op in ops):
        failures.append("no backward op has kernels: autograd's thread is not covered")
    for op in ops:
        for kernel in op.get("kernels", []):
            if kernel.get("kind", "kernel") == "kernel" and (min(kernel["grid"]) < 1 or min(kernel["block"]) < 1):
                failures.append(f"{op['name']}: kernel {kernel['name']} without a launch shape")
                break
    measured_ms = sum(k["duration_ms"] for op in ops for k in op.get("kernels", []))
    reference_ms = profiler_kernel_ms(SAMPLE, BATCH)
    print(f"kernel sum: measured {measured_ms:.2f} ms, torch.profiler {reference_ms:.2f} ms; "
          f"trace time: measured {measured_seconds:.1f} s, shape {shape_seconds:.1f} s")
    if abs(measured_ms - reference_ms) > 0.05 * reference_ms:
        failures.append(f"kernel sum {measured_ms:.2f} ms is not within 5% of {reference_ms:.2f} ms")
    if measured_seconds > 5 * shape_seconds:
        failures.append(f"measured trace {measured_seconds:.1f} s is over 5x the shape trace's")
    for failure in failures:
        print("FAILED:", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
