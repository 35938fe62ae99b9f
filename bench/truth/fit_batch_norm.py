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

import argparse
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "tensor_core_gemm"))
import model  # noqa: E402  (the GPU database as the GEMM model reads it)

# RooflineOptions' defaults (predictor/include/wavecast/predictor/roofline.h); the memory
# efficiency is in model.Gpu's bandwidth.
VECTOR_EFFICIENCY = 0.85
LAUNCH_FLOOR_US = 4.0
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
    return max(LAUNCH_FLOOR_US * (2 if backward else 1), max(compute, memory) + elementwise)


def errors(gpu, rows, blocks_per_sm, ops):
    ratios = [predicted_us(gpu, *key, blocks_per_sm, ops) / real for key, real in rows.items()]
    total = sum(predicted_us(gpu, *key, blocks_per_sm, ops) for key in rows) / sum(rows.values())
    return {"median_ape": statistics.median(abs(r - 1) for r in ratios) * 100,
            "mean_ape": statistics.mean(abs(r - 1) for r in ratios) * 100,
            "sum_ratio": total, "shapes": len(ratios)}


def fit(gpu, rows):
    def loss(blocks, ops):
        return statistics.mean(abs(math.log(predicted_us(gpu, *key, blocks, ops) / real))
                               for key, real in rows.items())
    return min(((loss(b, o), b, o) for b in BLOCKS_PER_SM for o in range(10, 2000, 10)))[1:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("truth", help="FILE:GPU_ID, the truth file fitted on")
    parser.add_argument("check", nargs="*", help="FILE:GPU_ID, truth files only checked")
    options = parser.parse_args(argv)
    database = model.load_gpus(os.path.join(ROOT, "data", "gpus.json"))
    files, gpus, tables = [], [], []
    for argument in [options.truth] + options.check:
        path, _, gpu_id = argument.rpartition(":")
        if gpu_id not in database:
            parser.error(f"'{argument}': name the file's GPU by its id in data/gpus.json (FILE:H100-SXM)")
        with open(path, encoding="utf-8") as f:
            tables.append(per_shape(json.load(f)))
        files.append(path)
        gpus.append(database[gpu_id])
    for kernel, precision in (("cuDNN", "fp32"), ("PyTorch native", "bf16")):
        for backward in (False, True):
            select = [{k: v for k, v in table.items() if k[0] == precision and k[1] == backward}
                      for table in tables]
            if not select[0]:
                continue
            blocks, ops = fit(gpus[0], select[0])
            print(f"{kernel} ({precision}) {'backward' if backward else 'forward'}: "
                  f"blocks per SM {blocks}, {ops} ops per element")
            for path, gpu, rows in zip(files, gpus, select):
                if rows:
                    e = errors(gpu, rows, blocks, ops)
                    print(f"  {os.path.relpath(path, ROOT)}: {e['shapes']} shapes, median "
                          f"{e['median_ape']:.1f}%, mean {e['mean_ape']:.1f}%, "
                          f"sum predicted / real {e['sum_ratio']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
