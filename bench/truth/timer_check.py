#!/usr/bin/env python3
"""Checks `wavecast calibrate`'s timers against each other on a GPU: a few cases timed with
CUDA events after spin kernels of several lengths, and with CUPTI (kernel time alone).
Where the events time falls as the spin grows, the op's CPU launch outlasted the spin and
the GPU waited inside the op: the events timer then counts launch gaps as the op's time.

    python3 bench/truth/timer_check.py [CASE_PREFIX ...]
"""

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


def main(argv):
    prefixes = argv or DEFAULT_CASES
    chosen = [c for c in case_defs.load_cases() if any(c["name"].startswith(p) for p in prefixes)]
    for case in chosen:
        precision = "tf32" if "tf32" in case["precisions"] else case["precisions"][0]
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
