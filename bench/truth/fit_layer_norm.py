#!/usr/bin/env python3
"""Fits layer norm's per-row and per-element SM cycles (predictor/src/vector_costs.cpp,
kLayerNormForward and kLayerNormBackward) to the per-shape kernel times of a truth file.

PyTorch's layer norm runs one 128-thread block per row (vectorized_layer_norm_kernel; in
backward a second kernel reduces the weight and bias gradients over the rows). On an H100
and an H200 alike a row costs the same time, whatever the bandwidth: the blocks wait on
their row's loads and reductions. The kernel is priced as the roofline prices it:
`row` SM cycles per row plus `element` per element, spread over the SMs at the boost
clock, or its bytes at the bandwidth, whichever is longer, and at least the launch floor
per kernel. It picks the (row, element) cycles with the least mean |log error| on the
first truth file (fp32 and bf16 autocast runs, which keep layer norm in fp32), and
reports the error there and on the others. Each file is named with wavecast's id of its
GPU (data/gpus.json), as `compare.py --gpu` takes it.

    bench/truth/fit_layer_norm.py bench/truth/data/h100/truth.json:H100-SXM \\
        bench/truth/data/h200/truth.json:H200
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import per_shape_fit  # noqa: E402



def per_shape(truth):
    """{(backward, rows, row length, element bytes): kernel us} for every layer norm."""
    out = {}
    for run in truth["samples"].values():
        for field in ("lines", "bf16_lines"):
            for row in (run.get(field) or {}).get("per_shape", []):
                if row["op"] not in ("aten::native_layer_norm", "aten::native_layer_norm_backward"):
                    continue
                backward = row["op"].endswith("backward")
                shape = row["input_shapes"][0]
                # Under autocast layer norm runs in fp32 (autocast's fp32 list).
                key = (backward, math.prod(shape[:-1]), shape[-1], 4)
                out[key] = row["self_device_us"] / row["count"]
    return out


def predicted_us(gpu, backward, rows, length, element_bytes, row_cycles, element_cycles):
    elements = rows * length
    # Forward reads x and writes y; backward reads dy and x twice (dx, then the weight
    # gradients) and writes dx.
    bytes_moved = elements * element_bytes * (5 if backward else 2)
    cycles = rows * row_cycles + elements * element_cycles
    compute = cycles / (gpu.sms * gpu.clock_hz) * 1e6
    memory = bytes_moved / gpu.bandwidth * 1e6
    return max(per_shape_fit.LAUNCH_FLOOR_US * (2 if backward else 1), compute, memory)


def fit(gpu, rows):
    def loss(row_cycles, element_cycles):
        return per_shape_fit.mean_log_error(
            lambda key: predicted_us(gpu, *key, row_cycles, element_cycles), rows)
    # A coarse grid, then a fine one around its best point.
    best = min((loss(r, e / 100), r, e / 100) for r in range(0, 2001, 20) for e in range(0, 301, 5))
    _, row0, element0 = best
    best = min((loss(r, e / 1000), r, e / 1000)
               for r in range(max(0, row0 - 20), row0 + 21)
               for e in range(max(0, round(element0 * 1000) - 50), round(element0 * 1000) + 51, 2))
    return best[1], best[2]


def main(argv=None):
    files = per_shape_fit.truth_files(__doc__.splitlines()[0], argv, per_shape)
    groups = [("backward" if backward else "forward",
               lambda table, backward=backward: {k: v for k, v in table.items() if k[0] == backward})
              for backward in (False, True)]
    per_shape_fit.fit_each(files, groups, fit,
                           lambda gpu, key, cycles: predicted_us(gpu, *key, *cycles),
                           lambda cycles: f"{cycles[0]} SM cycles per row, {cycles[1]} per element")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
