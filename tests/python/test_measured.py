"""Measured mode's bookkeeping without a GPU: tagging ops for CUPTI, the median over
repeats, what reaches the trace, and the errors where no GPU is."""

import os
import threading
import unittest

import torch

from wavecast_tracer import measured
from wavecast_tracer.errors import TraceError
from wavecast_tracer.tracer import run_trace

SAMPLES = os.environ.get("WAVECAST_SAMPLES_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "samples"))


class FakeSession:
    """Records push/pop per thread, as CUPTI keeps one correlation stack per thread."""

    def __init__(self):
        self.stacks = {}
        self.tagged = []  # (thread, id) at the moment an op ran

    def push_op(self, external_id):
        self.stacks.setdefault(threading.get_ident(), []).append(external_id)

    def pop_op(self):
        self.stacks[threading.get_ident()].pop()

    def current(self):
        stack = self.stacks.get(threading.get_ident(), [])
        return stack[-1] if stack else None


def kernel(ms, name="k"):
    return {"name": name, "grid": [1, 1, 1], "block": [32, 1, 1], "registers_per_thread": 8,
            "static_shared_bytes": 0, "dynamic_shared_bytes": 0, "duration_ms": ms}


class Tagging(unittest.TestCase):
    def test_each_op_is_tagged_on_the_thread_that_runs_it(self):
        session = FakeSession()
        seen = {}

        def op(name):
            seen[name] = (threading.get_ident(), session.current())

        measured.tagged(session, measured.correlation_id(0, 3), op, ("forward",), {})
        # Autograd runs backward ops on its own thread: the id is pushed there.
        worker = threading.Thread(target=measured.tagged,
                                  args=(session, measured.correlation_id(2, 4), op, ("backward",), {}))
        worker.start()
        worker.join()
        self.assertEqual(seen["forward"], (threading.get_ident(), 3))
        self.assertEqual(seen["backward"][1], (2 << 32) | 4)
        self.assertNotEqual(seen["backward"][0], threading.get_ident())
        self.assertTrue(all(not stack for stack in session.stacks.values()), "every push popped")

    def test_a_failing_op_still_pops(self):
        session = FakeSession()

        def fails():
            raise RuntimeError("CUDA out of memory")

        with self.assertRaises(RuntimeError):
            measured.tagged(session, 1, fails, (), {})
        self.assertIsNone(session.current())

    def test_repeats_tag_the_ops_the_recorder_records_in_order(self):
        session = FakeSession()
        ids = []
        original = session.push_op
        session.push_op = lambda external_id: (ids.append(external_id), original(external_id))
        x = torch.ones(4, 4)
        mode = measured.RepeatMode(session, 2, lambda name: name != "aten::detach")
        with mode:
            y = torch.relu(x @ x).detach().sum()
        self.assertEqual(mode.names, ["aten::mm", "aten::relu", "aten::sum"])
        self.assertEqual(ids, [(2 << 32) | 0, (2 << 32) | 1, (2 << 32) | 2])
        self.assertEqual(float(y), 64.0)


class Repeats(unittest.TestCase):
    def test_each_kernel_is_its_median_over_the_repeats(self):
        cid = measured.correlation_id
        kernels = {
            cid(0, 0): [kernel(0.10, "gemm"), kernel(0.02, "bias")],
            cid(1, 0): [kernel(0.30, "gemm"), kernel(0.02, "bias")],  # a slow outlier
            cid(2, 0): [kernel(0.11, "gemm"), kernel(0.04, "bias")],
            cid(0, 1): [kernel(0.01)], cid(1, 1): [kernel(0.01)], cid(2, 1): [kernel(0.01)],
        }
        combined = measured.combine_repeats(kernels, op_count=3, repeats=[0, 1, 2])
        gemm, bias = combined[0][0]
        self.assertEqual((gemm["name"], gemm["duration_ms"]), ("gemm", 0.11))
        self.assertEqual(bias["duration_ms"], 0.02)
        self.assertAlmostEqual(combined[0][1], 0.13)
        self.assertEqual(combined[2], ([], 0), "an op that launched nothing took no GPU time")

    def test_repeats_with_other_kernels_keep_the_median_repeat(self):
        cid = measured.correlation_id
        kernels = {cid(0, 0): [kernel(0.5)], cid(1, 0): [kernel(0.1), kernel(0.1)],
                   cid(2, 0): [kernel(0.9)]}
        kernels_, total = measured.combine_repeats(kernels, 1, [0, 1, 2])[0]
        self.assertEqual(len(kernels_), 1)
        self.assertEqual(total, 0.5)

    def test_skipped_repeats_are_not_read(self):
        cid = measured.correlation_id
        kernels = {cid(0, 0): [kernel(0.2)], cid(1, 0): [kernel(9.0)], cid(2, 0): [kernel(0.2)]}
        self.assertEqual(measured.combine_repeats(kernels, 1, [0, 2])[0][1], 0.2)

    def test_attach_writes_the_measurements_and_says_what_was_left_out(self):
        ops = [{"name": "aten::mm"}, {"name": "aten::view"}]
        collected = {"kernels": {0: [kernel(0.25)], 1 << 32: [kernel(0.35)]}, "dropped": 3,
                     "unmatched": 4, "unmatched_ms": 0.8}
        warnings = measured.attach(ops, collected, repeats=[0, 1], skipped_repeats=[2, 3])
        self.assertEqual(ops[0]["measured"], {"time_ms": 0.3, "repeats": 2})
        self.assertEqual(ops[0]["kernels"][0]["duration_ms"], 0.3)
        self.assertEqual(ops[1]["measured"]["time_ms"], 0.0)
        self.assertEqual(ops[1]["kernels"], [])
        self.assertEqual(warnings, [
            {"kind": "cupti_dropped", "severity": "warning", "count": 3},
            {"kind": "kernels_outside_ops", "severity": "info", "count": 4, "ms": 0.2},
            {"kind": "repeat_skipped", "severity": "warning", "repeat": 3},
            {"kind": "repeat_skipped", "severity": "warning", "repeat": 4},
        ])


@unittest.skipIf(torch.cuda.is_available(), "a GPU is present: tests/profiler/gpu_measured_test.py runs")
class WithoutAGpu(unittest.TestCase):
    def test_measured_mode_says_there_is_no_gpu(self):
        with self.assertRaises(TraceError) as caught:
            run_trace(os.path.join(SAMPLES, "small_cnn.py"), batch_size=2, mode="cuda")
        self.assertEqual(caught.exception.kind, "environment_error")
        self.assertIn("no CUDA GPU visible to torch", caught.exception.message)
        self.assertIn("shape mode", caught.exception.hint)


if __name__ == "__main__":
    unittest.main()
