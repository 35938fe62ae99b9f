"""torch.compile in a traced script: compiled modules and functions trace eagerly, their
ops carry the mode and what wrote their inputs, and compile as a what-if."""

import os
import textwrap
import unittest

import torch

from mlp_script import MLP, trace_mlp
from source_lines import script_file
from wavecast_tracer.errors import TraceError
from wavecast_tracer.tracer import run_trace

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.abspath(os.environ.get("WAVECAST_SAMPLES_DIR", os.path.join(HERE, "..", "..", "samples")))
HAS_COMPILE = hasattr(torch, "compile")

# A training step whose forward and loss are one compiled function.
COMPILED_STEP = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()


def wavecast_input(batch_size=16):
    return (torch.randn(batch_size, 32, device="cuda"),)


@torch.compile(mode="max-autotune-no-cudagraphs")
def loss_of(model, x):
    return model(x).square().mean()


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def iteration(x):
        optimizer.zero_grad()
        loss_of(model, x).backward()
        optimizer.step()

    return iteration
"""



@unittest.skipUnless(HAS_COMPILE, "torch 1.13 has no torch.compile")
class Compile(unittest.TestCase):
    def test_compiled_model_traces_eagerly_with_a_warning(self):
        trace = trace_mlp("torch.optim.SGD(model.parameters(), lr=0.1)", model="model = torch.compile(model)")
        self.assertEqual([op["outputs"][0]["shape"] for op in trace["ops"] if op["name"] == "aten::addmm"
                          and op["phase"] == "forward"], [[16, 64], [16, 10]])
        warnings = [w for w in trace["warnings"] if w["kind"] == "torch_compile"]
        self.assertEqual(len(warnings), 1)
        self.assertTrue(warnings[0]["file"].endswith("mlp.py"), warnings[0])
        self.assertEqual(warnings[0]["line"], 8)  # the torch.compile line

    def test_code_compiled_but_never_run_in_the_iteration_is_not_warned_about(self):
        # torchtitan compiles flex attention at import; a model on SDPA never calls it.
        trace = trace_mlp("torch.optim.SGD(model.parameters(), lr=0.1)",
                          model="unused = torch.compile(lambda t: t * 2)")
        self.assertNotIn("torch_compile", [w["kind"] for w in trace["warnings"]])
        self.assertFalse(any(op.get("compiled") for op in trace["ops"]))

    def test_compiled_ops_carry_the_mode_and_their_writers(self):
        trace = trace_mlp("torch.optim.SGD(model.parameters(), lr=0.1)", model="model = torch.compile(model)")
        ops = trace["ops"]
        forward = [op for op in ops if op["phase"] == "forward"]
        # The model's ops are compiled; the .sum() the iteration calls on its output is not.
        self.assertEqual([(op["name"], op.get("compiled")) for op in forward],
                         [("aten::t", "default"), ("aten::addmm", "default"), ("aten::relu", "default"),
                          ("aten::t", "default"), ("aten::addmm", "default"), ("aten::sum", None)])
        first, relu, second, total = forward[1], forward[2], forward[4], forward[5]
        # relu reads the first addmm's output; the second addmm reads relu's; the weights and
        # the batch were made before the iteration and have no writer.
        self.assertEqual(relu["inputs"][0]["from"], [first["id"], 0])
        self.assertEqual(second["inputs"][1]["from"], [relu["id"], 0])
        self.assertNotIn("from", second["inputs"][0])
        self.assertEqual(total["inputs"][0]["from"], [second["id"], 0])
        # AOTAutograd compiles the backward of a compiled forward: the gradient ops of the
        # model carry the mode, the sum's and the optimizer step's do not.
        backward = [op for op in ops if op["phase"] == "backward"]
        threshold = next(op for op in backward if op["name"] == "aten::threshold_backward")
        self.assertEqual(threshold["compiled"], "default")
        self.assertEqual(threshold["inputs"][1]["from"], [relu["id"], 0])  # relu's saved output
        self.assertNotIn("compiled", next(op for op in backward if op["name"] == "aten::ones_like"))
        self.assertTrue(all("compiled" not in op for op in ops if op["phase"] == "optimizer"))

    def test_a_writer_is_forgotten_when_its_storage_dies(self):
        # A storage's key is its address: one freed in backward and taken by a later tensor
        # (the optimizer's state) must not name the dead one's op as its writer.
        trace = run_trace(os.path.join(SAMPLES, "small_cnn.py"), batch_size=8, compile_mode="default")
        ops = {op["id"]: op for op in trace["ops"]}
        read = 0
        for op in trace["ops"]:
            if op["phase"] != "optimizer":
                continue
            for tensor in op["inputs"]:
                if tensor and "from" in tensor:
                    read += 1
                    writer = ops[tensor["from"][0]]
                    self.assertNotEqual(writer["phase"], "forward", (op["name"], writer["name"]))
        self.assertGreater(read, 0, "the step reads the gradients backward wrote")

    def test_compile_modes_and_backends(self):
        for call, mode in (("torch.compile(model, mode='reduce-overhead')", "reduce-overhead"),
                           ("torch.compile(model, mode='max-autotune')", "max-autotune"),
                           ("torch.compile(model, backend='aot_eager')", None),
                           ("torch.compile(model, disable=True)", None)):
            with self.subTest(call=call):
                trace = trace_mlp("torch.optim.SGD(model.parameters(), lr=0.1)", model=f"model = {call}")
                addmm = next(op for op in trace["ops"] if op["name"] == "aten::addmm")
                self.assertEqual(addmm.get("compiled"), mode)
                if mode is None:  # nothing compiled: no dataflow either
                    self.assertTrue(all("from" not in t for op in trace["ops"] for t in op["inputs"] if t))

    def test_compile_as_a_what_if_compiles_the_modules_the_iteration_calls(self):
        with script_file(textwrap.dedent(MLP).format(
                optimizer="torch.optim.SGD(model.parameters(), lr=0.1)", model=""), "mlp.py") as path:
            trace = run_trace(path, batch_size=16, compile_mode="max-autotune")
            with self.assertRaises(TraceError) as raised:
                run_trace(path, batch_size=16, compile_mode="fast")
        self.assertEqual(raised.exception.kind, "bad_request")
        forward = [op for op in trace["ops"] if op["phase"] == "forward"]
        self.assertEqual([op.get("compiled") for op in forward], ["max-autotune"] * 5 + [None])
        # The warning is the script's, at no line: nothing in it compiles.
        self.assertIn({"kind": "torch_compile", "severity": "warning"}, trace["warnings"])

    def test_module_compile_and_a_compiled_function(self):
        trace = trace_mlp("torch.optim.SGD(model.parameters(), lr=0.1)", model="model.compile()")
        self.assertEqual(next(op for op in trace["ops"] if op["name"] == "aten::addmm").get("compiled"), "default")
        with script_file(textwrap.dedent(COMPILED_STEP), "step.py") as path:
            trace = run_trace(path, batch_size=16)
        forward = [op for op in trace["ops"] if op["phase"] == "forward"]
        # Compiled as the script loaded: warned about at the decorator's line.
        self.assertEqual([w["line"] for w in trace["warnings"] if w["kind"] == "torch_compile"], [14])
        # The whole decorated step is compiled: the model's ops and the loss.
        self.assertEqual({op.get("compiled") for op in forward}, {"max-autotune-no-cudagraphs"})
