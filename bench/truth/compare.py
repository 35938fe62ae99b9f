#!/usr/bin/env python3
"""Compares wavecast's predictions with iterations measured on a real GPU.

For every run of a truth file (../shared/truth/README.md: sample:batch ->
wall time with CUDA events, kernel sum and per-op GPU time from
torch.profiler), it predicts the sample at that batch on the truth's GPU with
`wavecast predict --json`, in FP32 as the sample is written and, where the
truth has it, with the whole iteration under bf16 CUDA autocast. It prints (or
writes, with --markdown) per-run and per-op-family tables and the mean
absolute percentage errors against kernel time and against wall time.

    bench/truth/compare.py ../shared/truth/h100/sweep.json --markdown out.md
    bench/truth/compare.py TRUTH.json --runs 'small_cnn|resnet50.py:8' --json

The predicted GPU time (`gpu_ms`) is compared with the kernel sum (less CUPTI's own
buffer requests, which the profiler lists among device activities), and the
predicted wall time (`iteration_ms`: host model and GPU on two clocks) with the
measured wall time; per op family with torch.profiler's per-op times; per
source line with the truth's `lines_us` where it has them (bench/truth/record.py
writes them from a measured trace).

Any prediction can be compared: by default each sample is traced in shape
mode; with --traces DIR a saved trace DIR/<sample>_<batch>.json is predicted
instead, e.g. one measured on another GPU (`wavecast trace --mode cuda` there),
whose prediction for the truth's GPU is then scaled from that GPU.
"""

import argparse
import concurrent.futures
import json
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

# A sample as a truth run ran it: the whole iteration under CUDA bf16 autocast, as the
# truth's bf16 runs were measured (gpu_truth.py wraps the iteration the same way), and the
# model passed through torch.compile with `compile` ("default", ...; None: eager), as
# compiled.py's runs were (record.prepare).
WRAPPER = """\
import importlib.util
import torch

_spec = importlib.util.spec_from_file_location("wavecast_truth_sample", {sample!r})
_sample = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sample)
wavecast_input = _sample.wavecast_input


def wavecast_model():
    model = _sample.wavecast_model()
    return model if {compile!r} is None else torch.compile(model, mode={compile!r})


def wavecast_iteration(model):
    step = _sample.wavecast_iteration(model)

    def iteration(*inputs):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled={autocast!r}):
            return step(*inputs)

    return iteration
"""

# torch.profiler's names for the ops whose GPU time it reports (ATen ops that
# launch kernels) -> wavecast's cost families (docs/results-json.md, `family`).
# Profiler-only ranges (Optimizer.step#..., Activity Buffer Request) are left
# out: their time is already in the ops they enclose or is profiler overhead.
FAMILY_PATTERNS = [
    ("attention", r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention|_fmha"),
    ("rnn", r"_cudnn_rnn|lstm|gru|rnn_tanh|rnn_relu"),
    ("conv", r"conv"),
    ("gemm", r"::(mm|bmm|addmm|baddbmm|addbmm|matmul|linear|_addmm_activation)$"),
    ("norm", r"batch_norm|layer_norm|group_norm|instance_norm|rms_norm"),
    ("optimizer", r"_foreach_|_fused_adam|_fused_sgd"),
    ("softmax", r"softmax"),
    ("loss", r"nll_loss|cross_entropy|binary_cross_entropy|mse_loss|smooth_l1|ctc_loss"),
    ("embedding", r"embedding"),
    ("pooling", r"pool"),
    ("reduction", r"::(sum|mean|max|min|amax|amin|norm|var|std|prod|argmax|argmin|cumsum)$"),
    ("copy", r"copy_|::to$|_to_copy|contiguous|clone|cat$|stack$|Memcpy|index|gather|scatter"),
]
# Everything else is elementwise, as the predictor prices it: fills and zeroing
# (fill_, zero_, masked_fill_, the allocator's Memset) included.
# wavecast's families the profiler has no name of its own for: a copy to the GPU is the
# aten::copy_ that runs its Memcpy HtoD.
PROFILER_FAMILY = {"host_transfer": "copy"}
LINES_SHOWN = 12
PROFILER_RANGES = re.compile(r"^(Optimizer\.|Activity Buffer|ProfilerStep|cudaDeviceSynchronize)")
CUPTI_OVERHEAD = re.compile(r"^Activity Buffer Request")


def kernel_ms(lines):
    """The GPU time of the iteration: how long the GPU was busy on any stream where the truth
    has it (record.py's busy_us; cuDNN's RNNs overlap their kernels, which the kernel sum
    counts twice), else the kernel sum; less CUPTI's own buffer requests, which
    torch.profiler counts among the device activities and an unprofiled iteration never runs."""
    overhead = sum(entry["self_device_us"] for name, entry in lines["per_op"].items()
                   if CUPTI_OVERHEAD.match(name))
    return (lines.get("busy_us", lines["kernel_sum_us"]) - overhead) / 1000.0


def family_of(op_name):
    if PROFILER_RANGES.match(op_name):
        return None
    for family, pattern in FAMILY_PATTERNS:
        if re.search(pattern, op_name):
            return family
    return "elementwise"


def predict(wavecast, script, batch, gpu, extra):
    command = [wavecast, "predict", script, "--gpu", gpu, "--batch-size", str(batch), "--json"] + extra
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    return json.loads(done.stdout)


def line_key(file, line):
    """Lines compare by file name and number: truth files name samples relative to
    where they were recorded, predictions absolutely."""
    return f"{os.path.basename(file)}:{line}"


def summarize(prediction, gpu):
    """The figures compared: GPU time, wall time, GPU time per family and per line (ms)."""
    index = prediction["gpus"].index(gpu)
    summary = prediction["summaries"][index]
    families = {}
    for op in prediction["ops"]:
        time = op["per_gpu"][index]["time_ms"]
        if time:
            family = PROFILER_FAMILY.get(op["family"], op["family"])
            families[family] = families.get(family, 0.0) + time
    lines = {}
    for line in prediction["lines"]:
        if line["file"] and line["per_gpu"][index]["gpu_ms"]:
            key = line_key(line["file"], line["line"])
            lines[key] = lines.get(key, 0.0) + line["per_gpu"][index]["gpu_ms"]
    memory = summary["memory"]
    # An older wavecast reported one figure, peak_bytes (then tensors + workspaces + 10%).
    allocated = memory.get("peak_allocated_bytes", memory["peak_bytes"])
    return {"gpu_ms": summary["gpu_ms"], "wall_ms": summary["iteration_ms"],
            "host_ms": summary["host_ms"], "families": families,
            "lines": lines, "method": summary.get("method", prediction.get("method", "")),
            "peak_allocated_bytes": allocated,
            "peak_reserved_bytes": memory.get("peak_reserved_bytes", memory["peak_bytes"]),
            "process_bytes": memory["peak_bytes"],
            "fits_in_memory": summary["fits_in_memory"]}


def truth_lines(lines_us):
    out = {}
    for key, us in lines_us.items():
        if ":" in key:
            file, line = key.rsplit(":", 1)
            out[line_key(file, line)] = out.get(line_key(file, line), 0.0) + us / 1000.0
    return out


def line_error(predicted, real):
    """Weighted per-line error: the lines' absolute misses over the truth's line total (%);
    a line only one side has counts in full."""
    total = sum(real.values())
    if total <= 0:
        return float("nan")
    keys = set(predicted) | set(real)
    return sum(abs(predicted.get(k, 0.0) - real.get(k, 0.0)) for k in keys) / total * 100.0


def truth_families(per_op):
    families = {}
    for name, entry in per_op.items():
        family = family_of(name)
        if family:
            families[family] = families.get(family, 0.0) + entry["self_device_us"] / 1000.0
    return families


def jobs_from(truth, pattern, precisions):
    jobs = []
    for key, measured in truth["samples"].items():
        if pattern and not re.search(pattern, key):
            continue
        sample, batch = key.rsplit(":", 1)
        for precision, field in (("fp32", "fp32_default"), ("bf16", "bf16_autocast")):
            if precision in precisions and measured.get(field):
                jobs.append((key, sample, int(batch), precision, measured))
    return jobs


def ape(predicted, real):
    return abs(predicted - real) / real * 100.0


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def saved_trace(folder, sample, batch):
    if not folder:
        return None
    path = os.path.join(folder, f"{os.path.basename(sample)[:-3]}_{batch}.json")
    return path if os.path.exists(path) else None


def run(options):
    with open(options.truth) as f:
        truth = json.load(f)
    jobs = jobs_from(truth, options.runs, options.precision.split(","))
    if not jobs:
        sys.exit(f"compare.py: no run of {options.truth} matches --runs {options.runs!r}")
    with tempfile.TemporaryDirectory() as work:
        def one(job):
            _, sample, batch, precision, _ = job
            script = os.path.join(options.samples_root, sample)
            saved = saved_trace(options.traces, sample, batch)
            if saved and precision == "fp32" and not options.compile:
                script = saved
            elif precision == "bf16" or options.compile:
                script_path = os.path.join(work, f"{os.path.basename(sample)[:-3]}_{precision}_{batch}.py")
                with open(script_path, "w") as out:
                    out.write(WRAPPER.format(sample=os.path.abspath(script), autocast=precision == "bf16",
                                             compile=options.compile))
                script = script_path
            prediction = predict(options.wavecast, script, batch, options.gpu, options.extra)
            return job, prediction

        with concurrent.futures.ThreadPoolExecutor(options.jobs) as pool:
            results = list(pool.map(one, jobs))

    rows = []
    for (key, _, _, precision, measured), prediction in results:
        field = "fp32_default" if precision == "fp32" else "bf16_autocast"
        row = {"run": key, "precision": precision, "wall_ms": measured[field]["median_ms"]}
        for name in ("issue_ms", "peak_allocated_bytes", "peak_reserved_bytes"):
            if name in measured[field]:
                row[name] = measured[field][name]
        # bf16_lines: the same profile under bf16 autocast, where the truth has one.
        lines = measured.get("lines" if precision == "fp32" else "bf16_lines")
        if lines:
            row["kernel_ms"] = kernel_ms(lines)
            row["truth_families"] = truth_families(lines["per_op"])
            row["truth_lines"] = truth_lines(lines.get("lines_us", {}))
        if "error" in prediction:
            row["error"] = " ".join(prediction["error"])
        else:
            row.update({"predicted_" + k: v for k, v in summarize(prediction, options.gpu).items()})
        rows.append(row)
    return {"truth": options.truth, "gpu": options.gpu, "device": truth.get("device"),
            "torch": truth.get("torch"), "rows": rows, "memory": memory_rows(truth, rows)}


def memory_rows(truth, rows):
    """Predicted peaks against the truth's, per run and precision where the truth has each
    precision's own (record.py: `peak_allocated_bytes`, `peak_reserved_bytes`, from a fresh
    model). An older truth took torch.cuda.max_memory_allocated() over the FP32 and the bf16
    iterations alike (`peak_mem_bytes`): there the prediction compared is the larger of
    those predicted for the run, with precision "both"."""
    out = []
    older = {}
    for r in rows:
        if "error" in r:
            continue
        if "peak_allocated_bytes" in r:
            row = {"run": r["run"], "precision": r["precision"],
                   "predicted_bytes": r["predicted_peak_allocated_bytes"],
                   "real_bytes": r["peak_allocated_bytes"]}
            if "peak_reserved_bytes" in r:
                row["predicted_reserved_bytes"] = r["predicted_peak_reserved_bytes"]
                row["real_reserved_bytes"] = r["peak_reserved_bytes"]
            out.append(row)
        else:
            older[r["run"]] = max(older.get(r["run"], 0), r["predicted_peak_allocated_bytes"])
    for run, bytes_ in older.items():
        real = truth["samples"][run].get("peak_mem_bytes")
        if real:
            out.append({"run": run, "precision": "both", "predicted_bytes": bytes_, "real_bytes": real})
    for row in out:
        row["ratio"] = row["predicted_bytes"] / row["real_bytes"]
    return out


def metrics(report):
    ok = [r for r in report["rows"] if "error" not in r]
    fp32 = [r for r in ok if r["precision"] == "fp32"]
    bf16 = [r for r in ok if r["precision"] == "bf16"]
    with_lines = [r for r in fp32 if r.get("truth_lines")]
    return {
        "fp32_line_error": mean(line_error(r["predicted_lines"], r["truth_lines"]) for r in with_lines),
        "fp32_kernel_mape": mean(ape(r["predicted_gpu_ms"], r["kernel_ms"]) for r in fp32),
        "fp32_wall_mape": mean(ape(r["predicted_wall_ms"], r["wall_ms"]) for r in fp32),
        "bf16_kernel_mape": mean(ape(r["predicted_gpu_ms"], r["kernel_ms"]) for r in bf16 if "kernel_ms" in r),
        "bf16_wall_mape": mean(ape(r["predicted_wall_ms"], r["wall_ms"]) for r in bf16),
        "memory_mape": mean(ape(r["predicted_bytes"], r["real_bytes"]) for r in report.get("memory", [])),
        "reserved_mape": mean(ape(r["predicted_reserved_bytes"], r["real_reserved_bytes"])
                              for r in report.get("memory", []) if r.get("real_reserved_bytes")),
        "runs": len(ok), "failed": len(report["rows"]) - len(ok),
    }


def markdown(report):
    m = metrics(report)
    out = [f"Truth: `{os.path.relpath(report['truth'], ROOT)}` ({report['device']}, torch "
           f"{report['torch']}), predicted on `{report['gpu']}`.", "",
           f"- FP32, MAPE against kernel time: **{m['fp32_kernel_mape']:.1f}%**",
           f"- FP32, MAPE against wall time: **{m['fp32_wall_mape']:.1f}%**"]
    if any(r.get("truth_lines") for r in report["rows"]):
        out.append(f"- FP32, per-line error (misses over the lines' kernel time): "
                   f"**{m['fp32_line_error']:.1f}%**")
    if not math.isnan(m["bf16_kernel_mape"]):  # the truth has bf16 profiles
        out.append(f"- bf16 autocast, MAPE against kernel time: **{m['bf16_kernel_mape']:.1f}%**")
    out += [f"- bf16 autocast, MAPE against wall time: **{m['bf16_wall_mape']:.1f}%**",
            f"- Peak allocated memory, MAPE against torch.cuda.max_memory_allocated(): "
            f"**{m['memory_mape']:.1f}%**"]
    if not math.isnan(m["reserved_mape"]):  # the truth has each precision's reserved peak
        out.append(f"- Peak reserved memory, MAPE against torch.cuda.max_memory_reserved(): "
                   f"**{m['reserved_mape']:.1f}%**")
    out += [f"- runs compared: {m['runs']}" + (f", failed to predict: {m['failed']}" if m["failed"] else ""),
            "", "| run | precision | method | predicted GPU ms | real kernels ms | predicted wall ms "
            "| real wall ms | error vs kernels | error vs wall |", "|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        if "error" in r:
            out.append(f"| {r['run']} | {r['precision']} | failed: {r['error']} | | | | | | |")
            continue
        kernel = r.get("kernel_ms")
        cells = [r["run"], r["precision"], r["predicted_method"], f"{r['predicted_gpu_ms']:.1f}",
                 f"{kernel:.1f}" if kernel is not None else "–",
                 f"{r['predicted_wall_ms']:.1f}", f"{r['wall_ms']:.1f}",
                 f"{ape(r['predicted_gpu_ms'], kernel):.0f}%" if kernel is not None else "–",
                 f"{ape(r['predicted_wall_ms'], r['wall_ms']):.0f}%"]
        out.append("| " + " | ".join(cells) + " |")
    for precision, title in (("fp32", "FP32"), ("bf16", "bf16 autocast")):
        families = {}
        for r in report["rows"]:
            if "error" in r or r["precision"] != precision or "truth_families" not in r:
                continue
            for family in set(r["predicted_families"]) | set(r["truth_families"]):
                p, t = families.get(family, (0.0, 0.0))
                families[family] = (p + r["predicted_families"].get(family, 0.0),
                                    t + r["truth_families"].get(family, 0.0))
        if not families:
            continue
        out += ["", f"Per op family, summed over the {title} runs (GPU time):", "",
                "| family | predicted ms | real ms | predicted / real |", "|---|---|---|---|"]
        for family, (p, t) in sorted(families.items(), key=lambda item: -item[1][1]):
            ratio = f"{p / t:.2f}" if t > 0 else "–"
            out.append(f"| {family} | {p:.1f} | {t:.1f} | {ratio} |")
    out += ["", "torch.profiler credits each kernel to the innermost ATen op that launched it, "
            "while wavecast prices the op the script called whole: an out-of-place `masked_fill` "
            "clones its input (`aten::copy_` or a device-to-device memcpy, copy here) and fills "
            "the clone (`masked_fill_`, elementwise), softmax's backward multiplies gradient and "
            "output in an `aten::mul` (elementwise here) and gradient accumulation runs as `add_`. "
            "Families differ by that attribution as well as by error; copy most of all."]
    if report.get("memory"):
        out += ["", "Peak memory per run and precision (predicted peak allocated against the "
                "truth's max_memory_allocated, and reserved against max_memory_reserved where the "
                "truth has it; precision \"both\": the truth's one peak over both precisions "
                "against the larger prediction):", "",
                "| run | precision | predicted GiB | real GiB | predicted / real "
                "| reserved predicted / real |", "|---|---|---|---|---|---|"]
        for r in report["memory"]:
            reserved = (f"{r['predicted_reserved_bytes'] / r['real_reserved_bytes']:.3f}"
                        if r.get("real_reserved_bytes") else "–")
            out.append(f"| {r['run']} | {r['precision']} | {r['predicted_bytes'] / 2**30:.3f} | "
                       f"{r['real_bytes'] / 2**30:.3f} | {r['ratio']:.3f} | {reserved} |")
    for r in report["rows"]:
        if "error" in r or not r.get("truth_lines"):
            continue
        out += ["", f"Per line, {r['run']} (GPU time, the truth's {LINES_SHOWN} slowest lines; "
                f"error {line_error(r['predicted_lines'], r['truth_lines']):.1f}%):", "",
                "| line | predicted ms | real ms | predicted / real |", "|---|---|---|---|"]
        ranked = sorted(r["truth_lines"].items(), key=lambda item: -item[1])[:LINES_SHOWN]
        for key, t in ranked:
            p = r["predicted_lines"].get(key, 0.0)
            out.append(f"| {key} | {p:.3f} | {t:.3f} | {p / t:.2f} |" if t > 0 else f"| {key} | {p:.3f} | 0 | – |")
    return "\n".join(out) + "\n"


def parse_with_predict_options(parser, argv):
    """`parser`'s options, and in `extra` the words after "--", which go to `wavecast
    predict` whatever comes before them (argparse refuses them after other options)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    options = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    options.extra = extra
    return options


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("truth", help="a truth JSON file (../shared/truth/h100/sweep.json)")
    parser.add_argument("--wavecast", default=os.path.join(ROOT, "build", "bin", "wavecast"))
    parser.add_argument("--samples-root", default=ROOT,
                        help="folder the truth's sample paths are relative to (default: the repository)")
    parser.add_argument("--gpu", default="H100-SXM", help="wavecast's id of the truth's GPU")
    parser.add_argument("--runs", default="", help="regular expression selecting runs (sample:batch)")
    parser.add_argument("--precision", default="fp32,bf16", help="fp32, bf16 or both (default)")
    parser.add_argument("--jobs", type=int, default=2, help="predictions run at once")
    parser.add_argument("--traces", help="folder of saved traces <sample>_<batch>.json to predict "
                        "instead of tracing the samples (e.g. measured on another GPU)")
    parser.add_argument("--compile", metavar="MODE", help="predict the model passed through "
                        "torch.compile(mode=MODE), as compiled.py's runs were")
    parser.add_argument("--markdown", help="write the report as Markdown to this file")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("extra", nargs="*", help="more `wavecast predict` options, after --")
    options = parse_with_predict_options(parser, argv)
    report = run(options)
    report["metrics"] = metrics(report)
    if options.json:
        json.dump(report, sys.stdout, indent=1)
        print()
    text = markdown(report)
    if options.markdown:
        with open(options.markdown, "w") as out:
            out.write(text)
    if not options.json:
        sys.stdout.write(text)
    return 1 if report["metrics"]["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
