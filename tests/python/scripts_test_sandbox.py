"""A script run as written cannot harm the user's files or machine (sandbox.py), and each
thing tracing refuses is one clear error at the script's line."""

import os
import signal
import tempfile
import textwrap
import unittest

import torch

from wavecast_tracer.errors import TraceError, TraceInterrupted
from wavecast_tracer.tracer import run_trace

HAS_TRANSFORMERS = __import__("importlib").util.find_spec("transformers") is not None

# Two optimizer steps of a small model, as a training script's loop would run them.
TRAIN = """
import torch
model = torch.nn.Linear(8, 8).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    model(torch.randn(4, 8, device="cuda")).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def listing(folder):
    """Every file and folder under `folder`, with each file's bytes."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            found[os.path.relpath(os.path.join(root, name), folder)] = None
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = f.read()
    return found


class ScriptCase(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="wavecast-script-test-")

    def write(self, source, name="train.py"):
        path = os.path.join(self.folder, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(source))
        return path

    def line(self, path, text):
        with open(path) as f:
            return next(number for number, line in enumerate(f, 1) if text in line)

    def error(self, path, *args):
        with self.assertRaises(TraceError) as caught:
            run_trace(path, script_args=list(args))
        return caught.exception


class StubbedWrites(ScriptCase):
    def test_writes_leave_the_folder_as_it_was(self):
        path = self.write("""
            import os, pathlib, shutil, torch
            os.makedirs("out/ckpt", exist_ok=True)
            with open("out/log.txt", "w") as log:
                log.write("epoch 0")
            pathlib.Path("notes.txt").write_text("hello")
            with open("out/log.txt") as log:
                assert log.read() == "epoch 0"  # the script reads back what it wrote
            os.remove("data.txt")
            os.rename("keep.txt", "moved.txt")
            shutil.rmtree("out")
            model = torch.nn.Linear(8, 8).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                model(torch.randn(4, 8, device="cuda")).sum().backward()
                optimizer.step()
                torch.save(model.state_dict(), f"out/ckpt/{step}.pt")
            """)
        for name, text in (("data.txt", "1,2,3"), ("keep.txt", "mine")):
            with open(os.path.join(self.folder, name), "w") as f:
                f.write(text)
        before = listing(self.folder)
        trace = run_trace(path)
        self.assertEqual(listing(self.folder), before)
        stubbed = [(w["call"], w["line"]) for w in trace["warnings"] if w["kind"] == "call_stubbed"]
        self.assertEqual(stubbed, [("torch.save", self.line(path, "torch.save("))])


class RefusedCalls(ScriptCase):
    def assert_blocked(self, source, text, message):
        path = self.write(source)
        error = self.error(path)
        self.assertEqual((error.kind, error.file, error.line), ("blocked_call", path, self.line(path, text)))
        self.assertIn(message, error.message)
        self.assertTrue(error.hint)
        return error

    def test_sys_exit(self):
        self.assert_blocked("import sys\nsys.exit(3)\n", "sys.exit(3)", "sys.exit(3)")

    def test_argparse_error_exits_at_parse_args(self):
        path = self.write("import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', type=float)\n"
                          "p.parse_args()\n")
        error = self.error(path, "--lr", "fast")
        self.assertEqual((error.kind, error.line), ("blocked_call", 4))
        self.assertIn("sys.exit(2)", error.message)
        self.assertIn("invalid float value: 'fast'", error.output)

    def test_input(self):
        self.assert_blocked("answer = input('continue? ')\n", "input(", "input()")

    def test_subprocess(self):
        self.assert_blocked("import subprocess\nsubprocess.run(['true'])\n", "subprocess.run", "a subprocess")

    def test_multiprocessing(self):
        self.assert_blocked("import multiprocessing\n"
                            "multiprocessing.Process(target=print).start()\n", ".start()", "multiprocessing")

    def test_download(self):
        error = self.assert_blocked("import urllib.request\n"
                                    "urllib.request.urlopen('https://example.com/data.csv')\n",
                                    "urlopen", "example.com")
        self.assertIn("never downloads", error.hint)

    @unittest.skipUnless(HAS_TRANSFORMERS, "transformers is not installed in this Python environment")
    def test_hub_download(self):
        error = self.assert_blocked("from transformers import AutoModel\n"
                                    "AutoModel.from_pretrained('wavecast-tests/no-such-model')\n",
                                    "from_pretrained", "download")
        self.assertIn("HF_HUB_OFFLINE", error.hint)


class Steps(ScriptCase):
    def test_a_script_that_ends_after_one_step_says_so(self):
        path = self.write(TRAIN.replace("range(3)", "range(1)"))
        error = self.error(path)
        self.assertEqual(error.kind, "no_training_step")
        self.assertIn("after 1 optimizer step", error.message)

    def test_time_out_before_the_second_step_names_the_line(self):
        path = self.write(TRAIN.replace("    optimizer.zero_grad()\n",
                                        "    optimizer.zero_grad()\n    while True:\n        pass\n"))

        def interrupt(*_):  # what the worker's SIGUSR1 handler does at the time-out
            raise TraceInterrupted()

        previous = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 20)
        try:
            error = self.error(path)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        self.assertEqual((error.kind, error.line), ("timeout", self.line(path, "while True")))
        self.assertIn("second optimizer step", error.message)
        self.assertIn("1 optimizer step so far", error.message)

    def test_providers_win_over_the_main_block(self):
        path = self.write("""
            import torch
            def wavecast_model():
                return torch.nn.Linear(8, 8)
            def wavecast_input(batch_size=4):
                return (torch.randn(batch_size, 8),)
            def wavecast_iteration(model):
                return lambda x: model(x).sum().backward()
            if __name__ == "__main__":
                raise SystemExit("the main block must not run")
            """)
        trace = run_trace(path)
        self.assertEqual(trace["providers"]["model"], self.line(path, "def wavecast_model"))

    def test_cuda_answers_as_the_target_gpu(self):
        path = self.write(textwrap.dedent("""
            import torch
            properties = torch.cuda.get_device_properties(0)
            assert torch.cuda.is_available()
            assert properties.name == "NVIDIA A100-SXM4-40GB", properties.name
            assert properties.total_memory == 40 * 2**30
            assert torch.cuda.get_device_capability() == (8, 0)
            assert torch.cuda.is_bf16_supported()
            """) + TRAIN)
        device = {"name": "NVIDIA A100-SXM4-40GB", "memory_bytes": 40 * 2 ** 30, "capability": [8, 0],
                  "multiprocessors": 108}
        trace = run_trace(path, device=device)
        self.assertEqual(trace["batch_size"], 4)


if __name__ == "__main__":
    unittest.main()
