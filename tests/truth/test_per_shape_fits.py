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
import fit_attention  # noqa: E402
import fit_broadcast  # noqa: E402
import fit_embedding_backward  # noqa: E402
import fit_layer_norm  # noqa: E402
import fit_narrow_conv  # noqa: E402
import per_shape_fit  # noqa: E402

H100 = os.path.join(ROOT, "bench", "truth", "data", "h100", "truth.json") + ":H100-SXM"


def constant(name, source="vector_costs.cpp"):
    """The numbers of `constexpr ... name{...}` in predictor/src/`source`."""
    with open(os.path.join(ROOT, "predictor", "src", source), encoding="utf-8") as f:
        match = re.search(rf"{name}\{{([^;]*)\}};", f.read())
    if not match:
        raise AssertionError(f"{name} is not in {source}")
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
        self.assertEqual([fit_broadcast.fit(gpu, table)],
                         constant("kElementRateCycles", "family_costs.h"))


class EmbeddingBackward(unittest.TestCase):
    def test_the_fit_gives_the_shipped_cost(self):
        [(_, gpu, table)] = per_shape_fit.truth_files("", [H100], fit_embedding_backward.per_shape)
        self.assertGreater(len(table), 20)
        self.assertEqual(list(fit_embedding_backward.fit(gpu, table)), constant("kEmbeddingBackward"))


class NarrowConvolution(unittest.TestCase):
    def test_the_fit_gives_the_shipped_rates(self):
        [(_, gpu, table)] = per_shape_fit.truth_files("", [H100], fit_narrow_conv.per_shape)
        for kernel, name in (("data", "kNarrowConvData"), ("weight", "kNarrowConvWeightGradient")):
            rows = fit_narrow_conv.of_kernel(kernel)(table)
            self.assertGreater(len(rows), 15, kernel)
            cycles, share, fixed_us = fit_narrow_conv.fit(gpu, rows)
            self.assertEqual([fixed_us, cycles, share], constant(name, "roofline.cpp"), name)


class FusedAttention(unittest.TestCase):
    def test_the_fit_on_the_h100s_calibration_gives_the_shipped_rates(self):
        calibration = os.path.join(ROOT, "data", "calibration", "nvidia-h100-80gb-hbm3.json") + ":H100-SXM"
        [(_, gpu, table)] = per_shape_fit.truth_files("", [calibration], fit_attention.rows_of)
        for backend, name in (("flash", "kHopperFlashAttention"), ("efficient", "kHopperEfficientAttention"),
                              ("cudnn", "kHopperCudnnAttention")):
            fitted = []
            for backward in (False, True):
                rows = [r for r in table if r[0] == backend and r[1] == backward
                        and r[6] >= fit_attention.MIN_TOKENS]
                self.assertGreaterEqual(len(rows), 8, name)
                fitted += list(fit_attention.fit(gpu, rows))
            self.assertEqual(fitted, constant(name, "roofline.cpp"), name)


if __name__ == "__main__":
    unittest.main()
