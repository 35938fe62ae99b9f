"""The daemon's worker traces warmup_model.py while it waits for its first request
(worker._warm_up): the traces after it are those of a worker that did not, and a request
that comes meanwhile stops it."""

import os
import unittest

from wavecast_tracer import worker
from wavecast_tracer.tracer import run_trace

SAMPLES = os.environ.get("WAVECAST_SAMPLES_DIR",
                         os.path.join(os.path.dirname(__file__), "..", "..", "samples"))


def _facts(document):
    return {key: value for key, value in document.items() if key != "trace_seconds"}


class WarmUpTest(unittest.TestCase):
    def setUp(self):
        self.sample = os.path.join(SAMPLES, "small_transformer.py")
        self.before = _facts(run_trace(self.sample))

    def test_a_warm_up_leaves_nothing_in_the_next_trace(self):
        self.assertTrue(worker._warm_up(run_trace, waiting=lambda: False))
        self.assertEqual(_facts(run_trace(self.sample)), self.before)

    def test_a_waiting_request_stops_it_and_the_next_trace_is_whole(self):
        phases = []

        def waiting():
            phases.append(None)
            return len(phases) > 2  # the request comes while it builds the model

        self.assertFalse(worker._warm_up(run_trace, waiting))
        self.assertEqual(len(phases), 3)  # it stopped at the first phase after the request came
        self.assertEqual(_facts(run_trace(self.sample)), self.before)


if __name__ == "__main__":
    unittest.main()
