#!/usr/bin/env python3
"""The two ways into a multi-GPU prediction, on torchtitan's Llama 3 8B job:
samples/distributed/llama3_fsdp.py (FSDP2, MixedPrecisionPolicy(bf16, fp32), per-op
selective checkpointing) traced as rank 0 of its launch, against
bench/parallel/llama3_single_gpu.py (the same model and step on one GPU, bf16 autocast)
predicted with --fsdp --dp N --param-dtype bf16 --reduce-dtype fp32 --recompute-ops.
tests/cli's twins check agreement on small models; this is the check at full size.

    bench/parallel/two_ways.py [--wavecast build/bin/wavecast] [--layers 32]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FSDP_SCRIPT = os.path.join(ROOT, "samples", "distributed", "llama3_fsdp.py")
SINGLE_SCRIPT = os.path.join(ROOT, "bench", "parallel", "llama3_single_gpu.py")
# (GPUs, GPU, local batch): torchtitan's published launches (bench/published/torchtitan.py).
LAUNCHES = [(8, "H100-SXM", 2), (64, "A100-SXM4-80GB", 1)]


def run(command, environment):
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, **environment))
    if done.returncode != 0:
        sys.exit(f"two_ways.py: {' '.join(command)} failed:\n{done.stderr}")
    return done.stdout


def figures(result):
    """(iteration ms, communication ms, exposed communication ms, peak allocated GiB)."""
    if "parallel" in result:
        p = result["parallel"][0]
        memory = max(stage["memory"]["peak_allocated_bytes"] for stage in p["stages"])
        return p["iteration_ms"], p["communication_ms"], p["communication_exposed_ms"], memory / 2**30
    s = result["summaries"][0]
    return (s["iteration_ms"], s["comm_ms"], s["comm_ms"] - s["comm_hidden_ms"],
            s["memory"]["peak_allocated_bytes"] / 2**30)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--wavecast", default=os.path.join(ROOT, "build", "bin", "wavecast"))
    parser.add_argument("--layers", type=int, default=32)
    options = parser.parse_args()
    environment = {"LLAMA3_LAYERS": str(options.layers)}
    print("| launch | way in | iteration ms | communication ms (exposed) | peak allocated GiB |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as work:
        for gpus, gpu, batch in LAUNCHES:
            single = os.path.join(work, f"single_{batch}.json")
            if not os.path.exists(single):
                run([options.wavecast, "trace", SINGLE_SCRIPT, "--batch-size", str(batch),
                     "--timeout", "900", "--out", single], environment)
            rank = os.path.join(work, f"rank_{gpus}_{batch}.json")
            run([options.wavecast, "trace", FSDP_SCRIPT, "--batch-size", str(batch), "--world-size",
                 str(gpus), "--timeout", "900", "--out", rank], environment)
            what_if = json.loads(run([options.wavecast, "predict", single, "--gpu", gpu, "--fsdp",
                                      "--dp", str(gpus), "--param-dtype", "bf16", "--reduce-dtype",
                                      "fp32", "--recompute-ops", "--json"], environment))
            traced = json.loads(run([options.wavecast, "predict", rank, "--gpu", gpu, "--json"],
                                    environment))
            launch = f"{gpus}x {gpu}, {options.layers} layers, local batch {batch}"
            rows = [("FSDP2 script traced as rank 0", figures(traced)),
                    ("one-GPU script, what-if flags", figures(what_if))]
            base = rows[0][1][0]
            for way, (iteration, comm, exposed, memory) in rows:
                change = "" if way.startswith("FSDP2") else f" ({iteration / base - 1:+.1%})"
                print(f"| {launch} | {way} | {iteration:,.1f}{change} | {comm:,.1f} ({exposed:,.1f}) "
                      f"| {memory:.1f} |")


if __name__ == "__main__":
    main()
