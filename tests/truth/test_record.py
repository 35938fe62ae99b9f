"""bench/truth/record.py's sums that need no GPU."""

import os
import sys
import unittest
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "truth"))

import record  # noqa: E402


class UnionLengthTest(unittest.TestCase):
    def test_overlapping_spans_count_once_and_gaps_not_at_all(self):
        # Two streams: [0, 10] and [4, 12] overlap (12 covered), [20, 25] after a gap, and
        # [21, 22] inside it.
        self.assertEqual(record.union_length([(20, 25), (0, 10), (4, 12), (21, 22)]), 17)

    def test_spans_that_touch_join_and_nothing_covers_nothing(self):
        self.assertEqual(record.union_length([(0, 5), (5, 9)]), 9)
        self.assertEqual(record.union_length([]), 0)


def device_event(start, end, stream=7, annotation=False):
    from torch.autograd import DeviceType

    return SimpleNamespace(device_type=DeviceType.CUDA, is_user_annotation=annotation,
                           time_range=SimpleNamespace(start=start, end=end),
                           device_resource_id=stream)


class DeviceBusyTest(unittest.TestCase):
    def test_an_annotation_spanning_idle_gaps_is_not_busy_time(self):
        # Adam's kernels at [0, 2] and [10, 12], issued by a slow host; the profiler's
        # GPU-side `Optimizer.step#Adam.step` range covers [0, 12], the gap too.
        from torch.autograd import DeviceType

        host = SimpleNamespace(device_type=DeviceType.CPU, is_user_annotation=False,
                               time_range=SimpleNamespace(start=0, end=50), device_resource_id=0)
        events = [host, device_event(0, 2), device_event(10, 12),
                  device_event(0, 12, stream=8, annotation=True)]
        busy = record.device_busy(SimpleNamespace(events=lambda: events))
        self.assertEqual(busy, {"busy_us": 4, "streams": 1})


class HostPerOpTest(unittest.TestCase):
    def test_each_host_op_with_its_cpu_time_and_no_kernel_rows(self):
        from torch.autograd import DeviceType

        def average(key, cpu_us, count, device=DeviceType.CPU):
            return SimpleNamespace(key=key, self_cpu_time_total=cpu_us, count=count, device_type=device)

        averages = [average("aten::mm", 120.4567, 12), average("aten::view", 0, 40),
                    average("autograd::engine::evaluate_function: MmBackward0", 80, 12),
                    average("ampere_sgemm_128x64_nn", 5, 12, DeviceType.CUDA)]
        self.assertEqual(record.host_per_op(averages), {
            "aten::mm": {"self_cpu_us": 120.457, "count": 12},
            "autograd::engine::evaluate_function: MmBackward0": {"self_cpu_us": 80, "count": 12}})


if __name__ == "__main__":
    unittest.main()
