"""Recurrent layers are recorded as one fused op forward and one backward per call."""

import os
import unittest

import torch

from wavecast_tracer.project import Project
from wavecast_tracer.recorder import TraceState
from wavecast_tracer.rnn import fuse_recurrent_layers
from wavecast_tracer.tracer import run_trace

FIXTURES = os.path.abspath(os.environ.get(
    "WAVECAST_FIXTURES_DIR", os.path.join(os.path.dirname(__file__), "..", "profiler", "fixtures")
))
RECURRENT = os.path.join(FIXTURES, "recurrent.py")


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


if __name__ == "__main__":
    unittest.main()
