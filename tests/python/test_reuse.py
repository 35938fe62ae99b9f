"""A worker's traces with a kept model and kept project modules (reuse.TraceCache) are the
traces a fresh worker makes: each edit between two traces shows in the second."""

import importlib
import os
import sys
import tempfile
import textwrap
import unittest

from wavecast_tracer.reuse import TraceCache
from wavecast_tracer.tracer import run_trace

ENTRY = """
import torch
import torch.nn as nn
from helpers import width


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, width())
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(width(), 4)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def wavecast_model():
    return Net()


def wavecast_input(batch_size=4):
    return (torch.randn(batch_size, 8),)


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def iteration(x):
        optimizer.zero_grad()
        out = model(x)
        out.sum().backward()
        optimizer.step()

    return iteration
"""

HELPERS = """
def width():
    return 16
"""


def _facts(document):
    """What a trace says, less how long it took: every op (name, shapes, phase, module,
    line, stack), the warnings, the memory figures and the providers' lines."""
    return {key: value for key, value in document.items() if key != "trace_seconds"}


class ReuseTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.entry = os.path.join(self.directory.name, "train.py")
        self.write("train.py", ENTRY)
        self.write("helpers.py", HELPERS)
        self.cache = TraceCache()
        self.steps = []

    def tearDown(self):
        sys.modules.pop("helpers", None)  # the next test's project has its own
        self.directory.cleanup()

    def write(self, name, text):
        path = os.path.join(self.directory.name, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        # A second edit within the file system's time resolution must still be seen.
        os.utime(path, ns=(1, 1))

    def edit(self, old, new, name="train.py"):
        with open(os.path.join(self.directory.name, name)) as f:
            text = f.read()
        self.assertIn(old, text)
        self.write(name, text.replace(old, new))

    def kept(self):
        self.steps = []
        document = run_trace(self.entry, None, "shape", self.steps.append, cache=self.cache)
        return document

    def fresh(self):
        return run_trace(self.entry, None, "shape")

    def assertSameAsFresh(self, document):
        self.assertEqual(_facts(document), _facts(self.fresh()))

    def test_an_unchanged_file_reuses_the_model_and_traces_the_same(self):
        first = self.kept()
        self.assertIn("building model", self.steps)
        second = self.kept()
        self.assertIn("reusing the model", self.steps)
        self.assertEqual(_facts(first), _facts(second))
        self.assertSameAsFresh(second)

    def test_an_iteration_edit_reuses_the_model_and_shows_the_edit(self):
        self.kept()
        self.edit("        out.sum().backward()", "        out = out * 2\n        out.sum().backward()")
        document = self.kept()
        self.assertIn("reusing the model", self.steps)
        self.assertIn("aten::mul", [op["name"] for op in document["ops"] if op["phase"] == "forward"])
        self.assertSameAsFresh(document)

    @unittest.skipUnless(hasattr(importlib.import_module("torch.optim.optimizer"), "register_optimizer_step_pre_hook"),
                         "this torch has no optimizer step hooks: a first step is traced as it is, "
                         "with no unrecorded step that builds a state to keep")
    def test_an_optimizer_of_the_same_kind_adopts_the_state_the_last_one_built(self):
        self.edit("torch.optim.SGD(model.parameters(), lr=0.1)",
                  "torch.optim.AdamW(model.parameters(), lr=1e-3, amsgrad=True)")
        self.kept()
        self.assertNotIn("reusing the optimizer state", self.steps)
        self.edit("lr=1e-3", "lr=2e-3")  # the learning rate decides nothing about the state
        document = self.kept()
        self.assertIn("reusing the optimizer state", self.steps)
        self.assertGreater(document["memory"]["optimizer_state_bytes"], 0)
        again = self.kept()  # adopted again after a trace that stepped it
        self.assertIn("reusing the optimizer state", self.steps)
        self.assertEqual(_facts(again), _facts(document))
        self.assertSameAsFresh(document)  # ops, the steps' values and the memory figures

    def test_an_optimizer_with_other_options_builds_its_state(self):
        self.kept()  # plain SGD: no state
        self.edit("lr=0.1)", "lr=0.1, momentum=0.9)")  # momentum buffers now
        document = self.kept()
        self.assertNotIn("reusing the optimizer state", self.steps)
        self.assertGreater(document["memory"]["optimizer_state_bytes"], 0)
        self.assertSameAsFresh(document)

    def test_a_model_edit_builds_the_model_again(self):
        self.kept()
        self.edit("nn.Linear(width(), 4)", "nn.Linear(width(), 6)")
        document = self.kept()
        self.assertIn("building model", self.steps)
        shapes = [op["outputs"][0]["shape"] for op in document["ops"] if op["name"] == "aten::addmm"]
        self.assertEqual(shapes[-1], [4, 6])
        self.assertSameAsFresh(document)

    def test_moving_the_model_code_builds_it_again_for_its_new_lines(self):
        self.kept()
        self.edit("class Net(nn.Module):", "# a comment that moves every line below\n\nclass Net(nn.Module):")
        document = self.kept()
        self.assertIn("building model", self.steps)
        self.assertSameAsFresh(document)

    def test_an_edited_project_module_is_imported_again(self):
        self.kept()
        self.edit("return 16", "return 32", name="helpers.py")
        document = self.kept()
        self.assertIn("building model", self.steps)
        shapes = [op["outputs"][0]["shape"] for op in document["ops"] if op["name"] == "aten::addmm"]
        self.assertEqual(shapes[0], [4, 32])
        self.assertSameAsFresh(document)

    def test_another_project_gets_its_own_same_named_modules(self):
        self.kept()
        with tempfile.TemporaryDirectory() as other:
            for name, text in (("train.py", ENTRY), ("helpers.py", HELPERS.replace("16", "24"))):
                with open(os.path.join(other, name), "w") as f:
                    f.write(textwrap.dedent(text))
            document = run_trace(os.path.join(other, "train.py"), None, "shape", cache=self.cache)
        shapes = [op["outputs"][0]["shape"] for op in document["ops"] if op["name"] == "aten::addmm"]
        self.assertEqual(shapes[0], [4, 24])

    def test_a_model_the_iteration_changed_is_built_again(self):
        self.edit("    optimizer = torch.optim.SGD", "    model.double()\n    optimizer = torch.optim.SGD")
        self.edit("return (torch.randn(batch_size, 8),)", "return (torch.randn(batch_size, 8, dtype=torch.float64),)")
        self.kept()
        self.kept()  # the kept model is float64 now: not as built, so built again
        self.assertIn("building model", self.steps)

    def test_training_mode_and_gradients_are_as_built(self):
        self.edit("        optimizer.step()\n", "        optimizer.step()\n        model.eval()\n")
        self.kept()
        document = self.kept()  # the last trace left the model in eval mode
        self.assertIn("reusing the model", self.steps)
        self.assertIn("aten::native_dropout", [op["name"] for op in document["ops"]])
        self.assertSameAsFresh(document)

    def test_isinstance_of_the_entry_classes_holds_for_a_kept_model(self):
        self.edit("    optimizer = torch.optim.SGD", "    assert isinstance(model, Net)\n    optimizer = torch.optim.SGD")
        self.kept()
        self.kept()
        self.assertIn("reusing the model", self.steps)

    def test_a_failure_with_a_kept_model_is_checked_with_a_fresh_one(self):
        self.edit("def wavecast_model():\n    return Net()",
                  "def wavecast_model():\n    global SCALE\n    SCALE = 2\n    return Net()")
        self.edit("        out = model(x)", "        out = model(x) * SCALE")
        self.kept()
        document = self.kept()  # SCALE is not set in the newly run entry: traced afresh
        self.assertIn("building model", self.steps)
        self.assertSameAsFresh(document)


if __name__ == "__main__":
    unittest.main()
