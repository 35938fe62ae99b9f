"""How a script run as written loads its batches (batches.BatchLoading): in
the tracer's process, timed on this CPU, with the DataLoader workers the script asked for
recorded for the predictor."""

import importlib.util
import itertools
import textwrap
import unittest
from unittest import mock

from script_folder import REAL_SAMPLES, ScriptFolderCase
from wavecast_tracer import batches
from wavecast_tracer.tracer import run_trace

# Batches of 16 whose sample `index` sleeps 300 ms where `sleeps` holds.
SLEEPING_SAMPLES = """
import time
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

class Samples(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        if {sleeps}:
            time.sleep(0.3)
        return torch.randn(32), index % 10

model = nn.Linear(32, 10).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(Samples(), batch_size=16):
    loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


class LoadingTest(ScriptFolderCase):
    def test_a_batch_slowed_by_the_machine_is_timed_at_the_loaders_quickest(self):
        # The recorded iteration's batch takes 300 ms more than the warm-up's (as a busy
        # machine can make it): the loading is the least a batch of the loader took.
        path = self.write(SLEEPING_SAMPLES.format(sleeps="index == 16"))  # the recorded batch's first
        [loading] = [op for op in run_trace(path)["ops"] if op["name"] == "wavecast::data_loading"]
        self.assertLess(loading["args"]["host_ms"], 150)

    def test_a_batch_is_timed_without_the_time_it_waited_for_a_cpu(self):
        # Each batch takes 300 ms, of which the kernel says 250 were spent waiting for a CPU
        # other processes held: the batch's work is the other 50.
        path = self.write(SLEEPING_SAMPLES.format(sleeps="index % 16 == 0"))  # every batch's first
        waits = itertools.count(0, 250_000_000)  # read before and after each batch
        with mock.patch.object(batches, "waited_for_a_cpu_ns", lambda: next(waits)):
            [loading] = [op for op in run_trace(path)["ops"] if op["name"] == "wavecast::data_loading"]
        self.assertGreater(loading["args"]["host_ms"], 40)
        self.assertLess(loading["args"]["host_ms"], 200)

    def test_data_loading_records_the_workers_the_script_asked_for(self):
        # Loaded in this process while tracing; each batch's op keeps its loader and the
        # workers that make its batches on a GPU machine (the predictor overlaps them).
        path = self.write(REAL_SAMPLES + textwrap.dedent("""
            import torch.nn as nn

            data = Samples()
            train = DataLoader(data, batch_size=16, shuffle=True, num_workers=3, pin_memory=True)
            assert train.num_workers == 3, "reads back what the script asked for"
            extra = DataLoader(data, batch_size=16)
            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for (x, y), (x2, y2) in zip(train, extra):
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss = loss + nn.functional.cross_entropy(model(x2.cuda()), y2.cuda())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """))
        trace = run_trace(path)
        loads = [op["args"] for op in trace["ops"] if op["name"] == "wavecast::data_loading"]
        self.assertEqual(len(loads), 2, loads)
        by_loader = {args["loader"]: args for args in loads}
        self.assertEqual(sorted(by_loader), [0, 1])
        self.assertEqual(sorted(args.get("workers", 0) for args in loads), [0, 3])
        self.assertTrue(all(args["host_ms"] > 0 for args in loads))
        notes = [w for w in trace["warnings"] if w["kind"] == "host_time_measured"]
        self.assertEqual(sorted(w.get("count", 0) for w in notes), [0, 3], "a note for each kind of loading")

    def test_a_loader_accelerate_prepares_keeps_the_scripts_workers(self):
        # accelerator.prepare rebuilds the DataLoader from the script's, num_workers included.
        # Traced again with other settings in the same process, as the worker does after an
        # edit: Accelerate's process-wide state is the new trace's.
        for precision in ("no", "bf16"):
            with self.subTest(precision=precision):
                self.assert_prepared_loader_keeps_workers(precision)

    @unittest.skipIf(importlib.util.find_spec("accelerate") is None,
                     "accelerate is not installed in this Python environment (scripts/python-env/test.lock installs it)")
    def assert_prepared_loader_keeps_workers(self, precision):
        path = self.write(REAL_SAMPLES + textwrap.dedent(f"""
            import torch.nn as nn
            from accelerate import Accelerator

            accelerator = Accelerator(mixed_precision="{precision}")
            model = nn.Linear(32, 10)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = DataLoader(Samples(), batch_size=16, num_workers=2)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for x, y in loader:
                accelerator.backward(nn.functional.cross_entropy(model(x), y))
                optimizer.step()
                optimizer.zero_grad()
            """))
        loads = [op["args"] for op in run_trace(path)["ops"] if op["name"] == "wavecast::data_loading"]
        self.assertEqual([args.get("workers") for args in loads], [2])
