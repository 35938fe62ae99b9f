"""The caching allocator replay (profiler/python/wavecast_tracer/allocator.py): segment
sizes, best fit, splitting and merging as c10's CUDACachingAllocator does them, and the
steady-state reservation of an iteration's events."""

import unittest

from wavecast_tracer.allocator import CachingAllocator, steady_state_reserved

MiB = 1 << 20


def replayed(*steps):
    """An allocator after `steps`: (key, bytes) allocates, a key alone frees."""
    allocator = CachingAllocator()
    for step in steps:
        if isinstance(step, tuple):
            allocator.allocate(*step)
        else:
            allocator.free(step)
    return allocator


class Segments(unittest.TestCase):
    def test_each_pool_reserves_its_segment_size(self):
        cases = [(100, 2 * MiB),  # small: 2 MiB segments
                 (1 * MiB, 2 * MiB),
                 (1 * MiB + 1, 20 * MiB),  # large under 10 MiB: 20 MiB segments
                 (9 * MiB, 20 * MiB),
                 (10 * MiB, 10 * MiB),  # 10 MiB and over: its own, rounded up to 2 MiB
                 (11 * MiB, 12 * MiB)]
        for nbytes, reserved in cases:
            with self.subTest(nbytes=nbytes):
                allocator = CachingAllocator()
                allocator.allocate("x", nbytes)
                self.assertEqual(allocator.reserved_bytes, reserved)

    def test_a_segment_is_split_and_its_rest_serves_the_next_requests(self):
        allocator = CachingAllocator()
        for key in range(4):
            allocator.allocate(key, 4 * MiB)  # 16 MiB of one 20 MiB segment
        self.assertEqual(allocator.reserved_bytes, 20 * MiB)
        allocator.allocate("fifth", 4 * MiB)  # 4 MiB left: fits, nothing split off
        self.assertEqual(allocator.reserved_bytes, 20 * MiB)
        allocator.allocate("sixth", 2 * MiB)
        self.assertEqual(allocator.reserved_bytes, 40 * MiB)
        small = CachingAllocator()
        for key in range(4):
            small.allocate(key, 512 * 1024)  # four half-MiB blocks of one 2 MiB segment
        self.assertEqual(small.reserved_bytes, 2 * MiB)

    def test_freed_neighbours_merge_and_the_best_fit_is_taken(self):
        # b merges with a and with the 12 MiB left: 20 MiB free again.
        allocator = replayed(("a", 4 * MiB), ("b", 4 * MiB), "a", "b", ("c", 18 * MiB))
        self.assertEqual(allocator.reserved_bytes, 20 * MiB)
        allocator.free("c")
        allocator.allocate("d", 30 * MiB)
        allocator.free("d")
        # A 3 MiB request takes the 20 MiB block (the smaller fit), not the 30 MiB one.
        allocator.allocate("e", 3 * MiB)
        allocator.allocate("f", 28 * MiB)
        self.assertEqual(allocator.reserved_bytes, 50 * MiB)

    def test_fragmentation_reserves_a_segment_though_enough_bytes_are_free(self):
        # Two 12 MiB segments: blocks never merge across segments.
        allocator = replayed(("a", 12 * MiB), ("b", 12 * MiB), "a", "b", ("c", 14 * MiB))
        self.assertEqual(allocator.reserved_bytes, 38 * MiB)


class SteadyState(unittest.TestCase):
    def test_an_iteration_reuses_the_segments_of_the_one_before(self):
        events = [(1, 12 * MiB, 0, "forward"), (2, 12 * MiB, 1, "forward"),
                  (1, -12 * MiB, None, None), (2, -12 * MiB, None, None)]
        # The parameter's 20 MiB segment keeps 16 MiB free, where the first 12 MiB tensor
        # goes; the second needs a segment of its own, and every later run reuses both.
        self.assertEqual(steady_state_reserved([4 * MiB], {}, {}, events), 20 * MiB + 12 * MiB)

    def test_optimizer_state_is_made_in_the_first_step_and_gradients_die_at_zero_grad(self):
        events = [(1, 12 * MiB, 0, "forward"),  # an activation
                  (2, 16 * MiB, 1, "backward"),  # the gradient
                  (1, -12 * MiB, None, None),
                  (3, 12 * MiB, 2, "optimizer"),  # a temporary of the step
                  (3, -12 * MiB, None, None)]
        # The state is made where the first step begins: in the activation's freed
        # 12 MiB segment; the step's temporary then needs one of its own. The gradient
        # of one iteration is freed at event 0 of the next, before the next is made.
        reserved = steady_state_reserved([], {9: 12 * MiB}, {2: (16 * MiB, 0)}, events)
        self.assertEqual(reserved, 12 * MiB + 16 * MiB + 12 * MiB)
        # Freed only after the next iteration made its own, the gradient needs a segment more.
        kept = steady_state_reserved([], {9: 12 * MiB}, {2: (16 * MiB, 2)}, events)
        self.assertEqual(kept, 12 * MiB + 16 * MiB + 12 * MiB + 16 * MiB)


if __name__ == "__main__":
    unittest.main()
