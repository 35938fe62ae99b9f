"""What the per-shape kernel fits (fit_batch_norm.py, fit_layer_norm.py) share: truth files
named with their GPU, the error of a fitted model on each, and its mean |log error|."""

import argparse
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH_FLOOR_US = 4.0  # RooflineOptions::launchFloorUs: no kernel takes less
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "tensor_core_gemm"))
import model  # noqa: E402  (the GPU database as the GEMM model reads it)


def truth_files(description, argv, per_shape):
    """[(path, model.Gpu, per_shape(truth))] for `FILE:GPU_ID` arguments: the first is fitted
    on, the others only checked. GPU ids are wavecast's (data/gpus.json), as
    `compare.py --gpu` takes them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("truth", help="FILE:GPU_ID, the truth file fitted on")
    parser.add_argument("check", nargs="*", help="FILE:GPU_ID, truth files only checked")
    options = parser.parse_args(argv)
    database = model.load_gpus(os.path.join(ROOT, "data", "gpus.json"))
    out = []
    for argument in [options.truth] + options.check:
        path, _, gpu_id = argument.rpartition(":")
        if gpu_id not in database:
            parser.error(f"'{argument}': name the file's GPU by its id in data/gpus.json (FILE:H100-SXM)")
        with open(path, encoding="utf-8") as f:
            out.append((path, database[gpu_id], per_shape(json.load(f))))
    return out


def mean_log_error(predicted_us, rows):
    """Mean |log(predicted / real)| over {key: real us}; predicted_us(key) -> us."""
    return statistics.mean(abs(math.log(predicted_us(key) / real)) for key, real in rows.items())


def report(files, select, predicted_us):
    """Prints, per truth file, the error of predicted_us(gpu, key) on its rows select(table)."""
    for path, gpu, table in files:
        rows = select(table)
        if not rows:
            continue
        ratios = [predicted_us(gpu, key) / real for key, real in rows.items()]
        total = sum(predicted_us(gpu, key) for key in rows) / sum(rows.values())
        print(f"  {os.path.relpath(path, ROOT)}: {len(ratios)} shapes, median "
              f"{statistics.median(abs(r - 1) for r in ratios) * 100:.1f}%, mean "
              f"{statistics.mean(abs(r - 1) for r in ratios) * 100:.1f}%, "
              f"sum predicted / real {total:.2f}")


def fit_each(files, groups, fit, predicted_us, describe):
    """For each (label, select) of `groups`: fits parameters on the first file's rows
    select(table) with fit(gpu, rows), prints label and describe(parameters), then the
    error of predicted_us(gpu, key, parameters) on every file."""
    _, gpu, table = files[0]
    for label, select in groups:
        rows = select(table)
        if not rows:
            continue
        parameters = fit(gpu, rows)
        print(f"{label}: {describe(parameters)}")
        report(files, select, lambda gpu, key, p=parameters: predicted_us(gpu, key, p))
