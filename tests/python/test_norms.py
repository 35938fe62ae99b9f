"""nn.RMSNorm recorded as the fused op CUDA runs (torch >= 2.8), not its CPU decomposition."""

import os
import tempfile
import unittest

import torch

from wavecast_tracer.tracer import run_trace

HAS_FUSED_RMS_NORM = hasattr(torch.ops.aten, "_fused_rms_norm") and hasattr(torch.nn, "RMSNorm")
NO_FUSED_RMS_NORM = "this torch has no aten::_fused_rms_norm (torch < 2.8): RMSNorm is composite on CUDA too"

# Linear -> RMSNorm -> Linear on (batch, 16, 64) tokens, the norm's weight in `weight_dtype`.
SCRIPT = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 64).to({dtype})
        self.norm = nn.RMSNorm(64).to({weight_dtype})
        self.down = nn.Linear(64, 8).to({dtype})

    def forward(self, x):
        return self.down(self.norm(self.up(x)))


def wavecast_model():
    return Net().cuda()


def wavecast_input(batch_size=4):
    return (torch.randn(batch_size, 16, 64, dtype={dtype}, device="cuda"),)


def wavecast_iteration(model):
    def iteration(x):
        model(x).float().sum().backward()

    return iteration
"""


@unittest.skipUnless(HAS_FUSED_RMS_NORM, NO_FUSED_RMS_NORM)
class FusedRmsNorm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def trace(self, dtype, weight_dtype, mode="shape"):
        path = os.path.join(self.directory.name, f"rms_{dtype}_{weight_dtype}.py".replace("torch.", ""))
        with open(path, "w", encoding="utf-8") as f:
            f.write(SCRIPT.format(dtype=dtype, weight_dtype=weight_dtype))
        return run_trace(path, batch_size=4, mode=mode)

    def test_one_fused_op_forward_and_one_backward(self):
        trace = self.trace("torch.bfloat16", "torch.bfloat16")
        norms = [op for op in trace["ops"] if "rms_norm" in op["name"]]
        self.assertEqual([(op["name"], op["phase"]) for op in norms],
                         [("aten::_fused_rms_norm", "forward"), ("aten::_fused_rms_norm_backward", "backward")])
        forward, backward = norms
        self.assertEqual(backward["forward_id"], forward["id"])
        self.assertEqual(forward["args"]["normalized_shape"], [64])
        # The normalised tokens in bf16 and one fp32 reciprocal RMS per token, as CUDA's kernel.
        self.assertEqual([(t["shape"], t["dtype"]) for t in forward["outputs"]],
                         [([4, 16, 64], "bfloat16"), ([4, 16, 1], "float32")])
        # Backward reads the gradient, the input, rstd and the weight; writes both gradients.
        self.assertEqual([t["shape"] for t in backward["inputs"] if t], [[4, 16, 64], [4, 16, 64], [4, 16, 1], [64]])
        self.assertEqual([t["shape"] for t in backward["outputs"] if t], [[4, 16, 64], [64]])
        names = {op["name"] for op in trace["ops"]}
        self.assertFalse(names & {"aten::pow", "aten::rsqrt", "aten::mean", "aten::zeros"}, names)
        # What the fused op's autograd keeps of its own: the output (down's input) and rstd.
        self.assertEqual(forward["saved_bytes"], 4 * 16 * 64 * 2 + 4 * 16 * 4)

    def test_a_weight_of_another_dtype_takes_the_composite_path_as_on_cuda(self):
        trace = self.trace("torch.bfloat16", "torch.float32")
        names = [op["name"] for op in trace["ops"]]
        self.assertNotIn("aten::_fused_rms_norm", names)
        self.assertIn("aten::rsqrt", names)

    def test_real_cpu_tensors_keep_the_cpus_own_path(self):
        trace = self.trace("torch.float32", "torch.float32", mode="cpu")
        names = [op["name"] for op in trace["ops"]]
        self.assertNotIn("aten::_fused_rms_norm", names)
        self.assertIn("aten::rsqrt", names)


if __name__ == "__main__":
    unittest.main()
