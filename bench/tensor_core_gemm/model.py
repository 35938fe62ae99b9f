"""The tensor-core GEMM time model, as predictor/src/tensor_core_gemm.cpp computes it.

Kept formula for formula with the C++ (report.py checks that both give the same
times on every row of the table); docs/predictor.md explains it.
"""

import json
import math

# RooflineOptions::memoryEfficiency: the share of the spec bandwidth a kernel streams at.
MEMORY_EFFICIENCY = 0.85
# Bytes of the fp32 partial results a split-K slice writes for the reduction to read.
PARTIAL_BYTES = 4

FORMAT = "wavecast-tensor-core-gemm"


class Gpu:
    """What the models read of a GPU: SM count, dense peaks (FLOP/s: the tensor cores', and
    fp32 on CUDA cores), bandwidth (B/s, at the share a kernel streams at), boost clock."""

    def __init__(self, entry):
        self.id = entry["id"]
        self.sms = entry["sms"]
        peaks = entry["peak_tflops"]
        self.peak = {"bf16": peaks["bf16"] * 1e12, "fp16": peaks["fp16"] * 1e12,
                     "tf32": peaks["tf32"] * 1e12, "fp32": peaks["fp32"] * 1e12}
        self.bandwidth = entry["memory_bandwidth_gbs"] * 1e9 * MEMORY_EFFICIENCY
        self.clock_hz = entry["boost_clock_mhz"] * 1e6


def load_gpus(*paths):
    """GPU entries by id from data/gpus.json and GPU files in its format (later files win)."""
    gpus = {}
    for path in paths:
        with open(path) as f:
            for entry in json.load(f)["gpus"]:
                gpus[entry["id"]] = {**gpus.get(entry["id"], {}), **entry}
    return {gpu_id: Gpu(entry) for gpu_id, entry in gpus.items()}


class Parameters:
    def __init__(self, efficiency, tile_prologue_k, kernel_fixed_us, split_k_min_slice_k, tiles):
        self.efficiency = efficiency
        self.tile_prologue_k = tile_prologue_k
        self.kernel_fixed_us = kernel_fixed_us
        self.split_k_min_slice_k = split_k_min_slice_k
        self.tiles = tiles  # [(rows, cols, efficiency)]

    def to_json(self):
        return {"efficiency": round(self.efficiency, 4),
                "tile_prologue_k": round(self.tile_prologue_k, 1),
                "kernel_fixed_us": round(self.kernel_fixed_us, 3),
                "split_k_min_slice_k": round(self.split_k_min_slice_k),
                "tiles": [{"rows": r, "cols": c, "efficiency": e} for r, c, e in self.tiles]}

    @staticmethod
    def from_json(doc):
        return Parameters(doc["efficiency"], doc["tile_prologue_k"], doc["kernel_fixed_us"],
                          doc["split_k_min_slice_k"],
                          [(t["rows"], t["cols"], t["efficiency"]) for t in doc["tiles"]])


def gemm_seconds(p, gpu, dtype, b, m, n, k, element_bytes):
    """Kernel time of a batched [b, m, k] x [b, k, n] GEMM on tensor cores."""
    peak_per_sm = gpu.peak[dtype] / gpu.sms
    compute = math.inf
    for rows, cols, tile_efficiency in p.tiles:
        output_tiles = b * math.ceil(m / rows) * math.ceil(n / cols)
        slices = 1
        if output_tiles < gpu.sms:
            slices = max(1, min(gpu.sms // output_tiles, int(k // p.split_k_min_slice_k)))
        waves = math.ceil(output_tiles * slices / gpu.sms)
        if output_tiles > gpu.sms and k >= 2 * p.split_k_min_slice_k:  # stream-K
            waves = output_tiles / gpu.sms
        tile = (k / slices + p.tile_prologue_k) * 2 * rows * cols / (
            peak_per_sm * p.efficiency * tile_efficiency)
        reduction = b * m * n * PARTIAL_BYTES * slices / gpu.bandwidth if slices > 1 else 0
        compute = min(compute, waves * tile + reduction)
    memory = b * (m * k + k * n + m * n) * element_bytes / gpu.bandwidth
    return p.kernel_fixed_us * 1e-6 + max(compute, memory)
