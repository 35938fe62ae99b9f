#!/usr/bin/env python3
"""Fits how long cuDNN takes over a convolution with fewer than 8 channels per filter tap on
the image side (predictor/src/roofline.cpp, kNarrowConvData and kNarrowConvWeightGradient)
to the per-shape kernel times of a truth file.

An image model's first layer reads 1 or 3 channels; an image generator's last, transposed
layer writes 3. cuDNN's tensor-core implicit GEMM reduces over channel vectors of 8 per
filter tap, so these convolutions run other kernels: on an H100 they take the same time in
FP32 (TF32 allowed) and under bf16 autocast, at 9-31 TFLOP/s, where the tensor-core roofline
priced them 3-9x faster. Each kernel is priced as a fixed time, plus `cycles` SM cycles per
output position (spread over the SMs at the boost clock), plus its multiply-adds at a share
of the CUDA cores' FP32 peak, and at least the launch floor. Two kinds of kernel: forward and
input gradient (cuDNN's fprop and dgrad, a transposed convolution's forward among them),
per position of the tensor written; and the weight gradient, per position of the
convolution's output. The
truth keeps no output_mask: the weight-gradient rows are the first layers' backward (count
1, an image input, which needs no gradient). It picks the pair with the least mean |log
error| on the first truth file's rows (fp32 runs and bf16 autocast runs alike) and reports
the error there and on the others. Files are named with wavecast's id of their GPU
(data/gpus.json), as `compare.py --gpu` takes it.

    bench/truth/fit_narrow_conv.py bench/truth/data/h100/truth.json:H100-SXM \\
        bench/truth/data/h200/truth.json:H200
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import per_shape_fit  # noqa: E402

NARROW_CHANNELS = 8
FORWARD = ("aten::cudnn_convolution", "aten::cudnn_convolution_transpose")


def positions(shape):
    return math.prod(shape) / shape[1]


def per_shape(truth):
    """{(kernel, precision, input shape, weight shape, positions, multiply-adds): kernel us}
    with kernel "data" or "weight". A forward row's output shape is its backward's incoming
    gradient (the truth records input shapes only)."""
    out = {}
    for run in truth["samples"].values():
        for field in ("lines", "bf16_lines"):
            rows = (run.get(field) or {}).get("per_shape", [])
            output_of = {}
            for row in rows:
                if row["op"] == "aten::convolution_backward":
                    grad, image, weight = row["input_shapes"][:3]
                    output_of[(tuple(image), tuple(weight))] = grad
            for row in rows:
                shapes, us = row["input_shapes"], row["self_device_us"] / row["count"]
                if row["op"] in FORWARD:
                    x, weight = shapes[0], shapes[1]
                    transposed = row["op"].endswith("transpose")
                    narrow = len(weight) == 4 and weight[1] < NARROW_CHANNELS
                    if not narrow or x[1] != weight[0 if transposed else 1]:
                        continue  # wide, or grouped
                    y = output_of.get((tuple(x), tuple(weight)))
                    if not y:
                        continue
                    # The non-transposed direction's output positions times a tap's MACs.
                    macs = positions(x if transposed else y) * math.prod(weight)
                    out[("data", field, tuple(x), tuple(weight), positions(y), macs)] = us
                elif row["op"] == "aten::convolution_backward" and row["count"] == 1:
                    grad, x, weight = shapes[:3]
                    if len(weight) == 4 and weight[1] < NARROW_CHANNELS and x[1] == weight[1]:
                        macs = positions(grad) * math.prod(weight)
                        out[("weight", field, tuple(x), tuple(weight), positions(grad), macs)] = us
    return out


def of_kernel(kernel):
    """Selects one kernel's rows of a per_shape table."""
    return lambda table: {key: us for key, us in table.items() if key[0] == kernel}


def predicted_us(gpu, key, parameters):
    cycles, share, fixed_us = parameters
    position_count, macs = key[4], key[5]
    positions_us = position_count * cycles / (gpu.sms * gpu.clock_hz) * 1e6
    macs_us = 2 * macs / (gpu.peak["fp32"] * share) * 1e6
    return max(per_shape_fit.LAUNCH_FLOOR_US, fixed_us + positions_us + macs_us)


def fit(gpu, rows):
    def loss(parameters):
        return per_shape_fit.mean_log_error(lambda key: predicted_us(gpu, key, parameters), rows)

    return min(((c, s / 100, f) for c in range(0, 129, 4) for s in range(5, 101)
                for f in range(0, 41, 2)), key=loss)


def main(argv=None):
    files = per_shape_fit.truth_files(__doc__.splitlines()[0], argv, per_shape)
    groups = [("forward and input gradient", of_kernel("data")),
              ("weight gradient", of_kernel("weight"))]
    per_shape_fit.fit_each(files, groups, fit, predicted_us,
                           lambda p: f"{p[0]} SM cycles per position, {p[1]:.2f} of the FP32 peak, "
                                     f"{p[2]} us more per kernel")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
