#!/usr/bin/env python3
"""torchtitan's published Llama 3 8B FSDP throughputs against wavecast's prediction of the
same job (samples/distributed/llama3_fsdp.py traced as rank 0 of the launch).

Published figures are for reporting, never for fitting. Writes a markdown table:
    bench/published/torchtitan.py --wavecast build/bin/wavecast --markdown OUT.md
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "samples", "distributed", "llama3_fsdp.py")
PAGE = "https://github.com/pytorch/torchtitan/blob/main/docs/performance.md"

# Llama 3 8B (torchtitan's ModelArgs): 32 layers, 32 heads of 128, 8,192-token sequences.
LAYERS, HEADS, HEAD_DIM, SEQUENCE = 32, 32, 128, 8192
PARAMETERS = 8_030_261_248
EMBEDDING = 128256 * 4096

# (where it was published, GPUs, GPU wavecast predicts on, local batch, the RMSNorm
# torchtitan had (LLAMA3_NORM), tokens/s per GPU, memory GiB or None, what differs from
# the prediction's setup)
RUNS = [
    (f"[torchtitan performance.md]({PAGE}), Table 1", 8, "H100-SXM", 2, "fused",
     5762, 82.4,
     "their H100s have 96 GB of HBM2e at 2.4 TB/s and run at 500 W; H100-SXM here is the "
     "700 W, 3.35 TB/s card"),
    ("the same page, 2024 revision (64x A100 80GB)", 64, "A100-SXM4-80GB", 1, "python",
     2973, None, "8 HGX A100 nodes assumed (InfiniBand HDR); torchtitan's 2024 RMSNorm"),
]


def flops_per_token(with_embedding):
    # torchtitan's get_num_flop_per_token: 6 per parameter and 12·l·h·q·t for attention.
    # Its current MFU leaves out the embedding's parameters; the 2024 figures counted them.
    parameters = PARAMETERS if with_embedding else PARAMETERS - EMBEDDING
    return 6 * parameters + 12 * LAYERS * HEADS * HEAD_DIM * SEQUENCE


def bf16_peak_flops(gpu_id):
    """The dense bf16 peak of data/gpus.json, which MFU is a share of."""
    with open(os.path.join(ROOT, "data", "gpus.json"), encoding="utf-8") as f:
        gpus = json.load(f)["gpus"]
    return next(g for g in gpus if g["id"] == gpu_id)["peak_tflops"]["bf16"] * 1e12


def run(command, environment=None):
    done = subprocess.run(command, capture_output=True, text=True,
                          env=dict(os.environ, **(environment or {})))
    if done.returncode != 0:
        sys.exit(f"torchtitan.py: {' '.join(command)} failed:\n{done.stderr}")
    return done.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--wavecast", default=os.path.join(ROOT, "build", "bin", "wavecast"))
    parser.add_argument("--markdown", required=True)
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for source, gpus, gpu, batch, norm, published, memory, differs in RUNS:
            trace = os.path.join(work, f"rank_{gpus}_{batch}.json")
            run([options.wavecast, "trace", SAMPLE, "--batch-size", str(batch), "--world-size",
                 str(gpus), "--timeout", "900", "--out", trace], {"LLAMA3_NORM": norm})
            result = json.loads(run([options.wavecast, "predict", trace, "--gpu", gpu, "--json"]))
            summary = result["summaries"][0]
            seconds = summary["iteration_ms"] / 1e3
            tokens = batch * SEQUENCE / seconds
            peak = bf16_peak_flops(gpu)
            with_embedding = gpu.startswith("A100")  # as each publication counted
            mfu = tokens * flops_per_token(with_embedding) / peak
            allocated = summary["memory"]["peak_allocated_bytes"] / 2**30
            reserved = summary["memory"]["peak_reserved_bytes"] / 2**30
            rows.append(
                f"| {source} | {gpus}x {gpu}, local batch {batch} | {published:,} | "
                f"{tokens:,.0f} ({tokens / published - 1:+.0%}) | {mfu:.1%} | "
                f"{'–' if memory is None else f'{memory:.1f}'} | {allocated:.1f} / {reserved:.1f} | "
                f"{differs} |")
    with open(options.markdown, "w", encoding="utf-8") as out:
        out.write("| published | predicted for | tokens/s per GPU, published | predicted | "
                  "predicted MFU | memory GiB, published | predicted allocated / reserved GiB "
                  "| what differs |\n")
        out.write("|---|---|---:|---:|---:|---:|---:|---|\n")
        out.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
