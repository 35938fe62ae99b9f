"""bench/truth/compare.py on CPU: per-line, per-family and per-iteration comparisons,
and a prediction scaled from another GPU (a saved measured trace) against a truth file."""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import compare  # noqa: E402

WAVECAST = os.environ.get("WAVECAST_BINARY", os.path.join(ROOT, "build", "bin", "wavecast"))
TRUTH = os.path.join(ROOT, "tests", "truth", "fixtures", "synthetic_small_cnn.json")
MEASURED = os.path.join(ROOT, "tests", "predictor", "fixtures", "measured_small_cnn.json")


class Lines(unittest.TestCase):
    def test_truth_lines_are_keyed_by_file_name_and_line(self):
        self.assertEqual(compare.truth_lines({"samples/a.py:3": 1500.0, "b/a.py:3": 500.0, "x": 1.0}),
                         {"a.py:3": 2.0})
        self.assertEqual(compare.line_key("/abs/samples/a.py", 3), "a.py:3")

    def test_line_error_counts_every_miss_against_the_truths_total(self):
        real = {"a.py:1": 8.0, "a.py:2": 2.0}
        self.assertEqual(compare.line_error({"a.py:1": 8.0, "a.py:2": 2.0}, real), 0.0)
        # 1 ms short on line 1, line 2 missing (2 ms), 1 ms on a line the truth lacks.
        self.assertAlmostEqual(compare.line_error({"a.py:1": 7.0, "a.py:9": 1.0}, real), 40.0)


class GpuTime(unittest.TestCase):
    def test_the_busy_time_where_recorded_else_the_kernel_sum_less_cuptis_overhead(self):
        per_op = {"aten::_cudnn_rnn": {"self_device_us": 9000.0, "count": 4},
                  "Activity Buffer Request": {"self_device_us": 30.0, "count": 1}}
        lines = {"kernel_sum_us": 12030.0, "per_op": per_op}
        self.assertAlmostEqual(compare.kernel_ms(lines), 12.0)
        # An RNN's layers overlapping on cuDNN's streams: the GPU was busy 9.03 ms.
        self.assertAlmostEqual(compare.kernel_ms(dict(lines, busy_us=9030.0, streams=3)), 9.0)


class Memory(unittest.TestCase):
    def test_the_larger_precision_is_compared_with_an_older_truths_one_peak(self):
        # An older truth's max_memory_allocated spans the FP32 and the bf16 iterations.
        truth = {"samples": {"a.py:8": {"peak_mem_bytes": 1000}, "b.py:1": {}}}
        rows = [{"run": "a.py:8", "predicted_peak_allocated_bytes": 900},
                {"run": "a.py:8", "predicted_peak_allocated_bytes": 1100},
                {"run": "a.py:8", "error": "failed"},
                {"run": "b.py:1", "predicted_peak_allocated_bytes": 5}]
        memory = compare.memory_rows(truth, rows)
        self.assertEqual(memory, [{"run": "a.py:8", "precision": "both", "predicted_bytes": 1100,
                                   "real_bytes": 1000, "ratio": 1.1}])
        self.assertAlmostEqual(compare.metrics({"rows": [], "memory": memory})["memory_mape"], 10.0)

    def test_each_precision_against_its_own_allocated_and_reserved_peaks(self):
        truth = {"samples": {"a.py:8": {"peak_mem_bytes": 1000}}}
        rows = [{"run": "a.py:8", "precision": "fp32", "peak_allocated_bytes": 1000,
                 "peak_reserved_bytes": 2000, "predicted_peak_allocated_bytes": 900,
                 "predicted_peak_reserved_bytes": 1500},
                {"run": "a.py:8", "precision": "bf16", "peak_allocated_bytes": 500,
                 "predicted_peak_allocated_bytes": 550, "predicted_peak_reserved_bytes": 600}]
        memory = compare.memory_rows(truth, rows)
        self.assertEqual([(m["precision"], m["ratio"]) for m in memory], [("fp32", 0.9), ("bf16", 1.1)])
        self.assertNotIn("real_reserved_bytes", memory[1], "that precision's reserved peak is unknown")
        figures = compare.metrics({"rows": [], "memory": memory})
        self.assertAlmostEqual(figures["memory_mape"], 10.0)
        self.assertAlmostEqual(figures["reserved_mape"], 25.0)


@unittest.skipUnless(os.path.exists(WAVECAST), f"no wavecast binary at {WAVECAST}")
class ScaledFromAnotherGpu(unittest.TestCase):
    def test_a_trace_measured_on_an_a100_against_h100_truth(self):
        with open(MEASURED, encoding="utf-8") as f:
            trace = json.load(f)
        trace["device"] = "NVIDIA A100-SXM4-80GB"  # as if measured there
        with tempfile.TemporaryDirectory() as traces:
            with open(os.path.join(traces, "small_cnn_64.json"), "w", encoding="utf-8") as f:
                json.dump(trace, f)
            options = ["--wavecast", WAVECAST, "--traces", traces, "--precision", "fp32", "--json"]
            out = io.StringIO()
            with redirect_stdout(out):
                status = compare.main([TRUTH] + options + ["--", "--roofline"])
        self.assertEqual(status, 0, out.getvalue())
        report = json.loads(out.getvalue().split("\nTruth:")[0])
        row = report["rows"][0]
        self.assertEqual(row["predicted_method"], "scaled from A100-SXM4-80GB")
        # The H100 runs the A100's kernels faster: the scaled sum is below the measured 0.1491 ms.
        self.assertLess(row["predicted_gpu_ms"], 0.1491)
        self.assertGreater(row["predicted_gpu_ms"], 0.03)
        self.assertEqual(set(row["predicted_lines"]) & set(row["truth_lines"]),
                         {"small_cnn.py:22", "small_cnn.py:26"})
        self.assertAlmostEqual(row["truth_lines"]["small_cnn.py:22"], 0.088)
        error = report["metrics"]["fp32_line_error"]
        self.assertGreater(error, 0)
        self.assertLess(error, 200)
        self.assertIn("conv", row["predicted_families"])
        self.assertAlmostEqual(row["truth_families"]["conv"], 0.07)
        self.assertEqual(report["memory"][0]["real_bytes"], 1000000)
        self.assertEqual(report["memory"][0]["predicted_bytes"], row["predicted_peak_allocated_bytes"])

    def test_markdown_has_the_line_table(self):
        with tempfile.TemporaryDirectory() as traces:
            with open(MEASURED, encoding="utf-8") as f, \
                    open(os.path.join(traces, "small_cnn_64.json"), "w", encoding="utf-8") as out_file:
                out_file.write(f.read())
            out = io.StringIO()
            with redirect_stdout(out):
                compare.main([TRUTH, "--wavecast", WAVECAST, "--traces", traces, "--precision", "fp32",
                              "--", "--roofline"])
        text = out.getvalue()
        self.assertIn("per-line error", text)
        self.assertIn("| small_cnn.py:22 | 0.118 | 0.088 |", text)  # measured on H100: its kernels
        self.assertIn("measured on H100-SXM", text)

    def test_a_bf16_run_is_compared_with_the_kernels_of_its_bf16_profile(self):
        # The truth recorded on an H100 in this repository has a bf16 profile per run.
        truth = os.path.join(ROOT, "bench", "truth", "data", "h100", "truth.json")
        with open(truth, encoding="utf-8") as f:
            measured = json.load(f)["samples"]["samples/small_cnn.py:64"]
        out = io.StringIO()
        with redirect_stdout(out):
            status = compare.main([truth, "--wavecast", WAVECAST, "--runs", "small_cnn.py:64",
                                   "--precision", "bf16", "--json"])
        self.assertEqual(status, 0, out.getvalue())
        report = json.loads(out.getvalue().split("\nTruth:")[0])
        row = report["rows"][0]
        self.assertEqual(row["precision"], "bf16")
        self.assertAlmostEqual(row["kernel_ms"], compare.kernel_ms(measured["bf16_lines"]))
        self.assertNotAlmostEqual(row["kernel_ms"], compare.kernel_ms(measured["lines"]))
        self.assertIn("conv", row["truth_families"])
        self.assertAlmostEqual(report["metrics"]["bf16_kernel_mape"],
                               compare.ape(row["predicted_gpu_ms"], row["kernel_ms"]))


@unittest.skipUnless(os.path.exists(WAVECAST), f"no wavecast binary at {WAVECAST}")
class RecordedH200(unittest.TestCase):
    """bf16 iterations recorded on an H200: batch norm and convolutions as PyTorch 2.11 and
    cuDNN 9.19 run them there, predicted with the H200's calibration (data/calibration) and
    with the models alone (--no-calibration), the figure for a GPU never calibrated."""

    TRUTH = os.path.join(ROOT, "bench", "truth", "data", "h200", "truth.json")

    def rows(self, runs, precision, *extra):
        out = io.StringIO()
        argv = [self.TRUTH, "--wavecast", WAVECAST, "--gpu", "H200", "--runs", runs,
                "--precision", precision, "--json"]
        with redirect_stdout(out):
            status = compare.main(argv + (["--", *extra] if extra else []))
        self.assertEqual(status, 0, out.getvalue())
        report = json.loads(out.getvalue().split("\nTruth:")[0])
        return {(r["run"], r["precision"]): r for r in report["rows"]}

    def test_bf16_kernel_time_and_its_batch_norm_from_the_models_alone(self):
        rows = self.rows("resnet50.py:32$|gpt2.py:1$", "bf16", "--no-calibration")
        self.assertEqual(set(rows), {("samples/resnet50.py:32", "bf16"),
                                     ("samples/gpt2.py:1", "bf16")})
        for run, row in rows.items():
            self.assertNotIn("calibrated", row["predicted_method"], run)
            self.assertLess(compare.ape(row["predicted_gpu_ms"], row["kernel_ms"]), 15.0, run)
        resnet = rows[("samples/resnet50.py:32", "bf16")]
        # PyTorch's own bf16 batch norm kernels; priced as float32 streams they were 0.4 of it.
        norm = resnet["predicted_families"]["norm"] / resnet["truth_families"]["norm"]
        self.assertGreater(norm, 0.75)
        self.assertLess(norm, 1.25)

    def test_calibrated_on_the_h200(self):
        rows = self.rows("resnet50.py:32$|gpt2.py:8$|moe.py:64$", "fp32,bf16")
        self.assertEqual(len(rows), 6)
        for key, row in rows.items():
            self.assertIn("calibrated on NVIDIA H200", row["predicted_method"], key)
            # Within 8% of the kernels each (1-7% at the calibration's commit), the mixture
            # of experts' loop over eight experts, with its router's real spread, included.
            self.assertLess(compare.ape(row["predicted_gpu_ms"], row["kernel_ms"]), 8.0, key)


if __name__ == "__main__":
    unittest.main()
