"""bench/truth/compiled_report.py on CPU: torch.compile's recorded effect beside the
predictions, from the H200's committed compiled.json and made-up predictions; and the real
predictions of the compiled models against it."""

import json
import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import compiled_report  # noqa: E402

COMPILED = os.path.join(ROOT, "bench", "truth", "data", "h200", "compiled.json")
WAVECAST = os.environ.get("WAVECAST_BINARY", os.path.join(ROOT, "build", "bin", "wavecast"))


class Report(unittest.TestCase):
    def setUp(self):
        with open(COMPILED, encoding="utf-8") as f:
            self.compiled = json.load(f)

    def test_the_recorded_runs_compile_and_gpt2_bf16_gains_most(self):
        gpt2 = self.compiled["samples"]["samples/gpt2.py:8"]
        for precision in ("fp32", "bf16"):
            eager, built = gpt2[precision]["eager"], gpt2[precision]["compiled_default"]
            self.assertGreater(built["triton_us"], 0, precision)
            self.assertEqual(eager["triton_us"], 0, precision)
            self.assertLess(built["kernel_launches"], eager["kernel_launches"], precision)
        bf16 = gpt2["bf16"]
        self.assertGreater(bf16["eager"]["kernel_sum_us"] / bf16["compiled_default"]["kernel_sum_us"],
                           1.5)

    def test_each_row_holds_the_speed_up_triton_share_and_the_predictions_errors(self):
        run = self.compiled["samples"]["samples/gpt2.py:8"]["bf16"]
        compiled_wall = run["compiled_default"]["median_ms"]
        compiled_kernels = run["compiled_default"]["kernel_sum_us"] / 1e3
        key = ("samples/gpt2.py:8", "bf16")
        peak = run["compiled_default"]["peak_allocated_bytes"]
        predicted = {key: {"predicted_wall_ms": compiled_wall * 1.1,
                           "predicted_gpu_ms": compiled_kernels * 0.8,
                           "predicted_peak_allocated_bytes": peak * 1.02}}
        eager = {key: {"predicted_wall_ms": 2 * compiled_wall,
                       "predicted_peak_allocated_bytes": peak * 1.25}}
        text = compiled_report.report(self.compiled, predicted, eager)
        row = next(line for line in text.splitlines()
                   if line.startswith("| samples/gpt2.py:8 | bf16 |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        speed_up = run["eager"]["median_ms"] / compiled_wall
        self.assertEqual(cells[4], f"{speed_up:.2f}x")
        share = 100 * run["compiled_default"]["triton_us"] / run["compiled_default"]["kernel_sum_us"]
        self.assertEqual(cells[6], f"{share:.0f}%")
        self.assertEqual(cells[10], "20%")  # kernels
        self.assertEqual(cells[12], "10%")  # wall
        self.assertEqual(cells[13], "100%")  # the eager prediction against the compiled wall
        real_peaks = f"{run['eager']['peak_allocated_bytes'] / 1e9:.2f} → {peak / 1e9:.2f}"
        self.assertEqual(cells[14:], [real_peaks, f"{peak * 1.02 / 1e9:.2f}", "2.0%", "25.0%"])
        self.assertIn("Over 1 run, the compiled prediction's MAPE: **20.0%** against the compiled "
                      "kernel time, **10.0%** against the compiled wall time; the eager prediction's "
                      "against the compiled wall time: 100.0%.", text)
        self.assertIn("Peak allocated memory: the compiled prediction's MAPE against the compiled "
                      "runs' is **2.0%**; the eager prediction's, 25.0%.", text)
        # Runs without a prediction show dashes and stay out of the MAPE.
        other = next(line for line in text.splitlines()
                     if line.startswith("| samples/gpt2.py:8 | fp32 |"))
        self.assertTrue(other.rstrip().endswith("| – | – | – | – | – | 23.92 → 23.91 | – | – | – |"), other)


@unittest.skipUnless(os.path.exists(WAVECAST), "needs the built wavecast (build/bin/wavecast)")
class CompiledPredictions(unittest.TestCase):
    """The compiled models of the H200's compiled.json predicted as Inductor runs them."""

    def test_within_a_quarter_of_the_compiled_kernels_and_nearer_than_eager(self):
        with open(COMPILED, encoding="utf-8") as f:
            runs = list(json.load(f)["samples"])
        truth = os.path.join(os.path.dirname(COMPILED), "truth.json")
        compiled = compiled_report.predictions(truth, runs, "H200", WAVECAST, "default")
        eager = compiled_report.predictions(truth, runs, "H200", WAVECAST)
        with open(COMPILED, encoding="utf-8") as f:
            samples = json.load(f)["samples"]
        self.assertEqual(len(compiled), 4)
        for (run, precision), row in compiled.items():
            real = samples[run][precision]["compiled_default"]
            kernels = real["kernel_sum_us"] / 1e3
            # 2-22% at this commit: GPT-2 bf16's attention softmax and dropout kernels run
            # slower than their traffic (docs/accuracy.md).
            self.assertLess(compiled_report.compare.ape(row["predicted_gpu_ms"], kernels), 25.0,
                            (run, precision))
            self.assertLess(abs(row["predicted_gpu_ms"] - kernels),
                            abs(eager[(run, precision)]["predicted_gpu_ms"] - kernels), (run, precision))
            # What AOTAutograd's partitioner saves for backward: 0.1-3.5% at this commit.
            peak = real["peak_allocated_bytes"]
            self.assertLess(compiled_report.compare.ape(row["predicted_peak_allocated_bytes"], peak), 5.0,
                            (run, precision))
        # GPT-2 in bf16 keeps the attention scores, not softmax's float32 output: 2.4 GB less,
        # which the eager prediction does not know.
        key = ("samples/gpt2.py:8", "bf16")
        peak = samples[key[0]]["bf16"]["compiled_default"]["peak_allocated_bytes"]
        self.assertLess(compiled_report.compare.ape(compiled[key]["predicted_peak_allocated_bytes"], peak), 2.0)
        self.assertGreater(compiled_report.compare.ape(eager[key]["predicted_peak_allocated_bytes"], peak), 10.0)


if __name__ == "__main__":
    unittest.main()
