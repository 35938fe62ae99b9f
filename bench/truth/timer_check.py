#!/usr/bin/env python3
"""Checks `wavecast calibrate`'s timers against each other on a GPU: a few cases timed with
CUDA events after spin kernels of several lengths, with CUPTI, and the kernel time per ATen
op that torch.profiler gives around the events runs (what a truth file's `per_shape` holds).
Where the events time falls as the spin grows, the op's CPU launch outlasted the spin and
the GPU waited inside the op; where it stays above the kernels whatever the spin, the GPU
waited between an op's own kernels: the events timer then counts launch gaps as the op's
time.

    python3 bench/truth/timer_check.py [--precision bf16] [CASE_PREFIX ...]
"""

import argparse
import statistics
import sys

from wavecast_tracer.calibrate import cases as case_defs
from wavecast_tracer.calibrate import suite as suite_module
from wavecast_tracer.calibrate import timing

SPINS = (400_000, 2_000_000, 8_000_000)  # SM cycles before each op
DEFAULT_CASES = ("conv2d n64 c64 8x8 k128", "conv2d n64 c32 16x16 k64", "conv2d n64 c64 56x56 k64 3x3",
                 "linear 8192x768 -> 768")


def times(timer, case, precision):
    suite = suite_module.Suite(timer, quick=False, repeats=7, cases=[case],
                               progress=lambda line: None)
    suite.run()
    return {entry["name"] + " " + entry["phase"][:3]: statistics.median(samples) * 1000
            for entry, samples in suite.samples.values()}


def kernel_times(case, precision):
    """Self kernel time per call of each ATen op over events runs of the case, in us."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        times(timing.EventsTimer(), case, precision)
    return {event.key: event.self_device_time_total / event.count for event in prof.key_averages()
            if event.self_device_time_total > 0 and event.key.startswith("aten::")}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", help="fp32, tf32, bf16 or fp16 (default: tf32 where the "
                        "case has it)")
    parser.add_argument("prefixes", nargs="*", help="cases whose name starts with one of these")
    options = parser.parse_args(argv)
    prefixes = options.prefixes or DEFAULT_CASES
    chosen = [c for c in case_defs.load_cases() if any(c["name"].startswith(p) for p in prefixes)]
    for case in chosen:
        precision = options.precision or ("tf32" if "tf32" in case["precisions"] else case["precisions"][0])
        if precision not in case["precisions"]:
            continue
        case = dict(case, precisions=[precision])
        columns = {}
        for spin in SPINS:
            timing.LAUNCH_COVER_CYCLES = spin
            columns[f"events {spin // 1000}k"] = times(timing.EventsTimer(), case, precision)
        columns["cupti"] = times(timing.CuptiTimer(), case, precision)
        print(f"{case['name']} ({precision}), us:")
        for op in next(iter(columns.values())):
            print("  " + op.ljust(44) + "  ".join(f"{name}={col.get(op, float('nan')):8.1f}"
                                                  for name, col in columns.items()))
        print("  kernels per call (torch.profiler): " +
              ", ".join(f"{op} {us:.1f}" for op, us in sorted(kernel_times(case, precision).items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
