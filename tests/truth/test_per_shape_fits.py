"""The per-shape kernel fits of bench/truth, run on the committed H100 truth, give the
constants predictor/src/vector_costs.cpp prices with: a refit that moves them, or a
constant edited by hand, fails here until the two agree again."""

import os
import re
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import fit_batch_norm  # noqa: E402
import fit_broadcast  # noqa: E402
import fit_layer_norm  # noqa: E402
import per_shape_fit  # noqa: E402

H100 = os.path.join(ROOT, "bench", "truth", "data", "h100", "truth.json") + ":H100-SXM"
with open(os.path.join(ROOT, "predictor", "src", "vector_costs.cpp"), encoding="utf-8") as f:
    SOURCE = f.read()


def constant(name):
    """The numbers of `constexpr ... name{...}` in vector_costs.cpp."""
    match = re.search(rf"{name}\{{([^;]*)\}};", SOURCE)
    if not match:
        raise AssertionError(f"{name} is not in vector_costs.cpp")
    return [float(x) for x in re.findall(r"[\d.]+", match.group(1))]


class LayerNorm(unittest.TestCase):
    def test_the_fit_gives_the_shipped_cycles(self):
        [(_, gpu, table)] = per_shape_fit.truth_files("", [H100], fit_layer_norm.per_shape)
        for backward, name in ((False, "kLayerNormForward"), (True, "kLayerNormBackward")):
            rows = {k: v for k, v in table.items() if k[0] == backward}
            self.assertEqual(list(fit_layer_norm.fit(gpu, rows)), constant(name), name)


class BatchNorm(unittest.TestCase):
    def test_the_fit_gives_the_shipped_blocks_and_work(self):
        [(_, gpu, table)] = per_shape_fit.truth_files("", [H100], fit_batch_norm.per_shape)
        for precision, name in (("fp32", "kCudnnBatchNorm"), ("bf16", "kNativeBatchNorm")):
            fitted = []
            for backward in (False, True):
                rows = {k: v for k, v in table.items() if k[0] == precision and k[1] == backward}
                fitted += list(fit_batch_norm.fit(gpu, rows))
            self.assertEqual(fitted, constant(name), name)


class BroadcastElementwise(unittest.TestCase):
    def test_the_fit_gives_the_shipped_cycles(self):
        [(_, gpu, table)] = per_shape_fit.truth_files("", [H100], fit_broadcast.per_shape)
        self.assertGreater(len(table), 40)
        self.assertEqual([fit_broadcast.fit(gpu, table)], constant("kElementRateCycles"))


if __name__ == "__main__":
    unittest.main()
