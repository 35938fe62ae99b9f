"""F.scaled_dot_product_attention recorded as the kernel CUDA would run (torch 2.x only)."""

import os
import tempfile
import textwrap
import unittest

import torch

from wavecast_tracer.tracer import run_trace

HAS_SDPA = hasattr(torch.nn.functional, "scaled_dot_product_attention")

# One attention call on (batch, heads, seq, head_dim) tensors of the given dtype.
SDPA = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear({head_dim}, {head_dim}).to({dtype})

    def forward(self, x, mask):
        q = self.proj(x)
        return F.scaled_dot_product_attention(q, x, x, attn_mask=mask, dropout_p={dropout}, is_causal={causal})


def wavecast_model():
    return Attention()


def wavecast_input(batch_size=2):
    x = torch.randn(batch_size, 4, 16, {head_dim}, dtype={dtype}, requires_grad=True)
    mask = {mask}
    return x, mask


def wavecast_iteration(model):
    def iteration(x, mask):
        model(x, mask).float().sum().backward()

    return iteration
"""


def trace_sdpa(directory, dtype="torch.bfloat16", head_dim=64, mask="None", dropout=0.0, causal=False):
    path = os.path.join(directory, f"sdpa_{len(os.listdir(directory))}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(SDPA).format(dtype=dtype, head_dim=head_dim, mask=mask, dropout=dropout,
                                             causal=causal))
    return run_trace(path, batch_size=2)


def ops_named(trace, fragment):
    return [op for op in trace["ops"] if fragment in op["name"]]


@unittest.skipUnless(HAS_SDPA, "torch 1.13 has no scaled_dot_product_attention")
class ScaledDotProductAttention(unittest.TestCase):
    def setUp(self):
        self.directory = self.enterContext(tempfile.TemporaryDirectory())

    def test_bf16_without_mask_is_flash(self):
        trace = trace_sdpa(self.directory, causal=True, dropout=0.1)
        names = [op["name"] for op in ops_named(trace, "scaled_dot_product")]
        self.assertEqual(names, ["aten::_scaled_dot_product_flash_attention",
                                 "aten::_scaled_dot_product_flash_attention_backward"])
        forward, backward = ops_named(trace, "scaled_dot_product")
        self.assertEqual(forward["args"]["backend"], "flash")
        self.assertTrue(forward["args"]["is_causal"])
        self.assertEqual(forward["args"]["dropout_p"], 0.1)
        self.assertEqual([i["shape"] for i in forward["inputs"][:3]], [[2, 4, 16, 64]] * 3)
        self.assertEqual(forward["inputs"][0]["dtype"], "bfloat16")
        self.assertEqual(forward["outputs"][0]["shape"], [2, 4, 16, 64])
        # Backward: grad_out, query, key, value first; credited to the forward line.
        self.assertEqual(backward["args"]["backend"], "flash")
        self.assertEqual(backward["forward_id"], forward["id"])
        self.assertEqual([i["shape"] for i in backward["inputs"][:4]], [[2, 4, 16, 64]] * 4)
        self.assertEqual(ops_named(trace, "_for_cpu"), [])
        self.assertEqual(ops_named(trace, "softmax"), [])

    def test_fp32_is_memory_efficient(self):
        trace = trace_sdpa(self.directory, dtype="torch.float32")
        forward, backward = ops_named(trace, "scaled_dot_product")
        self.assertEqual(forward["name"], "aten::_scaled_dot_product_efficient_attention")
        self.assertEqual(backward["name"], "aten::_scaled_dot_product_efficient_attention_backward")
        self.assertEqual(backward["inputs"][0]["dtype"], "float32")

    def test_a_mask_rules_flash_out(self):
        # A boolean mask becomes the additive float bias the kernel takes, expanded per head.
        trace = trace_sdpa(self.directory, mask="torch.ones(16, 16, dtype=torch.bool).tril()")
        forward = ops_named(trace, "scaled_dot_product")[0]
        self.assertEqual(forward["name"], "aten::_scaled_dot_product_efficient_attention")
        self.assertEqual(forward["inputs"][3], {"shape": [2, 4, 16, 16], "dtype": "bfloat16", "contiguous": False,
                                                "strides": [0, 0, 16, 1]})  # one 16 x 16 bias, expanded

    def test_unaligned_head_dim_runs_the_math_path(self):
        # head_dim 12 of bf16 is not a multiple of 8 (16 bytes) for memory-efficient, and a
        # mask rules flash out: torch runs the math decomposition, matmuls and a softmax.
        trace = trace_sdpa(self.directory, head_dim=12, mask="torch.zeros(16, 16, dtype=torch.bfloat16)")
        self.assertEqual(ops_named(trace, "scaled_dot_product"), [])
        softmax = ops_named(trace, "aten::_softmax")
        self.assertEqual([op["outputs"][0]["shape"] for op in softmax], [[2, 4, 16, 16]])

    def test_large_head_dim_is_not_flash(self):
        trace = trace_sdpa(self.directory, head_dim=320)
        self.assertEqual(ops_named(trace, "scaled_dot_product")[0]["args"]["backend"], "efficient")


# nn.MultiheadAttention called directly, and an encoder layer, in training or in
# inference (eval + no_grad, where CUDA could take the native fast path).
MODULES = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(64, 4, batch_first=True)
        self.layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True)

    def forward(self, x):
        y, _ = self.attention(x, x, x{mha_kwargs})
        return self.layer(y)


def wavecast_model():
    model = Model()
    return model.eval() if {inference} else model


def wavecast_input(batch_size=2):
    return (torch.randn(batch_size, 32, 64),)


def wavecast_iteration(model):
    def iteration(x):
        if {inference}:
            with torch.no_grad():
                model(x)
        else:
            model(x).sum().backward()

    return iteration
"""


def trace_modules(directory, mha_kwargs="", inference=False):
    path = os.path.join(directory, f"modules_{len(os.listdir(directory))}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(MODULES.format(mha_kwargs=mha_kwargs, inference=inference))
    return run_trace(path, batch_size=2)


@unittest.skipUnless(HAS_SDPA, "torch 1.13 has no scaled_dot_product_attention")
class AttentionModules(unittest.TestCase):
    def setUp(self):
        self.directory = self.enterContext(tempfile.TemporaryDirectory())

    def attention_ops(self, trace, module):
        return [op["name"] for op in trace["ops"]
                if op.get("module", "").startswith(module) and op["phase"] == "forward"
                and ("attention" in op["name"] or "softmax" in op["name"] or op["name"] == "aten::bmm")]

    def test_multihead_attention_returning_its_weights_runs_bmm_softmax_bmm(self):
        # need_weights=True (the default) asks for the averaged attention matrix, which
        # only the explicit path computes: CUDA runs bmm + softmax + bmm, as traced.
        trace = trace_modules(self.directory)
        self.assertEqual(self.attention_ops(trace, "attention"),
                         ["aten::bmm", "aten::_softmax", "aten::bmm"])
        # The encoder layer passes need_weights=False: memory-efficient SDPA in float32.
        self.assertEqual(self.attention_ops(trace, "layer"),
                         ["aten::_scaled_dot_product_efficient_attention"])

    def test_multihead_attention_without_weights_runs_sdpa(self):
        trace = trace_modules(self.directory, mha_kwargs=", need_weights=False")
        self.assertEqual(self.attention_ops(trace, "attention"),
                         ["aten::_scaled_dot_product_efficient_attention"])

    def test_inference_records_cuda_kernels_not_the_cpu_fast_path(self):
        # In eval under no_grad torch may take the native fast path; on the CPU it would
        # run CPU-only fused kernels, so the tracer keeps the Python path, whose SDPA is
        # recorded as the CUDA kernel, with no backward.
        trace = trace_modules(self.directory, mha_kwargs=", need_weights=False", inference=True)
        names = [op["name"] for op in trace["ops"]]
        self.assertEqual(self.attention_ops(trace, "attention") + self.attention_ops(trace, "layer"),
                         ["aten::_scaled_dot_product_efficient_attention"] * 2)
        self.assertFalse([n for n in names if "_for_cpu" in n or "native_multi_head" in n
                          or "transformer_encoder_layer_fwd" in n], names)
        self.assertFalse([op for op in trace["ops"] if op["phase"] == "backward"])


if __name__ == "__main__":
    unittest.main()
