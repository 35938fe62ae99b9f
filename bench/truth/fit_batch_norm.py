#!/usr/bin/env python3
"""Fits the per-channel batch-norm kernels' cost (predictor/src/vector_costs.cpp,
kCudnnBatchNorm and kNativeBatchNorm) to the per-shape kernel times of a truth file.

Training batch norm on NCHW is a per-channel reduction (one thread block per channel) and
an elementwise pass over the whole GPU. The reduction is priced as the roofline prices
it: `ops` FP32 operations per element at `blocks` blocks per SM (wave-quantised), or its
bytes at the bandwidth of the SMs it keeps busy, whichever is longer; the elementwise
pass at full bandwidth. For each kernel (cuDNN: float32 and float16; PyTorch's own:
bfloat16) and direction it picks the (blocks, ops) with the least mean |log error| on the
first truth file, and reports the error there and on the others. Each file is named with
wavecast's id of its GPU (data/gpus.json), as `compare.py --gpu` takes it.

    bench/truth/fit_batch_norm.py bench/truth/data/h100/truth.json:H100-SXM \
        bench/truth/data/h200/truth.json:H200
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import per_shape_fit  # noqa: E402

# RooflineOptions' defaults (predictor/include/wavecast/predictor/roofline.h); the memory
# efficiency is in model.Gpu's bandwidth.
VECTOR_EFFICIENCY = 0.85
BLOCKS_PER_SM = (1, 2, 3, 4, 6, 8, 16)


def per_shape(truth):
    """{(precision, backward, x shape): kernel us} for the NCHW batch norms of every run."""
    out = {}
    for run in truth["samples"].values():
        for field, precision in (("lines", "fp32"), ("bf16_lines", "bf16")):
            for row in (run.get(field) or {}).get("per_shape", []):
                if "batch_norm" not in row["op"]:
                    continue
                backward = "backward" in row["op"]
                shape = tuple(row["input_shapes"][1 if backward else 0])
                if len(shape) == 4:
                    out[(precision, backward, shape)] = row["self_device_us"] / row["count"]
    return out


def predicted_us(gpu, precision, backward, shape, blocks_per_sm, ops):
    n, channels = shape[0] * shape[2] * shape[3], shape[1]
    x_bytes = n * channels * (4 if precision == "fp32" else 2)
    bandwidth = gpu.bandwidth * 1e-6  # bytes per us
    wave = gpu.sms * blocks_per_sm
    busy = channels / (math.ceil(channels / wave) * wave)
    compute = channels * n * ops / (gpu.peak["fp32"] * 1e-6 * VECTOR_EFFICIENCY * busy)
    reduction_bytes = x_bytes * (2 if backward else 1)
    memory = reduction_bytes / (bandwidth * min(1.0, channels / gpu.sms))
    elementwise = x_bytes * (3 if backward else 2) / bandwidth
    floor = per_shape_fit.LAUNCH_FLOOR_US * (2 if backward else 1)
    return max(floor, max(compute, memory) + elementwise)


def fit(gpu, rows):
    def loss(blocks, ops):
        return per_shape_fit.mean_log_error(lambda key: predicted_us(gpu, *key, blocks, ops), rows)
    return min(((loss(b, o), b, o) for b in BLOCKS_PER_SM for o in range(10, 2000, 10)))[1:]


def main(argv=None):
    files = per_shape_fit.truth_files(__doc__.splitlines()[0], argv, per_shape)
    groups = [(f"{kernel} ({precision}) {'backward' if backward else 'forward'}",
               lambda table, precision=precision, backward=backward:
               {k: v for k, v in table.items() if k[0] == precision and k[1] == backward})
              for kernel, precision in (("cuDNN", "fp32"), ("PyTorch native", "bf16"))
              for backward in (False, True)]
    per_shape_fit.fit_each(files, groups, fit,
                           lambda gpu, key, fitted: predicted_us(gpu, *key, *fitted),
                           lambda fitted: f"blocks per SM {fitted[0]}, {fitted[1]} ops per element")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
