"""Which op wrote each input of an op: what Inductor's fusion needs of a compiled region.

Followed by storage: a view reads what wrote its base, an op in place writes its input's
storage, any other output is a new storage its op wrote. An input whose storage no op of
the iteration wrote since dataflow was followed (a parameter, the batch) has no writer.
A storage's key is its address, which a later storage may get once it is freed: `forget`
drops the writer of a storage that died (memory.MemoryTracker says when).
"""

from . import compat


class Dataflow:
    def __init__(self):
        self._writers = {}  # storage key -> [op id, output index]

    @staticmethod
    def _key(tensor):
        identity = compat.storage_identity(tensor)
        return identity[0] if identity is not None else None

    def annotate(self, inputs, tensors):
        """Sets `from` on each input's metadata (`inputs`, parallel to `tensors`) that an
        earlier op wrote."""
        with compat.no_torch_function():
            for meta, tensor in zip(inputs, tensors):
                if meta is None or tensor is None:
                    continue
                writer = self._writers.get(self._key(tensor))
                if writer is not None:
                    meta["from"] = writer

    def forget(self, key):
        """The storage of `key` died: what gets its address next was not written by its op."""
        self._writers.pop(key, None)

    def wrote(self, op_id, inputs, outputs, in_place):
        """Op `op_id` read `inputs` and made or modified `outputs`."""
        with compat.no_torch_function():
            read = {self._key(t) for t in inputs if t is not None}
            for index, tensor in enumerate(outputs):
                key = self._key(tensor)
                if key is None or (key in read and not in_place):  # a view of an input
                    continue
                self._writers[key] = [op_id, index]
