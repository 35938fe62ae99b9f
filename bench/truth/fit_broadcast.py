#!/usr/bin/env python3
"""Fits the SM cycles per element of PyTorch's elementwise kernels with a broadcast operand
(predictor/src/family_costs.h, kElementRateCycles) to the per-shape kernel times of
a truth file.

TensorIterator loads whole vectors only when every operand is contiguous over the whole
iteration (gpu_kernel_impl's vectorized path). An operand broadcast along some dims (a
bias, a causal mask, a per-channel scale) sends the op down the legacy path: an element
per load, each operand's offset worked out dim by dim. Those kernels are bound by that
work, not by DRAM: on an H100 a bf16 masked_fill_ with a broadcast mask runs at about the
element rate of its fp32 twin, where a contiguous bf16 add streams twice as many elements.
The kernel is priced as the roofline prices it: `cycles` SM cycles per element spread over
the SMs at the boost clock, or its bytes at the bandwidth, whichever is longer, and at
least the launch floor. It picks the cycles with the least mean |log error| on the first
truth file's rows (fp32 runs and bf16 autocast runs) and reports the error there and on
the others. Each file is named with wavecast's id of its GPU (data/gpus.json), as
`compare.py --gpu` takes it.

    bench/truth/fit_broadcast.py bench/truth/data/h100/truth.json:H100-SXM \\
        bench/truth/data/h200/truth.json:H200
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import per_shape_fit  # noqa: E402

# Elementwise ops that run on TensorIterator's gpu_kernel, out of place or in place.
OPS = {"add", "sub", "mul", "div", "where", "masked_fill", "maximum", "minimum", "pow", "lerp",
       "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "bitwise_and"}


def stem(op):
    name = op.split("::")[-1]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def per_shape(truth):
    """{(element bytes, elements, broadcast elements): kernel us} for every elementwise op
    of the truth's per-shape profiles that broadcasts a tensor operand of more than one
    element. Element bytes: the precision's (fp32 runs 4, bf16 autocast runs 2: the truth
    keeps no dtypes), for the first operand read and the result written; a broadcast
    operand is small and stays in cache."""
    out = {}
    for run in truth["samples"].values():
        for field, element_bytes in (("lines", 4), ("bf16_lines", 2)):
            for row in (run.get(field) or {}).get("per_shape", []):
                if stem(row["op"]) not in OPS:
                    continue
                sizes = [math.prod(shape) for shape in row["input_shapes"] if shape]
                if len(sizes) < 2:
                    continue
                elements = max(sizes)
                broadcast = [n for n in sizes if 1 < n < elements]
                if not broadcast:
                    continue
                key = (element_bytes, elements, max(broadcast))
                out[key] = row["self_device_us"] / row["count"]
    return out


def predicted_us(gpu, element_bytes, elements, broadcast_elements, cycles):
    compute = elements * cycles / (gpu.sms * gpu.clock_hz) * 1e6
    memory = (2 * elements * element_bytes + broadcast_elements * element_bytes) / gpu.bandwidth * 1e6
    return max(per_shape_fit.LAUNCH_FLOOR_US, compute, memory)


def fit(gpu, rows):
    def loss(cycles):
        return per_shape_fit.mean_log_error(lambda key: predicted_us(gpu, *key, cycles), rows)

    best = min((loss(c / 100), c / 100) for c in range(1, 301))
    center = round(best[1] * 1000)
    return min((loss(c / 1000), c / 1000) for c in range(max(1, center - 10), center + 11))[1]


def main(argv=None):
    files = per_shape_fit.truth_files(__doc__.splitlines()[0], argv, per_shape)
    groups = [("broadcast elementwise", lambda table: table)]
    per_shape_fit.fit_each(files, groups, fit, lambda gpu, key, cycles: predicted_us(gpu, *key, cycles),
                           lambda cycles: f"{cycles} SM cycles per element")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
