#!/usr/bin/env python3
"""Scores wavecast's tensor-core GEMM times against OpenXLA's measured GEMM table.

    bench/tensor_core_gemm/report.py [--wavecast build/bin/wavecast] [--markdown OUT.md]

Every row of the table (bf16 and TF32 on H100 and B200) becomes one `aten::bmm` of a
saved trace, predicted by `wavecast predict` itself, so the figures are those of the
shipped code:

- held-out rows (the quarter of the shapes fit.py never fits on) with the shipped
  data/tensor_core_gemm.json, against the analytic roofline without it (the baseline:
  a data folder without the file);
- leave one GPU out: parameters fitted on one GPU's training rows (fit.py
  --train-arch), scored on every row of the other GPU.

It also checks that model.py, which fit.py fits, computes the C++ model's times.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fit  # noqa: E402
import model  # noqa: E402
import table  # noqa: E402

TORCH_DTYPES = {"bf16": "bfloat16", "tf32": "float32"}
GPU_ORDER = ["H100-SXM", "B200"]
DTYPE_ORDER = ["bf16", "tf32"]


def trace_of(rows):
    def tensor(dtype, shape):
        return {"dtype": TORCH_DTYPES[dtype], "shape": shape, "contiguous": True}

    ops = [{"id": i, "name": "aten::bmm", "phase": "forward",
            "inputs": [tensor(r.dtype, [r.b, r.m, r.k]), tensor(r.dtype, [r.b, r.k, r.n])],
            "outputs": [tensor(r.dtype, [r.b, r.m, r.n])]}
           for i, r in enumerate(rows)]
    return {"format": "wavecast-trace", "version": 1, "mode": "shape", "batch_size": 1,
            "ops": ops, "precision": {"matmul_tf32": True, "cudnn_tf32": True}}


def predict_seconds(wavecast, trace_path, rows, gemm_model):
    """Per row, wavecast's time (s) on the row's GPU, with `gemm_model` as the data
    folder's tensor_core_gemm.json (None: without one)."""
    with tempfile.TemporaryDirectory() as data:
        for name in ("gpus.json", "weights"):
            os.symlink(os.path.join(table.ROOT, "data", name), os.path.join(data, name))
        if gemm_model:
            os.symlink(os.path.abspath(gemm_model), os.path.join(data, "tensor_core_gemm.json"))
        command = [wavecast, "predict", trace_path, "--gpu", ",".join(GPU_ORDER), "--gpu-file",
                   table.EXTRA_GPUS_JSON, "--roofline", "--json"]
        done = subprocess.run(command, capture_output=True, text=True,
                              env={**os.environ, "WAVECAST_DATA_DIR": data})
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.strip()}")
    prediction = json.loads(done.stdout)
    column = {gpu: prediction["gpus"].index(gpu) for gpu in GPU_ORDER}
    times = {op["id"]: op["per_gpu"] for op in prediction["ops"]}
    return [times[i][column[r.gpu]]["time_ms"] * 1e-3 for i, r in enumerate(rows)]


def scores(rows, predicted, keep):
    """(rows, MAPE %, geometric-mean predicted / measured) per (GPU, dtype) over rows kept."""
    out = {}
    for gpu in GPU_ORDER:
        for dtype in DTYPE_ORDER:
            pairs = [(p, r.seconds) for r, p in zip(rows, predicted)
                     if r.gpu == gpu and r.dtype == dtype and keep(r)]
            if pairs:
                mape = 100 * sum(abs(p / m - 1) for p, m in pairs) / len(pairs)
                bias = math.exp(sum(math.log(p / m) for p, m in pairs) / len(pairs))
                out[(gpu, dtype)] = (len(pairs), mape, bias)
    return out


def overall(rows, predicted, keep):
    errors = [abs(p / r.seconds - 1) for r, p in zip(rows, predicted) if keep(r)]
    return 100 * sum(errors) / len(errors)


def dtype_note(rows, gpus):
    """Why one efficiency for every GPU and dtype leaves the H100's error: per GPU, the
    largest TF32 / bf16 time ratio of one shape and the best share of the peak reached."""
    seconds = {(r.gpu, r.dtype, r.b, r.m, r.n, r.k): r.seconds for r in rows}
    parts = []
    for gpu in GPU_ORDER:
        ratio = max(seconds[(gpu, "tf32", *shape[2:])] / t for shape, t in seconds.items()
                    if shape[0] == gpu and shape[1] == "bf16")
        best = {dtype: max(2 * r.b * r.m * r.n * r.k / r.seconds / gpus[gpu].peak[dtype]
                           for r in rows if r.gpu == gpu and r.dtype == dtype)
                for dtype in DTYPE_ORDER}
        parts.append(f"{gpu}: TF32 up to {ratio:.1f} times the time of the same shape in bf16, "
                     f"at best {best['bf16']:.2f} of the bf16 and {best['tf32']:.2f} of the TF32 peak")
    return [
        "Per GPU in the table (the TF32 peak is half the bf16 one): " + "; ".join(parts) + ". "
        "One efficiency for every GPU and dtype cannot follow both GPUs, which is most of the "
        "H100's error and of its bias of opposite sign per dtype. A TF32 GEMM more than twice "
        "as slow as its bf16 twin is the kernel XLA picked, not the tensor cores (the table "
        "does not say which kernels ran; PyTorch calls cuBLAS)."]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", default=table.DEFAULT_CSV)
    parser.add_argument("--wavecast", default=os.path.join(table.ROOT, "build", "bin", "wavecast"))
    parser.add_argument("--model", default=os.path.join(table.ROOT, "data", "tensor_core_gemm.json"))
    parser.add_argument("--markdown", help="write the section of docs/accuracy.md here")
    options = parser.parse_args(argv)

    rows = table.read_rows(options.csv)
    gpus = model.load_gpus(table.GPUS_JSON, table.EXTRA_GPUS_JSON)
    with open(options.model) as f:
        shipped_doc = json.load(f)
    shipped = model.Parameters.from_json(shipped_doc)

    with tempfile.TemporaryDirectory() as work:
        trace_path = os.path.join(work, "xla_gemms.json")
        with open(trace_path, "w") as f:
            json.dump(trace_of(rows), f)
        baseline = predict_seconds(options.wavecast, trace_path, rows, None)
        ours = predict_seconds(options.wavecast, trace_path, rows, options.model)
        # Leave one GPU out: fit on one GPU's training rows, score the other's rows.
        left_out = {}
        for arch, gpu in table.ARCH_GPUS.items():
            train = [r for r in rows if r.arch == arch and not r.held_out]
            p, _ = fit.fit(train, gpus)
            path = os.path.join(work, f"fit_{arch}.json")
            with open(path, "w") as f:
                json.dump({"format": model.FORMAT, "version": 1, **p.to_json()}, f)
            left_out[gpu] = (p, predict_seconds(options.wavecast, trace_path, rows, path))

    # model.py must compute what the C++ computes, or fit.py fits something else.
    mirror = [model.gemm_seconds(shipped, gpus[r.gpu], r.dtype, r.b, r.m, r.n, r.k, r.element_bytes)
              for r in rows]
    worst = max(abs(m / c - 1) for m, c in zip(mirror, ours))
    if worst > 1e-3:
        raise SystemExit(f"model.py and wavecast disagree by up to {100 * worst:.2f}% per GEMM: "
                         "keep them formula for formula")

    held = scores(rows, ours, lambda r: r.held_out)
    held_base = scores(rows, baseline, lambda r: r.held_out)
    lines = [
        "## Tensor-core GEMMs against measured GEMMs",
        "",
        "OpenXLA's measured GEMM table (`../shared/reference/xla-perf-tables/matmul.csv`, "
        "Apache-2.0; CUPTI kernel time of batched GEMMs, b in {1, 2, 4}, m, n, k in "
        "{256 ... 4096}) on H100 SXM and B200, in bf16 and in XLA's default f32, which runs "
        "on TF32 tensor cores. `bench/tensor_core_gemm/fit.py` fits the four parameters of "
        "data/tensor_core_gemm.json (docs/predictor.md, 'Tensor-core GEMMs') on three "
        "quarters of the shapes of both GPUs and both dtypes; `bench/tensor_core_gemm/report.py` "
        "predicts every row as an `aten::bmm` with `wavecast predict` and wrote this section. "
        "Baseline: the same wavecast without data/tensor_core_gemm.json (the roofline at 0.75 "
        "of the tensor peak with wave and tile quantisation). Bias: geometric mean of "
        "predicted / measured time (below 1: predicted fast).",
        "",
        f"Shipped parameters: efficiency {shipped.efficiency:.3f} of the dense tensor peak, "
        f"tile prologue {shipped.tile_prologue_k:.0f} K steps, {shipped.kernel_fixed_us:.2f} us "
        f"per kernel, split-K slices of at least {shipped.split_k_min_slice_k:.0f} K.",
        "",
        "### Held-out shapes (never fitted on)",
        "",
        "| GPU | math | rows | MAPE | bias | baseline MAPE | baseline bias |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for key, (n, mape, bias) in held.items():
        _, base_mape, base_bias = held_base[key]
        lines.append(f"| {key[0]} | {key[1]} | {n} | {mape:.1f}% | {bias:.2f} | {base_mape:.1f}% | "
                     f"{base_bias:.2f} |")
    lines.append(f"| **all** | | {sum(v[0] for v in held.values())} | "
                 f"**{overall(rows, ours, lambda r: r.held_out):.1f}%** | | "
                 f"{overall(rows, baseline, lambda r: r.held_out):.1f}% | |")
    lines += [
        "",
        "### Leave one GPU out (fitted on one GPU's training rows, scored on every row of the other)",
        "",
        "| fitted on | scored on | math | rows | MAPE | bias | baseline MAPE | parameters |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for fitted_gpu, (p, predicted) in left_out.items():
        other = [g for g in GPU_ORDER if g != fitted_gpu][0]
        got = scores(rows, predicted, lambda r: r.gpu == other)
        base = scores(rows, baseline, lambda r: r.gpu == other)
        for (gpu, dtype), (n, mape, bias) in got.items():
            lines.append(f"| {fitted_gpu} | {gpu} | {dtype} | {n} | {mape:.1f}% | {bias:.2f} | "
                         f"{base[(gpu, dtype)][1]:.1f}% | efficiency {p.efficiency:.3f}, prologue "
                         f"{p.tile_prologue_k:.0f} K, {p.kernel_fixed_us:.2f} us, split-K "
                         f"{p.split_k_min_slice_k:.0f} K |")
    lines += ["", *dtype_note(rows, gpus), ""]
    text = "\n".join(lines)
    if options.markdown:
        with open(options.markdown, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
