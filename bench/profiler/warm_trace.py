"""Warm traces of a sample in one worker-like process, with the kept model's calls replayed
(replay.py) and without: what a save that edits the iteration costs in the tracer.

    build/python-env/bin/python bench/profiler/warm_trace.py RUNS samples/resnet50.py samples/gpt2.py

Prints, per sample, the median and minimum seconds of RUNS traces each way, interleaved
so that the machine's load falls on both alike.
"""

import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profiler", "python"))

from wavecast_tracer import replay, reuse, tracer  # noqa: E402


def _timed(path, cache):
    started = time.perf_counter()
    tracer.run_trace(path, cache=cache)
    return time.perf_counter() - started


def main(runs, paths):
    recording_key = replay.ModelCalls._key
    for path in paths:
        caches = {"replayed": reuse.TraceCache(), "traced": reuse.TraceCache()}
        times = {name: [] for name in caches}
        for run in range(runs + 2):  # the first two build the model, then record its calls
            for name, cache in caches.items():
                replay.ModelCalls._key = recording_key if name == "replayed" else (lambda *a: None)
                gc.collect()
                gc.freeze()  # as the worker does after a trace that built a model
                seconds = _timed(path, cache)
                if run >= 2:
                    times[name].append(seconds)
        replay.ModelCalls._key = recording_key
        summary = ", ".join(f"{name} {statistics.median(t):.3f} s (min {min(t):.3f})" for name, t in times.items())
        print(f"{path}: {summary}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(int(sys.argv[1]), sys.argv[2:])
