#!/usr/bin/env python3
"""Puts one run's predicted op times beside the truth's per-shape kernel times.

The truth's `per_shape` profiles name the ops CUDA dispatched (aten::cudnn_convolution,
aten::cudnn_batch_norm) where the trace names what the script called (aten::convolution,
aten::native_batch_norm), so both sides are grouped by the shapes of their first two
inputs, which the two share, and summed there. Each group prints the predicted and real
microseconds, their ratio and the op names of both sides, largest difference first:

    bench/truth/per_op.py bench/truth/data/h200/truth.json samples/dcgan.py:32 --gpu H200
    bench/truth/per_op.py TRUTH.json samples/gpt2.py:8 --precision bf16 -- --roofline
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402


def shape_key(shapes):
    return tuple(tuple(s) if s else () for s in (list(shapes) + [None, None])[:2])


def predicted(wavecast, script, batch, gpu, extra, work):
    """{shape key: [us, op names]} of the prediction for a shape-mode trace of `script`."""
    trace = os.path.join(work, "trace.json")
    for command in ([wavecast, "trace", script, "--batch-size", str(batch), "--out", trace],
                    [wavecast, "predict", trace, "--gpu", gpu, "--json"] + extra):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"per_op.py: {' '.join(command[:3])} failed: {done.stderr.strip()[-500:]}")
    prediction = json.loads(done.stdout)
    with open(trace) as f:
        inputs = {op["id"]: [t["shape"] if t else None for t in op["inputs"]]
                  for op in json.load(f)["ops"]}
    out = collections.defaultdict(lambda: [0.0, set()])
    for op in prediction["ops"]:
        us = op["per_gpu"][0]["time_ms"] * 1000
        if us > 0:
            group = out[shape_key(inputs.get(op["id"], []))]
            group[0] += us
            group[1].add(op["name"])
    return out


def measured(lines):
    out = collections.defaultdict(lambda: [0.0, set()])
    for row in lines.get("per_shape", []):
        group = out[shape_key(row["input_shapes"])]
        group[0] += row["self_device_us"]
        group[1].add(row["op"])
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("truth", help="a truth JSON file (bench/truth/data/h100/truth.json)")
    parser.add_argument("run", help="sample:batch, as the truth names it (samples/dcgan.py:32)")
    parser.add_argument("--gpu", default="H100-SXM", help="wavecast's id of the truth's GPU")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--wavecast", default=os.path.join(compare.ROOT, "build", "bin", "wavecast"))
    parser.add_argument("--top", type=int, default=30, help="groups to print")
    parser.add_argument("extra", nargs="*", help="more `wavecast predict` options, after --")
    options = compare.parse_with_predict_options(parser, argv)
    with open(options.truth) as f:
        run = json.load(f)["samples"].get(options.run)
    lines = run and run.get("lines" if options.precision == "fp32" else "bf16_lines")
    if not lines:
        sys.exit(f"per_op.py: {options.truth} has no {options.precision} profile of {options.run}")
    sample, batch = options.run.rsplit(":", 1)
    script = os.path.join(compare.ROOT, sample)
    with tempfile.TemporaryDirectory() as work:
        if options.precision == "bf16":
            wrapper = os.path.join(work, os.path.basename(sample))
            with open(wrapper, "w") as f:
                f.write(compare.WRAPPER.format(sample=os.path.abspath(script), autocast=True, compile=None))
            script = wrapper
        ours = predicted(options.wavecast, script, batch, options.gpu, options.extra, work)
    real = measured(lines)
    keys = sorted(set(ours) | set(real), key=lambda k: -abs(ours[k][0] - real[k][0]))
    print(f"{'predicted us':>12} {'real us':>10} {'ratio':>6}  shapes | predicted ops | real ops")
    for key in keys[:options.top]:
        p, r = ours[key][0], real[key][0]
        ratio = f"{p / r:6.2f}" if r > 0 else "     -"
        print(f"{p:12.1f} {r:10.1f} {ratio}  {list(map(list, key))} | "
              f"{', '.join(sorted(ours[key][1]))} | {', '.join(sorted(real[key][1]))}")
    print(f"{sum(v[0] for v in ours.values()):12.1f} {sum(v[0] for v in real.values()):10.1f}"
          "         all ops")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
