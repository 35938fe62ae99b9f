#!/usr/bin/env python3
"""Fits the cost of PyTorch's embedding backward on CUDA (predictor/src/vector_costs.cpp,
kEmbeddingBackward) to the per-shape kernel times of a truth file.

embedding_dense_backward_cuda zeroes the weight's gradient (a fill of its own, which the
profile books under aten::fill_), sorts the indices, finds each index's run of tokens and
sums each run's gradient rows into partial sums before writing them out: several small
kernels whatever the batch, then work per gradient element that runs well below the
bandwidth (about 0.2 TB/s on an H100). It is priced as a fixed time plus `cycles` SM cycles
per gradient element spread over the SMs at the boost clock, or the gradient's bytes at the
bandwidth where that is longer, and at least the launch floor. It picks the pair with the
least mean |log error| on the first truth file's rows (fp32 runs and bf16 autocast runs:
the embedding stays in float32 under autocast) and reports the error there and on the
others. Files are named with wavecast's id of their GPU (data/gpus.json), as
`compare.py --gpu` takes it.

    bench/truth/fit_embedding_backward.py bench/truth/data/h100/truth.json:H100-SXM \\
        bench/truth/data/h200/truth.json:H200
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import per_shape_fit  # noqa: E402

ELEMENT_BYTES = 4


def per_shape(truth):
    """{(precision field, gradient shape): kernel us} of every embedding backward."""
    out = {}
    for run in truth["samples"].values():
        for field in ("lines", "bf16_lines"):
            for row in (run.get(field) or {}).get("per_shape", []):
                if row["op"] == "aten::embedding_dense_backward":
                    out[(field, tuple(row["input_shapes"][0]))] = row["self_device_us"] / row["count"]
    return out


def predicted_us(gpu, key, parameters):
    fixed_us, cycles = parameters
    elements = math.prod(key[1])
    compute = elements * cycles / (gpu.sms * gpu.clock_hz) * 1e6
    memory = 2 * elements * ELEMENT_BYTES / gpu.bandwidth * 1e6
    return max(per_shape_fit.LAUNCH_FLOOR_US, fixed_us + max(compute, memory))


def fit(gpu, rows):
    def loss(parameters):
        return per_shape_fit.mean_log_error(lambda key: predicted_us(gpu, key, parameters), rows)

    return min(((f, c / 100) for f in range(0, 61) for c in range(0, 1001, 5)), key=loss)


def main(argv=None):
    files = per_shape_fit.truth_files(__doc__.splitlines()[0], argv, per_shape)
    per_shape_fit.fit_each(files, [("embedding backward", lambda table: table)], fit, predicted_us,
                           lambda p: f"{p[0]} us and {p[1]} SM cycles per gradient element")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
