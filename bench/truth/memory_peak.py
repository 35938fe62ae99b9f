#!/usr/bin/env python3
"""Records, on a GPU, what is allocated at a training iteration's peak: the caching
allocator's own history (torch.cuda.memory._record_memory_history) over one iteration
after warm-up, replayed to the moment the most bytes were allocated, and every block live
then grouped by the Python lines that allocated it. It answers where a predicted peak
misses bytes (a tensor the tracer does not see, a workspace, an optimizer's temporaries).

For each SAMPLE:BATCH[,BATCH...] (FP32 as written) it writes the peak of the recorded
iterations (--iterations, after the warm-up) and each one's, the bytes allocated before
them, and the groups live at the peak, largest first.

    python3 bench/truth/memory_peak.py OUT.json samples/dcgan.py:32 samples/small_cnn.py:64
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402 - the truth's way of running a sample

WARMUP = 3
FRAMES = 4  # innermost Python frames kept per group, plus the sample's own line


def describe(frames, sample_name):
    """A block's allocation site: its innermost Python frames and the sample's line."""
    python = [f for f in frames if f.get("filename", "").endswith(".py")]
    inner = [f"{os.path.basename(f['filename'])}:{f['line']} {f['name']}" for f in python[:FRAMES]]
    user = next((f"{sample_name}:{f['line']} {f['name']}" for f in python
                 if f.get("filename", "").endswith(sample_name)), "")
    return " < ".join(inner) + (f" @ {user}" if user else "")


def peak_groups(trace, baseline, sample_name):
    """Replays the allocator's events: the peak and the blocks live at it, grouped."""
    live_bytes = baseline
    blocks = {}  # addr -> (size, site)
    peak, at_peak = baseline, {}
    freed = "free_completed" if any(e["action"] == "free_completed" for e in trace) else "free_requested"
    for event in trace:
        action = event["action"]
        if action == "alloc":
            live_bytes += event["size"]
            blocks[event["addr"]] = (event["size"], describe(event.get("frames", []), sample_name))
            if live_bytes > peak:
                peak, at_peak = live_bytes, dict(blocks)
        elif action == freed:
            block = blocks.pop(event["addr"], None)
            live_bytes -= block[0] if block else event["size"]
    groups = {}
    for size, site in at_peak.values():
        count, total = groups.get(site, (0, 0))
        groups[site] = (count + 1, total + size)
    rows = [{"site": site, "blocks": count, "bytes": total} for site, (count, total) in groups.items()]
    return peak, sorted(rows, key=lambda row: -row["bytes"])


def record_run(path, batch, iterations):
    import torch

    record.release_memory()
    torch.cuda.reset_peak_memory_stats()
    model, inputs, step = record.prepare(path, batch)
    for _ in range(WARMUP):
        step(*inputs)
    torch.cuda.synchronize()
    warmup_peak = torch.cuda.max_memory_allocated()  # the first iterations' (lazy state)
    torch.cuda.reset_peak_memory_stats()
    baseline = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    peaks = []  # each recorded iteration's own peak: does it stay where it was?
    overall = 0
    for _ in range(iterations):
        torch.cuda.reset_peak_memory_stats()
        step(*inputs)
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated())
        overall = max(overall, peaks[-1])
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    device = torch.cuda.current_device()
    trace = snapshot["device_traces"][device]
    peak, groups = peak_groups(trace, baseline, os.path.basename(path))
    run = {"batch_size": batch, "baseline_bytes": baseline, "replayed_peak_bytes": peak,
           "max_memory_allocated": overall, "iteration_peaks": peaks, "warmup_peak_bytes": warmup_peak,
           "events": len(trace),
           "live_at_peak": groups}
    del model, inputs, step
    torch.cuda.empty_cache()
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1,
                        help="iterations recorded after the warm-up (the peak is the highest)")
    options = record.gpu_tool_options(parser, argv)
    out = dict(record.versions(), samples={})
    for key, path, batch in record.each_run(options.runs, options.root):
        try:
            run = record_run(path, batch, options.iterations)
        except Exception as error:  # noqa: B902 - one run's failure is recorded, not fatal
            run = {"error": f"{type(error).__name__}: {error}"}
        out["samples"][key] = run
        record.write_whole(out, options.out)
        if "error" in run:
            print(f"memory_peak.py: {key}: {run['error']}", file=sys.stderr)
            continue
        mib = 1 << 20
        print(f"memory_peak.py: {key}: peak {run['max_memory_allocated'] / mib:.1f} MiB "
              f"(replayed {run['replayed_peak_bytes'] / mib:.1f}, warm-up "
              f"{run['warmup_peak_bytes'] / mib:.1f}), before the iteration "
              f"{run['baseline_bytes'] / mib:.1f} MiB; per iteration "
              + " ".join(f"{p / mib:.1f}" for p in run["iteration_peaks"]), file=sys.stderr)
        for row in run["live_at_peak"][:12]:
            print(f"  {row['bytes'] / mib:9.2f} MiB {row['blocks']:5d}  {row['site'][:200]}",
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
