#!/usr/bin/env python3
"""How far two real recordings of the same GPU model are from each other.

Each run both truth files have (sample:batch and precision) is compared as compare.py
compares a prediction: the second file's GPU time (busy time or kernel sum, compare.kernel_ms),
median wall time and peak allocated memory against the first's. The mean absolute %
differences are the floor a predictor scored against either file can expect: one real
H100 on another machine, the same day or not, is that far from the first. Host-bound
wall times carry the host's speed and the run-to-run noise, which one GPU model does not
fix.

    python3 bench/truth/repeatability.py ../shared/truth/h100/sweep.json \
        bench/truth/data/h100/truth.json --markdown out.md
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

FIELDS = (("fp32", "fp32_default", "lines"), ("bf16", "bf16_autocast", "bf16_lines"))


def run_peak(measured):
    """The run's peak allocated memory over its precisions: an older truth recorded only
    that (`peak_mem_bytes`), a newer one each precision's own (None: neither)."""
    own = [measured[field]["peak_allocated_bytes"] for _, field, _ in FIELDS
           if "peak_allocated_bytes" in measured.get(field, {})]
    return max(own) if own else measured.get("peak_mem_bytes")


def rows(first, second):
    """Per run both files have: the first's and the second's figures (None where either
    file lacks one)."""
    out = []
    for key, a in first["samples"].items():
        b = second["samples"].get(key)
        if b is None:
            continue
        for precision, field, lines in FIELDS:
            if not a.get(field) or not b.get(field) or "median_ms" not in a[field] or "median_ms" not in b[field]:
                continue
            row = {"run": key, "precision": precision,
                   "wall_ms": (a[field]["median_ms"], b[field]["median_ms"])}
            if a.get(lines) and b.get(lines):
                row["gpu_ms"] = (compare.kernel_ms(a[lines]), compare.kernel_ms(b[lines]))
            peaks = (run_peak(a), run_peak(b))
            if precision == "fp32" and None not in peaks:  # once per run
                row["peak_bytes"] = peaks
            out.append(row)
    return out


def difference(rows_, precision, figure):
    """Mean absolute % difference of the second file's figure from the first's, and runs."""
    pairs = [r[figure] for r in rows_ if r["precision"] == precision and figure in r]
    return compare.mean(compare.ape(b, a) for a, b in pairs), len(pairs)


def summary(rows_):
    """{precision_figure: (mean % difference, runs)}; the peak once per run (under fp32)."""
    out = {f"{precision}_{figure}": difference(rows_, precision, figure)
           for precision in ("fp32", "bf16") for figure in ("gpu_ms", "wall_ms")}
    out["fp32_peak_bytes"] = difference(rows_, "fp32", "peak_bytes")
    return out


def shown(path, truth):
    """The file as the docs name it (relative to the repository) and its recording date."""
    return (f"`{os.path.relpath(path, compare.ROOT)}` ({truth.get('device')}, "
            f"{'recorded ' + truth['recorded'] if 'recorded' in truth else 'no date in the file'})")


def markdown(first_path, second_path, first, second, rows_):
    names = {"gpu_ms": "GPU time", "wall_ms": "wall time",
             "peak_bytes": "peak allocated memory (the run's, over its precisions)"}
    out = [f"{shown(second_path, second)} against {shown(first_path, first)}, the runs both have:", ""]
    for key, (value, count) in summary(rows_).items():
        precision, figure = key.split("_", 1)
        if count:
            label = "FP32" if precision == "fp32" else "bf16 autocast"
            if figure == "peak_bytes":
                label = "Each run"
            out.append(f"- {label}, {names[figure]}: **{value:.1f}%** mean absolute difference ({count} runs)")
    out += ["", f"Each figure of the table: `{os.path.basename(first_path)}`'s / `{os.path.basename(second_path)}`'s.",
            "", "| run | precision | GPU ms | wall ms | wall difference |", "|---|---|---|---|---|"]
    for r in rows_:
        gpu = f"{r['gpu_ms'][0]:.1f} / {r['gpu_ms'][1]:.1f}" if "gpu_ms" in r else "–"
        a, b = r["wall_ms"]
        out.append(f"| {r['run']} | {r['precision']} | {gpu} | {a:.1f} / {b:.1f} | {compare.ape(b, a):.0f}% |")
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", help="a truth JSON file (../shared/truth/h100/sweep.json)")
    parser.add_argument("second", help="another of the same GPU model (bench/truth/data/h100/truth.json)")
    parser.add_argument("--markdown", help="write the comparison as Markdown to this file")
    parser.add_argument("--json", action="store_true", help="print the summary and rows as JSON")
    options = parser.parse_args(argv)
    with open(options.first) as f:
        first = json.load(f)
    with open(options.second) as f:
        second = json.load(f)
    if first.get("device") != second.get("device"):
        parser.error(f"the files are of different GPUs: {first.get('device')} and {second.get('device')}")
    compared = rows(first, second)
    if not compared:
        parser.error("the files have no run in common")
    text = markdown(options.first, options.second, first, second, compared)
    if options.markdown:
        with open(options.markdown, "w") as f:
            f.write(text)
    if options.json:
        print(json.dumps({"summary": summary(compared), "rows": compared}, indent=1))
    elif not options.markdown:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
