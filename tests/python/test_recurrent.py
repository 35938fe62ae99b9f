"""Recurrent layers are recorded as one fused op forward and one backward per call."""

import json
import os
import tempfile
import textwrap
import unittest
from unittest import mock

import torch

from wavecast_tracer import rnn
from wavecast_tracer.project import Project
from wavecast_tracer.trace_state import TraceState
from wavecast_tracer.rnn import fuse_recurrent_layers
from wavecast_tracer.tracer import run_trace

FIXTURES = os.path.abspath(os.environ.get(
    "WAVECAST_FIXTURES_DIR", os.path.join(os.path.dirname(__file__), "..", "profiler", "fixtures")
))
RECURRENT = os.path.join(FIXTURES, "recurrent.py")
# cuDNN's reserve sizes measured on an H100 (bench/truth/rnn_reserve.py).
RESERVE_TRUTH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "truth", "data", "h100",
                             "rnn_reserve.json")


def ops_named(trace, name):
    return [op for op in trace["ops"] if op["name"] == name]


class FusedRecurrentTrace(unittest.TestCase):
    def check(self, trace):
        lstm, = ops_named(trace, "aten::lstm")
        gru, = ops_named(trace, "aten::gru")
        rnn, = ops_named(trace, "aten::rnn_relu")
        self.assertEqual(lstm["args"]["hidden_size"], 16)
        self.assertEqual(lstm["args"]["proj_size"], 4)
        self.assertEqual(lstm["args"]["mode"], 2)
        self.assertEqual(lstm["args"]["seq_len"], 7)
        self.assertEqual(lstm["args"]["batch"], 3)
        self.assertEqual([o["shape"] for o in lstm["outputs"]], [[7, 3, 4], [1, 3, 4], [1, 3, 16]])
        self.assertEqual(gru["args"]["num_layers"], 2)
        self.assertTrue(gru["args"]["bidirectional"])
        self.assertTrue(gru["args"]["batch_first"])
        self.assertEqual(gru["args"]["seq_len"], 7)
        self.assertEqual(gru["outputs"][0]["shape"], [3, 7, 12])
        self.assertEqual(rnn["args"]["mode"], 0)
        self.assertEqual([lstm["module"], gru["module"], rnn["module"]], ["lstm", "gru", "rnn"])
        backward = ops_named(trace, "aten::_cudnn_rnn_backward")
        self.assertEqual(sorted(op["forward_id"] for op in backward),
                         [lstm["id"], gru["id"], rnn["id"]])
        for op in backward:
            forward = trace["ops"][op["forward_id"]]
            self.assertEqual(op["loc"], forward["loc"])
            self.assertEqual(op["args"], forward["args"])
        # No decomposed cell arithmetic is left.
        names = {op["name"] for op in trace["ops"]}
        for decomposed in ("aten::sigmoid", "aten::tanh", "aten::relu", "aten::addmm", "aten::mm"):
            self.assertNotIn(decomposed, names)

    def test_shape_mode(self):
        self.check(run_trace(RECURRENT, batch_size=3))

    def test_cpu_mode(self):
        self.check(run_trace(RECURRENT, batch_size=3, mode="cpu"))


class PackedSequences(unittest.TestCase):
    PATH = os.path.join(FIXTURES, "packed_sequence.py")

    @unittest.skipUnless(hasattr(torch, "compile"), "torch 1.13's fake tensors cannot pack a sequence (its lengths "
                                                    "become meta tensors)")
    def test_shape_mode_runs_them_as_cpu_mode_does(self):
        # ATen's _pad_packed_sequence writes its lengths through a data pointer, which a fake
        # tensor has not: shape mode runs the same ops in Python (rnn._pad_packed).
        shape = run_trace(self.PATH, batch_size=6)
        cpu = run_trace(self.PATH, batch_size=6, mode="cpu")
        self.assertEqual(shape["mode"], "shape")
        views = {"aten::slice", "aten::view", "aten::as_strided", "aten::empty"}  # no kernels

        def work(trace):
            return [(op["name"], op["phase"], [i["shape"] if i else None for i in op["inputs"]])
                    for op in trace["ops"] if op["name"] not in views]

        self.assertEqual(work(shape), work(cpu))
        gru, = ops_named(shape, "aten::gru")
        self.assertTrue(gru["args"]["packed"])
        self.assertEqual(gru["args"]["seq_len"], 9)  # the longest sentence's steps
        self.assertEqual(gru["args"]["batch"], 6)
        self.assertEqual(gru["inputs"][0]["shape"], [sum([9, 4, 7, 2, 9, 5]), 8])  # the tokens
        padded = [op for op in shape["ops"] if op["name"] == "aten::full"]
        self.assertEqual([op["outputs"][0]["shape"] for op in padded], [[9, 6, 32]])

    def test_pad_packed_matches_atens(self):
        data = torch.randn(36, 3)
        batch_sizes = torch.tensor([6, 6, 5, 4, 3, 3, 2, 2, 2, 1, 1, 1])  # not all steps end alike
        for batch_first in (False, True):
            for total_length in (-1, 14):
                mine = rnn._pad_packed(data, batch_sizes, batch_first, -1.0, total_length)
                atens = torch._VF._pad_packed_sequence(data, batch_sizes, batch_first, -1.0, total_length)
                self.assertTrue(torch.equal(mine[0], atens[0]))
                self.assertTrue(torch.equal(mine[1], atens[1]))


class FusedRecurrentValues(unittest.TestCase):
    """In cpu mode the fused op computes the same outputs and gradients as torch."""

    def test_outputs_and_gradients_match_torch(self):
        torch.manual_seed(0)
        for layer in (torch.nn.LSTM(5, 7, proj_size=3), torch.nn.GRU(5, 4, num_layers=2, bidirectional=True, dropout=0.0),
                      torch.nn.RNN(5, 3)):
            x = torch.randn(6, 2, 5, requires_grad=True)
            expected = layer(x)[0]
            expected.sum().backward()
            expected_grads = [x.grad.clone()] + [p.grad.clone() for p in layer.parameters()]
            x.grad = None
            layer.zero_grad()

            state = TraceState(Project(RECURRENT), lambda message: None)
            with fuse_recurrent_layers(state, compute_values=True):
                actual = layer(x)[0]
                actual.sum().backward()
            grads = [x.grad] + [p.grad for p in layer.parameters()]
            self.assertTrue(torch.allclose(actual, expected))
            for got, want in zip(grads, expected_grads):
                self.assertTrue(torch.allclose(got, want, atol=1e-6))
            self.assertEqual([op["name"] for op in state.ops][-1], "aten::_cudnn_rnn_backward")

    def test_vf_is_restored(self):
        state = TraceState(Project(RECURRENT), lambda message: None)
        with fuse_recurrent_layers(state, compute_values=True):
            self.assertIn("lstm", torch._VF.__dict__)
        self.assertNotIn("lstm", torch._VF.__dict__)
        self.assertIs(torch._VF.lstm, torch._C._VariableFunctions.lstm)


class ReserveSpace(unittest.TestCase):
    """cuDNN's reserve space, kept from a training forward to its backward."""

    def test_sizes_are_cudnns_on_a_gpu(self):
        with open(RESERVE_TRUTH, encoding="utf-8") as f:
            rows = json.load(f)["rows"]
        self.assertGreaterEqual(len(rows), 24)
        for row in rows:
            layer = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[row["kind"]](
                row["input"], row["hidden"], num_layers=row["layers"], bidirectional=row["bidirectional"])
            dtype = getattr(torch, row["dtype"])
            x = torch.empty(row["steps"], row["batch"], row["input"], dtype=dtype, device="meta")
            hx = torch.empty(row["layers"] * (2 if row["bidirectional"] else 1), row["batch"], row["hidden"])
            hx = [hx, hx] if row["kind"] == "lstm" else hx
            call = rnn._RecurrentCall(None, row["kind"], None, False,
                                      (x, hx, list(layer.parameters()), True, row["layers"], 0.0, True,
                                       row["bidirectional"], False))
            with self.subTest(row=row):
                self.assertEqual(call.reserve_bytes(x), row["reserve_bytes"])
                call.train = False
                self.assertEqual(call.reserve_bytes(x), 0, "inference keeps no reserve")

    def test_the_reserve_counts_toward_the_peak(self):
        # A 3-layer LSTM whose reserve (50 x 64 x 512 x (5 x 3 + 2) float32s) dwarfs the rest.
        script = textwrap.dedent("""
            import torch


            def wavecast_model():
                return torch.nn.LSTM(16, 512, num_layers=3)


            def wavecast_input(batch_size=64):
                return (torch.randn(50, batch_size, 16),)


            def wavecast_iteration(model):
                def iteration(x):
                    model(x)[0].sum().backward()

                return iteration
        """)
        reserve = 50 * 64 * 512 * (5 * 3 + 2) * 4 + rnn.RESERVE_HEADER_BYTES
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "lstm.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(script)
            with_reserve = run_trace(path, batch_size=64)["memory"]
            with mock.patch.dict(rnn.RESERVE_PER_LAYER, clear=True):
                without = run_trace(path, batch_size=64)["memory"]
        self.assertEqual(with_reserve["peak_live_bytes"] - without["peak_live_bytes"], reserve)


if __name__ == "__main__":
    unittest.main()
