#!/usr/bin/env python3
"""torch.compile's real effect (a compiled.py truth file) beside what wavecast predicts.

The tracer marks a compiled model's ops and the predictor prices them as Inductor runs
them (docs/predictor.md, "Compiled regions"). This puts each run's eager and compiled
iterations (wall time, kernel time, the share of kernels Triton generated, kernel
launches, the first iterations' compile time, the peak allocated memory) beside the
compiled prediction of the same run and its errors, and the error the eager prediction
would have.

    bench/truth/compiled_report.py bench/truth/data/h200/compiled.json --gpu H200 \\
        [--wavecast build/bin/wavecast] [--markdown OUT.md]
"""

import argparse
import io
import json
import os
import sys
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


def predictions(truth_path, runs, gpu, wavecast, mode=None):
    """compare.py's rows for `runs` ("sample:batch"), both precisions, by (run, precision);
    the model compiled with `mode` (None: eager)."""
    pattern = "|".join(f"^{run.replace('.', '[.]')}$" for run in runs)
    out = io.StringIO()
    argv = [truth_path, "--wavecast", wavecast, "--gpu", gpu, "--runs", pattern, "--json"]
    with redirect_stdout(out):
        status = compare.main(argv + (["--compile", mode] if mode else []))
    if status != 0:
        sys.exit(f"compiled_report.py: compare.py failed: {out.getvalue()[-500:]}")
    report = json.loads(out.getvalue().split("\nTruth:")[0])
    return {(row["run"], row["precision"]): row for row in report["rows"]}


def _mape(errors):
    return sum(errors) / len(errors) if errors else float("nan")


def report(compiled, predicted, eager_predicted):
    """`predicted`: the compiled predictions by (run, precision); `eager_predicted`: the
    eager ones."""
    lines = [
        f"torch.compile (default mode) on an {compiled['device']}, torch {compiled['torch']}, "
        f"Triton {compiled['triton']}: real iterations (`bench/truth/compiled.py`) against "
        "wavecast's prediction of the compiled model, and the error the eager prediction has "
        "against the same compiled iteration.",
        "",
        "| run | precision | eager wall ms | compiled wall ms | speed-up | compiled kernels ms "
        "| Triton's share | launches eager → compiled | compile s | predicted kernels ms | error "
        "| predicted wall ms | error | eager prediction's wall error "
        "| peak allocated GB eager → compiled | predicted GB | error | eager prediction's error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    kernel_errors, wall_errors, eager_errors = [], [], []
    memory_errors, eager_memory_errors = [], []
    for run, precisions in compiled["samples"].items():
        for precision, measured in precisions.items():
            eager, built = measured.get("eager"), measured.get("compiled_default")
            if not eager or not built:
                lines.append(f"| {run} | {precision} | {measured.get('error', 'not recorded')} "
                             "||||||||||||||||")
                continue
            row = predicted.get((run, precision), {})
            gpu, wall = row.get("predicted_gpu_ms"), row.get("predicted_wall_ms")
            eager_wall = eager_predicted.get((run, precision), {}).get("predicted_wall_ms")
            cells = []
            for value, real, errors in ((gpu, built["kernel_sum_us"] / 1e3, kernel_errors),
                                        (wall, built["median_ms"], wall_errors)):
                if value:
                    errors.append(compare.ape(value, real))
                    cells.append(f"{value:.1f} | {errors[-1]:.0f}%")
                else:
                    cells.append("– | –")
            if eager_wall:
                eager_errors.append(compare.ape(eager_wall, built["median_ms"]))
            peak = built.get("peak_allocated_bytes")
            predicted_peak = row.get("predicted_peak_allocated_bytes")
            eager_peak = eager_predicted.get((run, precision), {}).get("predicted_peak_allocated_bytes")
            memory = ["–"] * 4
            if peak and eager.get("peak_allocated_bytes"):
                memory[0] = f"{eager['peak_allocated_bytes'] / 1e9:.2f} → {peak / 1e9:.2f}"
            if peak and predicted_peak:
                memory_errors.append(compare.ape(predicted_peak, peak))
                memory[1:3] = [f"{predicted_peak / 1e9:.2f}", f"{memory_errors[-1]:.1f}%"]
            if peak and eager_peak:
                eager_memory_errors.append(compare.ape(eager_peak, peak))
                memory[3] = f"{eager_memory_errors[-1]:.1f}%"
            lines.append(
                f"| {run} | {precision} | {eager['median_ms']:.1f} | {built['median_ms']:.1f} "
                f"| {eager['median_ms'] / built['median_ms']:.2f}x "
                f"| {built['kernel_sum_us'] / 1e3:.1f} "
                f"| {100 * built['triton_us'] / built['kernel_sum_us']:.0f}% "
                f"| {eager['kernel_launches']} → {built['kernel_launches']} "
                f"| {built['first_iteration_s']:.0f} | {cells[0]} | {cells[1]} "
                f"| {f'{eager_errors[-1]:.0f}%' if eager_wall else '–'} | {' | '.join(memory)} |")
    if kernel_errors:
        lines += ["", f"Over {len(kernel_errors)} run{'' if len(kernel_errors) == 1 else 's'}, "
                      f"the compiled prediction's MAPE: **{_mape(kernel_errors):.1f}%** against "
                      f"the compiled kernel time, **{_mape(wall_errors):.1f}%** against the "
                      f"compiled wall time; the eager prediction's against the compiled wall "
                      f"time: {_mape(eager_errors):.1f}%."]
    if memory_errors:
        lines += ["", f"Peak allocated memory: the compiled prediction's MAPE against the compiled "
                      f"runs' is **{_mape(memory_errors):.1f}%**; the eager prediction's, "
                      f"{_mape(eager_memory_errors):.1f}%."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compiled", help="a compiled.py truth file")
    parser.add_argument("--truth", help="the record.py truth of the same GPU (default: truth.json "
                        "beside the compiled file)")
    parser.add_argument("--gpu", default="H200", help="wavecast's id of the truth's GPU")
    parser.add_argument("--wavecast", default=os.path.join(compare.ROOT, "build", "bin", "wavecast"))
    parser.add_argument("--markdown", help="write the report to this file")
    options = parser.parse_args(argv)
    with open(options.compiled, encoding="utf-8") as f:
        compiled = json.load(f)
    truth = options.truth or os.path.join(os.path.dirname(options.compiled), "truth.json")
    runs = list(compiled["samples"])
    text = report(compiled, predictions(truth, runs, options.gpu, options.wavecast, "default"),
                  predictions(truth, runs, options.gpu, options.wavecast))
    if options.markdown:
        with open(options.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
