"""bench/truth/repeatability.py: two real recordings of one GPU model against each other."""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import repeatability  # noqa: E402


def run(wall, kernel_us=None, bf16_wall=None, own_peaks=None, peak=None):
    """One truth run: FP32 wall (ms), optional FP32 kernel sum (us), bf16 wall, and either
    each precision's own peak (fp32, bf16) or an older run-wide one."""
    out = {"fp32_default": {"median_ms": wall}}
    if kernel_us is not None:
        out["lines"] = {"kernel_sum_us": kernel_us,
                        "per_op": {"Activity Buffer Request": {"self_device_us": 20.0, "count": 1}}}
    if bf16_wall is not None:
        out["bf16_autocast"] = {"median_ms": bf16_wall}
    if own_peaks:
        out["fp32_default"]["peak_allocated_bytes"] = own_peaks[0]
        out["bf16_autocast"]["peak_allocated_bytes"] = own_peaks[1]
    if peak is not None:
        out["peak_mem_bytes"] = peak
    return out


def truth(device, samples, recorded=None):
    out = {"device": device, "samples": samples}
    if recorded:
        out["recorded"] = recorded
    return out


H100 = "NVIDIA H100 80GB HBM3"


class Repeatability(unittest.TestCase):
    def setUp(self):
        # An older file (run-wide peaks, no bf16 kernels) and a newer one of the same GPU.
        self.first = truth(H100, {
            "samples/a.py:8": run(10.0, kernel_us=5020.0, bf16_wall=20.0, peak=1000),
            "samples/b.py:1": run(40.0, kernel_us=30020.0),
            "samples/only_first.py:1": run(1.0),
        })
        self.second = truth(H100, {
            "samples/a.py:8": run(12.0, kernel_us=5070.0, bf16_wall=15.0, own_peaks=(900, 1100)),
            "samples/b.py:1": run(40.0, kernel_us=30320.0),
            "samples/only_second.py:1": run(1.0),
        }, recorded="2026-11-27")

    def test_runs_both_have_compared_as_a_prediction_is(self):
        rows = repeatability.rows(self.first, self.second)
        self.assertEqual([(r["run"], r["precision"]) for r in rows],
                         [("samples/a.py:8", "fp32"), ("samples/a.py:8", "bf16"), ("samples/b.py:1", "fp32")])
        # GPU time as compare.py reads it: the kernel sum less CUPTI's buffer requests.
        self.assertEqual(rows[0]["gpu_ms"], (5.0, 5.05))
        self.assertNotIn("gpu_ms", rows[1])
        # The run's peak over its precisions (the newer file's bf16 peak), once per run.
        self.assertEqual(rows[0]["peak_bytes"], (1000, 1100))
        self.assertNotIn("peak_bytes", rows[1])
        self.assertNotIn("peak_bytes", rows[2])  # neither file has b.py's peak

        summary = repeatability.summary(rows)
        self.assertAlmostEqual(summary["fp32_gpu_ms"][0], (1.0 + 1.0) / 2)  # 5.05/5, 30.3/30
        self.assertEqual(summary["fp32_gpu_ms"][1], 2)
        self.assertAlmostEqual(summary["fp32_wall_ms"][0], (20.0 + 0.0) / 2)
        self.assertAlmostEqual(summary["bf16_wall_ms"][0], 25.0)
        self.assertEqual(summary["bf16_gpu_ms"][1], 0)
        self.assertAlmostEqual(summary["fp32_peak_bytes"][0], 10.0)

    def test_markdown_and_the_files_it_refuses(self):
        folder = self.enterContext(tempfile.TemporaryDirectory())
        paths = []
        for name, doc in (("first", self.first), ("second", self.second),
                          ("h200", truth("NVIDIA H200", self.second["samples"]))):
            paths.append(os.path.join(folder, f"{name}.json"))
            with open(paths[-1], "w") as f:
                json.dump(doc, f)
        out = os.path.join(folder, "out.md")
        self.assertEqual(repeatability.main([paths[0], paths[1], "--markdown", out]), 0)
        with open(out) as f:
            text = f.read()
        self.assertIn("(NVIDIA H100 80GB HBM3, recorded 2026-11-27) against", text)
        self.assertIn("no date in the file", text)
        self.assertIn("- FP32, wall time: **10.0%** mean absolute difference (2 runs)", text)
        self.assertIn("| samples/a.py:8 | bf16 | – | 20.0 / 15.0 | 25% |", text)
        with redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
            repeatability.main([paths[0], paths[2]])
        self.assertIn("different GPUs", err.getvalue())
        lonely = os.path.join(folder, "lonely.json")
        with open(lonely, "w") as f:
            json.dump(truth(H100, {"samples/c.py:2": run(3.0)}), f)
        with redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
            repeatability.main([paths[0], lonely])
        self.assertIn("no run in common", err.getvalue())


if __name__ == "__main__":
    unittest.main()
