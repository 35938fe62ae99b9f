"""bench/truth/record.py's sums that need no GPU."""

import os
import sys
import unittest

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


if __name__ == "__main__":
    unittest.main()
