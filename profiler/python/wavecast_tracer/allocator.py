"""PyTorch's CUDA caching allocator, replayed on the tracer's allocation events: what it
reserves from the driver for a training iteration, its rounding and fragmentation
included (c10/cuda/CUDACachingAllocator.cpp, default settings: one stream, no
expandable segments, no max_split_size).

Requests are rounded up to 512 bytes. Those of at most 1 MiB come from 2 MiB segments,
larger ones under 10 MiB from 20 MiB segments, the rest from segments of their own
size rounded up to 2 MiB. A request takes the smallest free block of its pool that
fits, split when the rest is worth keeping (512 bytes in the small pool, more than
1 MiB in the large one); a freed block merges with its free neighbours. Segments stay
reserved: nothing is given back while the iteration runs.
"""

import bisect

_MIN_BLOCK = 512
_SMALL_SIZE = 1 << 20
_SMALL_BUFFER = 2 << 20
_LARGE_BUFFER = 20 << 20
_MIN_LARGE_ALLOC = 10 << 20
_ROUND_LARGE = 2 << 20


def _round_size(nbytes):
    return _MIN_BLOCK if nbytes < _MIN_BLOCK else (nbytes + _MIN_BLOCK - 1) // _MIN_BLOCK * _MIN_BLOCK


def _segment_size(size):
    if size <= _SMALL_SIZE:
        return _SMALL_BUFFER
    if size < _MIN_LARGE_ALLOC:
        return _LARGE_BUFFER
    return (size + _ROUND_LARGE - 1) // _ROUND_LARGE * _ROUND_LARGE


class _Block:
    __slots__ = ("size", "free", "prev", "next", "small")

    def __init__(self, size, small):
        self.size = size
        self.free = True
        self.prev = None  # address of the block before it in its segment
        self.next = None
        self.small = small


class CachingAllocator:
    """Blocks by address; free blocks per pool, ordered by (size, address) as the
    allocator's best fit searches them."""

    def __init__(self):
        self._blocks = {}
        self._free = {True: [], False: []}
        self._held = {}  # key -> address of its block
        self._next_segment = 0
        self.reserved_bytes = 0
        self.peak_reserved_bytes = 0

    def allocate(self, key, nbytes):
        size = _round_size(nbytes)
        small = size <= _SMALL_SIZE
        pool = self._free[small]
        index = bisect.bisect_left(pool, (size, -1))
        if index < len(pool):
            _, address = pool.pop(index)
        else:
            address = self._new_segment(_segment_size(size), small)
        block = self._blocks[address]
        block.free = False
        rest = block.size - size
        if rest >= _MIN_BLOCK if small else rest > _SMALL_SIZE:
            self._split(address, block, size, pool)
        self._held[key] = address

    def free(self, key):
        address = self._held.pop(key, None)
        if address is None:
            return
        block = self._blocks[address]
        block.free = True
        pool = self._free[block.small]
        following = self._blocks.get(block.next) if block.next is not None else None
        if following is not None and following.free:
            pool.remove((following.size, block.next))
            self._absorb(address, block, block.next, following)
        preceding = self._blocks.get(block.prev) if block.prev is not None else None
        if preceding is not None and preceding.free:
            pool.remove((preceding.size, block.prev))
            address, block = block.prev, self._absorb(block.prev, preceding, address, block)
        bisect.insort(pool, (block.size, address))

    def held(self):
        return list(self._held)

    def _new_segment(self, size, small):
        address = self._next_segment
        self._next_segment += size
        self._blocks[address] = _Block(size, small)
        self.reserved_bytes += size
        self.peak_reserved_bytes = max(self.peak_reserved_bytes, self.reserved_bytes)
        return address

    def _split(self, address, block, size, pool):
        rest_address = address + size
        rest = _Block(block.size - size, block.small)
        rest.prev, rest.next = address, block.next
        if block.next is not None:
            self._blocks[block.next].prev = rest_address
        block.next, block.size = rest_address, size
        self._blocks[rest_address] = rest
        bisect.insort(pool, (rest.size, rest_address))

    def _absorb(self, address, block, next_address, following):
        """`block` takes in the block after it; returns `block`."""
        block.size += following.size
        block.next = following.next
        if following.next is not None:
            self._blocks[following.next].prev = address
        del self._blocks[next_address]
        return block


def steady_state_reserved(baseline, persistent, gradients, events, iterations=3):
    """The most bytes the allocator reserves over `iterations` runs of one iteration's
    `events` ((storage serial, bytes delta, op index, phase), as the MemoryTracker keeps
    them), after `baseline` (the bytes of each storage live before the first: parameters,
    buffers, the batch). `persistent` ({serial: bytes}: optimizer state) is allocated
    where the first run's optimizer step begins, as a lazily built state is;
    `gradients` ({serial: (bytes, event index)}: those zero_grad(set_to_none=True)
    drops) die at that event of the next run. Storages an iteration leaves live (its
    loss, its outputs) die before the next one starts."""
    allocator = CachingAllocator()
    for index, nbytes in enumerate(baseline):
        allocator.allocate(("baseline", index), nbytes)
    optimizer_starts = next((i for i, event in enumerate(events) if event[3] == "optimizer"), None)
    if optimizer_starts is None:  # no step to build it in: there from the start
        for state, nbytes in persistent.items():
            allocator.allocate(("persistent", state), nbytes)
    drops = {}
    for serial, (_, position) in gradients.items():
        drops.setdefault(position, []).append(serial)
    for run in range(iterations):
        for index, (serial, delta, _, _) in enumerate(events):
            if run > 0:
                for dropped in drops.get(index, ()):
                    allocator.free(("gradient", dropped, run - 1))
            if run == 0 and index == optimizer_starts:
                for state, nbytes in persistent.items():
                    allocator.allocate(("persistent", state), nbytes)
            if serial in persistent:
                continue
            key = ("gradient" if serial in gradients else "tensor", serial, run)
            if delta > 0:
                allocator.allocate(key, delta)
            elif delta < 0:
                allocator.free(key)
        for key in allocator.held():
            if key[0] == "tensor" and key[2] == run:
                allocator.free(key)
    return allocator.peak_reserved_bytes
