#!/usr/bin/env python3
"""Fits the tensor-core GEMM model (data/tensor_core_gemm.json) to OpenXLA's measured
GEMM table.

    bench/tensor_core_gemm/fit.py                 # writes data/tensor_core_gemm.json
    bench/tensor_core_gemm/fit.py --out FILE --train-arch sm_90   # one GPU's rows only

Four parameters, shared by every GPU and tensor-core dtype (bf16, fp16, TF32): the
share of the dense tensor peak a GEMM's main loop reaches, the per-tile prologue and
epilogue (in K steps), the kernel's fixed time, and the shortest K a split-K slice
gets. Fitted by Nelder-Mead on the squared log of predicted / measured time over the
training rows: every row of the table (bf16 and TF32 on H100 and B200) except a fixed
quarter of the shapes (table.Row.held_out), which report.py scores. Pure Python.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import model  # noqa: E402
import table  # noqa: E402

# Output tiles the kernels may use and each one's share of an SM's peak: the
# roofline's table (predictor/src/roofline.cpp), which cuBLAS-like heuristics pick from.
TILES = [(128, 128, 1.0), (128, 64, 0.9), (64, 64, 0.75), (32, 32, 0.5)]
START = [0.75, 128.0, 5.0, 1024.0]
# Physical ranges: efficiency in (0, 1], non-negative overheads, slices of at least a K step.
LOWER = [0.05, 0.0, 0.0, 64.0]
UPPER = [1.0, 4096.0, 50.0, 65536.0]


def parameters(x):
    return model.Parameters(x[0], x[1], x[2], x[3], TILES)


def loss(x, rows, gpus):
    if any(v < lo or v > hi for v, lo, hi in zip(x, LOWER, UPPER)):
        return math.inf
    p = parameters(x)
    total = 0.0
    for r in rows:
        predicted = model.gemm_seconds(p, gpus[r.gpu], r.dtype, r.b, r.m, r.n, r.k, r.element_bytes)
        total += math.log(predicted / r.seconds) ** 2
    return total / len(rows)


def nelder_mead(f, start, step=0.25, iterations=1500, tolerance=1e-9):
    points = [list(start)]
    for i in range(len(start)):
        point = list(start)
        point[i] += step * (abs(point[i]) or 1.0)
        points.append(point)
    values = [f(p) for p in points]
    for _ in range(iterations):
        order = sorted(range(len(points)), key=values.__getitem__)
        points = [points[i] for i in order]
        values = [values[i] for i in order]
        if values[-1] - values[0] < tolerance:
            break
        centre = [sum(c) / (len(points) - 1) for c in zip(*points[:-1])]
        worst = points[-1]
        reflected = [c + (c - w) for c, w in zip(centre, worst)]
        value = f(reflected)
        if value < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centre, worst)]
            expanded_value = f(expanded)
            points[-1], values[-1] = (expanded, expanded_value) if expanded_value < value else (reflected, value)
        elif value < values[-2]:
            points[-1], values[-1] = reflected, value
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centre, worst)]
            contracted_value = f(contracted)
            if contracted_value < values[-1]:
                points[-1], values[-1] = contracted, contracted_value
            else:
                for i in range(1, len(points)):
                    points[i] = [b + 0.5 * (p - b) for b, p in zip(points[0], points[i])]
                    values[i] = f(points[i])
    best = min(range(len(points)), key=values.__getitem__)
    return points[best], values[best]


def fit(rows, gpus):
    x, value = START, math.inf
    for step in (0.5, 0.2, 0.05):  # restarts from the best point, smaller simplex each time
        x, value = nelder_mead(lambda v: loss(v, rows, gpus), x, step=step)
    return parameters(x), value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", default=table.DEFAULT_CSV, help="OpenXLA's matmul.csv")
    parser.add_argument("--out", default=os.path.join(table.ROOT, "data", "tensor_core_gemm.json"))
    parser.add_argument("--train-arch", action="append", choices=sorted(table.ARCH_GPUS),
                        help="fit on this GPU's training rows only (repeatable; default: all)")
    options = parser.parse_args(argv)

    archs = options.train_arch or sorted(table.ARCH_GPUS)
    gpus = model.load_gpus(table.GPUS_JSON, table.EXTRA_GPUS_JSON)
    rows = [r for r in table.read_rows(options.csv) if r.arch in archs and not r.held_out]
    p, value = fit(rows, gpus)
    doc = {
        "format": model.FORMAT,
        "version": 1,
        "notice": ("Parameters fitted by bench/tensor_core_gemm/fit.py to OpenXLA's measured GEMM "
                   "table xla/service/gpu/model/default_matmul_perf_table.txtpb (openxla/xla commit "
                   "183fa00cb5d82384463a1a7aed1ab06bc9026974), Copyright The OpenXLA Authors, "
                   "Apache License 2.0. The table itself is not part of this repository."),
        "model": "docs/predictor.md, 'Tensor-core GEMMs'",
        "fitted_on": {
            "gpus": {arch: table.ARCH_GPUS[arch] for arch in archs},
            "dtypes": sorted({d for d, _ in table.DTYPES.values()}),
            "rows": len(rows),
            "held_out": "shapes whose grid indices of b, m, n, k sum to a multiple of 4 "
                        "(bench/tensor_core_gemm/table.py); scored by report.py",
            "rms_log_error": round(math.sqrt(value), 4),
        },
        **p.to_json(),
    }
    # The unaligned kernel's rate is not in the table (its shapes are all aligned): keep it.
    if os.path.exists(options.out):
        with open(options.out) as f:
            previous = json.load(f)
        if "unaligned_kernel" in previous:
            doc["unaligned_kernel"] = previous["unaligned_kernel"]
    with open(options.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"{options.out}: efficiency {p.efficiency:.3f}, tile prologue {p.tile_prologue_k:.0f} K, "
          f"fixed {p.kernel_fixed_us:.2f} us, split-K slices >= {p.split_k_min_slice_k:.0f} K "
          f"({len(rows)} rows, rms log error {math.sqrt(value):.3f})")


if __name__ == "__main__":
    main()
