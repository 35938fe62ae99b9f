#!/usr/bin/env python3
"""torch.compile's real effect (a compiled.py truth file) beside what wavecast predicts.

wavecast prices a compiled model as eager (profiler/python/wavecast_tracer/compiled.py).
This puts each run's eager and compiled iterations (wall time, kernel time, the share of
kernels Triton generated, kernel launches, the first iterations' compile time) beside the
eager prediction of the same run, and that prediction's error against the compiled one.

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


def predictions(truth_path, runs, gpu, wavecast):
    """compare.py's rows for `runs` ("sample:batch"), both precisions, by (run, precision)."""
    pattern = "|".join(f"^{run.replace('.', '[.]')}$" for run in runs)
    out = io.StringIO()
    with redirect_stdout(out):
        status = compare.main([truth_path, "--wavecast", wavecast, "--gpu", gpu, "--runs", pattern,
                               "--json"])
    if status != 0:
        sys.exit(f"compiled_report.py: compare.py failed: {out.getvalue()[-500:]}")
    report = json.loads(out.getvalue().split("\nTruth:")[0])
    return {(row["run"], row["precision"]): row for row in report["rows"]}


def report(compiled, predicted):
    lines = [
        f"torch.compile (default mode) on an {compiled['device']}, torch {compiled['torch']}, "
        f"Triton {compiled['triton']}: real iterations (`bench/truth/compiled.py`) against "
        "wavecast's prediction, which is eager's.",
        "",
        "| run | precision | eager wall ms | compiled wall ms | speed-up | eager kernels ms "
        "| compiled kernels ms | Triton's share | launches eager → compiled | compile s "
        "| predicted wall ms | error vs compiled |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    errors = []
    for run, precisions in compiled["samples"].items():
        for precision, measured in precisions.items():
            eager, built = measured.get("eager"), measured.get("compiled_default")
            if not eager or not built:
                lines.append(f"| {run} | {precision} | {measured.get('error', 'not recorded')} "
                             "|||||||||")
                continue
            row = predicted.get((run, precision), {})
            wall = row.get("predicted_wall_ms")
            error = compare.ape(wall, built["median_ms"]) if wall else None
            if error is not None:
                errors.append(error)
            guess = f"{wall:.1f} | {error:.0f}%" if wall else "– | –"
            lines.append(
                f"| {run} | {precision} | {eager['median_ms']:.1f} | {built['median_ms']:.1f} "
                f"| {eager['median_ms'] / built['median_ms']:.2f}x "
                f"| {eager['kernel_sum_us'] / 1e3:.1f} | {built['kernel_sum_us'] / 1e3:.1f} "
                f"| {100 * built['triton_us'] / built['kernel_sum_us']:.0f}% "
                f"| {eager['kernel_launches']} → {built['kernel_launches']} "
                f"| {built['first_iteration_s']:.0f} | {guess} |")
    if errors:
        lines += ["", f"MAPE of the eager prediction against the compiled wall time: "
                      f"**{sum(errors) / len(errors):.1f}%** over {len(errors)} "
                      f"run{'' if len(errors) == 1 else 's'}."]
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
    text = report(compiled, predictions(truth, list(compiled["samples"]), options.gpu,
                                        options.wavecast))
    if options.markdown:
        with open(options.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
