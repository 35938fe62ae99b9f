"""bench/truth/compiled_report.py on CPU: torch.compile's recorded effect beside the eager
prediction, from the H200's committed compiled.json and made-up predictions."""

import json
import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import compiled_report  # noqa: E402

COMPILED = os.path.join(ROOT, "bench", "truth", "data", "h200", "compiled.json")


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

    def test_each_row_holds_the_speed_up_triton_share_and_the_eager_predictions_error(self):
        run = self.compiled["samples"]["samples/gpt2.py:8"]["bf16"]
        compiled_wall = run["compiled_default"]["median_ms"]
        predicted = {("samples/gpt2.py:8", "bf16"): {"predicted_wall_ms": 2 * compiled_wall}}
        text = compiled_report.report(self.compiled, predicted)
        row = next(line for line in text.splitlines()
                   if line.startswith("| samples/gpt2.py:8 | bf16 |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        speed_up = run["eager"]["median_ms"] / compiled_wall
        self.assertEqual(cells[4], f"{speed_up:.2f}x")
        share = 100 * run["compiled_default"]["triton_us"] / run["compiled_default"]["kernel_sum_us"]
        self.assertEqual(cells[7], f"{share:.0f}%")
        self.assertEqual(cells[-1], "100%")
        self.assertIn("over 1 run.", text)
        # Runs without a prediction show dashes and stay out of the MAPE.
        other = next(line for line in text.splitlines()
                     if line.startswith("| samples/gpt2.py:8 | fp32 |"))
        self.assertTrue(other.rstrip().endswith("| – | – |"), other)


if __name__ == "__main__":
    unittest.main()
