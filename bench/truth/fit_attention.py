#!/usr/bin/env python3
"""Fits the fused attention kernels' cost on tensor cores (predictor/src/roofline.cpp,
kFusedAttention*) to a calibration file's SDPA entries (`wavecast calibrate`: flash,
memory-efficient and cuDNN, forward and backward, bf16 and fp16, 50 to 2,048 tokens, head
sizes 64 and 128) and reports the error on other calibration files.

Per backend and direction, two terms: the matmuls' FLOPs at a share of the dense tensor-core
peak, and SM cycles per attention score computed (the softmax's exponentials and rescaling,
which cost the same per score whatever the head size, so a head of 64 runs at about half
the FLOP rate of a head of 128). Scores and FLOPs count only the blocks a causal mask keeps.
Fitted on the runs of 256 tokens or more; shorter ones are bound by the kernels' per-wave
latency (kFlashAttentionBlocks), which the predictor takes where it is longer.

    bench/truth/fit_attention.py data/calibration/nvidia-h100-80gb-hbm3.json:H100-SXM \\
        data/calibration/nvidia-h200.json:H200
"""

import json
import math
import os
import statistics
import sys

import per_shape_fit

BACKENDS = {"flash": 128, "efficient": 64, "cudnn": 128}  # backend -> causal block
# Per-wave latency (roofline.cpp kFlashAttentionBlocks / kEfficientAttentionBlocks): tile,
# forward and backward SM cycles per wave of two blocks per SM.
LATENCY = {"flash": (128, 17800, 28300), "cudnn": (128, 17800, 28300), "efficient": (64, 28700, 51500)}
MIN_TOKENS = 256


def causal_block_share(l, s, block):
    """matrix_costs.cpp causalBlockShare: the share of key blocks a causal mask keeps."""
    query_blocks, key_blocks = math.ceil(l / block), math.ceil(s / block)
    computed = sum(min(key_blocks, math.ceil(min(s, (i + 1) * block) / block)) for i in range(query_blocks))
    return computed / (query_blocks * key_blocks)


def rows_of(calibration):
    """[(backend, backward, precision, matmul FLOPs, scores, batch x heads, L, S, ms)]."""
    out = []
    for entry in calibration["entries"]:
        name = entry["name"]
        backend = next((b for b in BACKENDS if f"_{b}_attention" in name), None)
        if backend is None or entry["precision"] not in ("bf16", "fp16"):
            continue
        backward = entry["phase"] == "backward"
        q, k, v = (entry["inputs"][i]["shape"] for i in ((1, 2, 3) if backward else (0, 1, 2)))
        batch_heads = math.prod(q[:-2])
        l, s, e, ev = q[-2], k[-2], q[-1], v[-1]
        share = causal_block_share(l, s, BACKENDS[backend]) if entry["args"].get("is_causal") else 1.0
        matmul = 2 * batch_heads * l * s * (e + ev) * share * (2.5 if backward else 1)
        scores = batch_heads * l * s * share
        out.append((backend, backward, entry["precision"], matmul, scores, batch_heads, l, s, entry["median_ms"]))
    return out


def latency_ms(gpu, backend, backward, batch_heads, l, s):
    tile, forward_cycles, backward_cycles = LATENCY[backend]
    blocks = batch_heads * math.ceil((s if backward else l) / tile)
    waves = math.ceil(blocks / (gpu.sms * 2))
    return waves * (backward_cycles if backward else forward_cycles) / gpu.clock_hz * 1e3


def predicted_ms(gpu, row, share, cycles):
    backend, backward, precision, matmul, scores, batch_heads, l, s, _ = row
    throughput = matmul / (gpu.peak[precision] * share) + scores * cycles / (gpu.sms * gpu.clock_hz)
    return max(throughput * 1e3, latency_ms(gpu, backend, backward, batch_heads, l, s))


def gemm_share():
    """The share of the dense peak cuBLAS's tensor-core GEMMs reach (data/tensor_core_gemm.json,
    fitted on OpenXLA's table): no fused kernel's matmuls run faster."""
    with open(os.path.join(per_shape_fit.ROOT, "data", "tensor_core_gemm.json"), encoding="utf-8") as f:
        return round(json.load(f)["efficiency"], 2)


def fit(gpu, rows):
    """(share of the dense peak, SM cycles per score) minimising the relative squared error:
    t / t = matmul / (peak t) x + scores / (sms clock t) y, least squares in (x = 1 / share, y).
    Where the data put the share above cuBLAS's (a backend whose time the scores alone
    explain: cuDNN's), the share is cuBLAS's and the cycles alone are fitted."""
    terms = []
    for _, _, precision, matmul, scores, _, _, _, ms in rows:
        seconds = ms * 1e-3
        terms.append((matmul / (gpu.peak[precision] * seconds), scores / (gpu.sms * gpu.clock_hz * seconds)))
    a11, a12, a22 = (sum(u * u for u, _ in terms), sum(u * w for u, w in terms), sum(w * w for _, w in terms))
    b1, b2 = sum(u for u, _ in terms), sum(w for _, w in terms)
    determinant = a11 * a22 - a12 * a12
    x = (b1 * a22 - b2 * a12) / determinant
    y = (a11 * b2 - a12 * b1) / determinant
    cap = gemm_share()
    if x > 0 and 1 / x <= cap:
        return round(1 / x, 2), round(y, 2)
    y = sum(w * (1 - u / cap) for u, w in terms) / a22
    return cap, round(y, 2)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    files = per_shape_fit.truth_files(__doc__.splitlines()[0], argv, rows_of)
    _, gpu, table = files[0]
    for backend in BACKENDS:
        for backward in (False, True):
            selected = [r for r in table if r[0] == backend and r[1] == backward and r[6] >= MIN_TOKENS]
            if len(selected) < 2:
                continue
            share, cycles = fit(gpu, selected)
            print(f"{backend} {'backward' if backward else 'forward'}: {share} of the dense peak, "
                  f"{cycles} SM cycles per score")
            for path, other_gpu, other in files:
                rows = [r for r in other if r[0] == backend and r[1] == backward]
                ratios = [predicted_ms(other_gpu, r, share, cycles) / r[8] for r in rows]
                print(f"  {os.path.relpath(path, per_shape_fit.ROOT)}: {len(rows)} ops, median "
                      f"{statistics.median(abs(x - 1) for x in ratios) * 100:.1f}%, worst "
                      f"{max(abs(x - 1) for x in ratios) * 100:.0f}%, sum predicted / real "
                      f"{sum(predicted_ms(other_gpu, r, share, cycles) for r in rows) / sum(r[8] for r in rows):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
