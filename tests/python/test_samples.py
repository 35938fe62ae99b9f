"""Traces each sample at a small batch and checks op counts and line attribution."""

import importlib.util
import os
import tempfile
import unittest

import torch

from source_lines import line_of
from wavecast_tracer.errors import TraceError
from wavecast_tracer.tracer import run_trace

SAMPLES = os.environ.get(
    "WAVECAST_SAMPLES_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "samples")
)
# torch 2.x runs attention as F.scaled_dot_product_attention (1.13 has none: bmm + softmax + bmm).
HAS_SDPA = hasattr(torch.nn.functional, "scaled_dot_product_attention")
HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None
FIXTURES = os.path.abspath(os.environ.get(
    "WAVECAST_FIXTURES_DIR", os.path.join(os.path.dirname(__file__), "..", "profiler", "fixtures")
))


def sample(name):
    return os.path.abspath(os.path.join(SAMPLES, name))


def count(trace, name, phase):
    return sum(1 for op in trace["ops"] if op["name"] == name and op["phase"] == phase)


class SampleTraces(unittest.TestCase):
    def trace(self, name, batch_size=2):
        return run_trace(sample(name), batch_size=batch_size)

    def assert_common(self, trace, path, fallback_ops=()):
        """Every backward op credited to a forward op on that op's line; no other fallbacks."""
        ops = trace["ops"]
        self.assertEqual(trace["fallback_ops"], list(fallback_ops))
        for op in ops:
            if op["phase"] == "backward":
                self.assertIsNotNone(op.get("forward_id"), op)
                forward = ops[op["forward_id"]]
                self.assertEqual(forward["phase"], "forward")
                self.assertEqual(op["loc"], forward["loc"])
            else:
                self.assertEqual(op["loc"]["file"], path, op)
        step_lines = {op["loc"]["line"] for op in ops if op["phase"] == "optimizer"}
        return step_lines

    def test_small_cnn(self):
        path = sample("small_cnn.py")
        trace = self.trace("small_cnn.py", batch_size=8)
        step_lines = self.assert_common(trace, path)
        self.assertEqual(step_lines, {line_of(path, "optimizer.step()")})
        convs = [op for op in trace["ops"] if op["name"] == "aten::convolution"]
        self.assertEqual([op["loc"]["line"] for op in convs],
                         [line_of(path, "self.conv1(x)"), line_of(path, "self.conv2(x)"),
                          line_of(path, "self.conv3(x)")])
        self.assertEqual([op["module"] for op in convs], ["conv1", "conv2", "conv3"])
        self.assertEqual(convs[0]["inputs"][0]["shape"], [8, 3, 32, 32])
        self.assertEqual(convs[2]["outputs"][0]["shape"], [8, 128, 8, 8])
        self.assertEqual(convs[0]["args"]["padding"], [1, 1])
        self.assertTrue(convs[0]["args"]["bias"])
        backward = [op for op in trace["ops"] if op["name"] == "aten::convolution_backward"]
        self.assertEqual(sorted(op["forward_id"] for op in backward), [op["id"] for op in convs])
        # The stack runs from the provider's iteration down to the forward line.
        self.assertEqual(convs[0]["stack"][-2]["function"], "iteration")
        params = 3 * 32 * 9 + 32 + 2 * 32 + 32 * 64 * 9 + 64 + 2 * 64 + 64 * 128 * 9 + 128 + 2048 * 10 + 10
        self.assertEqual(trace["memory"]["parameters_bytes"], 4 * params)
        self.assertEqual(trace["memory"]["optimizer_state_bytes"], 4 * params)  # momentum

    def test_resnet50(self):
        path = sample("resnet50.py")
        trace = self.trace("resnet50.py")
        step_lines = self.assert_common(trace, path)
        self.assertEqual(step_lines, {line_of(path, "optimizer.step()")})
        self.assertEqual(count(trace, "aten::convolution", "forward"), 53)
        self.assertEqual(count(trace, "aten::convolution_backward", "backward"), 53)
        self.assertEqual(count(trace, "aten::native_batch_norm", "forward"), 53)
        self.assertEqual(count(trace, "aten::native_batch_norm_backward", "backward"), 53)
        model_line = line_of(path, "loss_fn(model(images), labels)")
        convs = [op for op in trace["ops"] if op["name"] == "aten::convolution"]
        self.assertEqual({op["loc"]["line"] for op in convs}, {model_line})
        self.assertEqual(convs[0]["module"], "conv1")
        self.assertEqual(convs[-1]["module"], "layer4.2.conv3")
        self.assertEqual(convs[0]["args"]["stride"], [2, 2])
        self.assertEqual(trace["memory"]["parameters_bytes"], 4 * 25557032)

    def test_resnet50_at_batch_256_is_shape_only(self):
        trace = self.trace("resnet50.py", batch_size=256)
        first = next(op for op in trace["ops"] if op["name"] == "aten::convolution")
        self.assertEqual(first["inputs"][0]["shape"], [256, 3, 224, 224])
        self.assertEqual(trace["fallback_ops"], [])

    def test_inception_v3(self):
        path = sample("inception_v3.py")
        trace = self.trace("inception_v3.py")
        step_lines = self.assert_common(trace, path)
        self.assertEqual(step_lines, {line_of(path, "optimizer.step()")})
        # 94 convolutions on the main path and 2 in the auxiliary classifier.
        self.assertEqual(count(trace, "aten::convolution", "forward"), 96)
        self.assertEqual(count(trace, "aten::convolution_backward", "backward"), 96)

    def test_transformer(self):
        path = sample("transformer.py")
        trace = self.trace("transformer.py")
        # torch 2.x's nn.Transformer reads the mask's values to see whether it is causal
        # (one .item(), a device-to-host sync on a GPU too); shape mode knows them.
        step_lines = self.assert_common(trace, path, ["aten::_local_scalar_dense"] if HAS_SDPA else [])
        self.assertEqual(step_lines, {line_of(path, "optimizer.step()")})
        # 6 encoder layers x 2 norms, 6 decoder layers x 3, plus both final norms.
        self.assertEqual(count(trace, "aten::native_layer_norm", "forward"), 32)
        self.assertEqual(count(trace, "aten::embedding", "forward"), 2)
        transformer_line = line_of(path, "self.transformer(src, tgt, tgt_mask=causal)")
        # 6 encoder self-attentions, 6 decoder self- and 6 cross-attentions.
        attention = "aten::_scaled_dot_product_efficient_attention" if HAS_SDPA else "aten::_softmax"
        self.assertEqual(count(trace, "aten::_softmax", "forward"), 0 if HAS_SDPA else 18)
        attentions = [op for op in trace["ops"] if op["name"] == attention]
        self.assertEqual(len(attentions), 18)
        self.assertEqual({op["loc"]["line"] for op in attentions}, {transformer_line})
        if HAS_SDPA:
            # fp32 goes to the memory-efficient kernel; the decoder's self-attention is causal
            # (the mask was recognised, so no mask tensor reaches the kernel).
            self.assertEqual(count(trace, attention + "_backward", "backward"), 18)
            causal = [op["module"] for op in attentions if op["args"]["is_causal"]]
            self.assertEqual(causal, [f"transformer.decoder.layers.{i}.self_attn" for i in range(6)])
            self.assertEqual({op["args"]["backend"] for op in attentions}, {"efficient"})
            self.assertEqual(attentions[0]["inputs"][0]["shape"], [2, 8, 50, 64])
            self.assertIsNone(attentions[0]["inputs"][3])

    def test_gnmt(self):
        path = sample("gnmt.py")
        trace = self.trace("gnmt.py")
        step_lines = self.assert_common(trace, path)
        self.assertEqual(step_lines, {line_of(path, "optimizer.step()")})
        self.assertEqual(count(trace, "aten::embedding", "forward"), 2)
        self.assertEqual(count(trace, "aten::embedding_dense_backward", "backward"), 2)
        bmm = [op for op in trace["ops"] if op["name"] == "aten::bmm" and op["phase"] == "forward"]
        self.assertEqual([op["loc"]["line"] for op in bmm],
                         [line_of(path, "torch.bmm(weights, encoder_states)")])
        self.assertEqual(bmm[0]["module"], "attention")
        # Each nn.LSTM call is one fused op forward and one backward, as cuDNN runs it.
        lstms = [op for op in trace["ops"] if op["name"] == "aten::lstm"]
        self.assertEqual([op["module"] for op in lstms],
                         ["encoder_bidirectional", "encoder", "decoder_first", "decoder"])
        self.assertEqual([op["args"]["num_layers"] for op in lstms], [1, 3, 1, 3])
        self.assertEqual([op["args"]["hidden_size"] for op in lstms], [512, 1024, 1024, 1024])
        self.assertEqual(lstms[3]["args"]["input_size"], 2048)
        self.assertTrue(lstms[0]["args"]["bidirectional"])
        self.assertEqual(lstms[0]["loc"]["line"], line_of(path, "self.encoder_bidirectional(self.embed_source"))
        self.assertEqual(count(trace, "aten::_cudnn_rnn_backward", "backward"), 4)
        self.assertEqual(count(trace, "aten::sigmoid", "forward"), 0)
        self.assertLess(len(trace["ops"]), 700)

    def test_dcgan(self):
        path = sample("dcgan.py")
        trace = self.trace("dcgan.py")
        step_lines = self.assert_common(trace, path)
        self.assertEqual(step_lines, {line_of(path, "d_optimizer.step()"), line_of(path, "g_optimizer.step()")})
        # The generator once (5 transposed convolutions), the discriminator three times (5 each).
        convs = [op for op in trace["ops"] if op["name"] == "aten::convolution"]
        self.assertEqual(len(convs), 20)
        self.assertEqual(sum(1 for op in convs if op["args"]["transposed"]), 5)
        self.assertEqual(count(trace, "aten::convolution_backward", "backward"), 20)

    def test_gpt2_small(self):
        path = sample("gpt2.py")
        trace = self.trace("gpt2.py")
        step_lines = self.assert_common(trace, path)
        self.assertEqual(step_lines, {line_of(path, "optimizer.step()")})
        self.assertEqual(count(trace, "aten::native_layer_norm", "forward"), 25)
        self.assertEqual(count(trace, "aten::gelu", "forward"), 12)
        # qkv, proj and two MLP linears per layer; the tied head has no bias (mm).
        self.assertEqual(count(trace, "aten::addmm", "forward"), 48)
        qkv = [op for op in trace["ops"] if op["name"] == "aten::addmm" and op["module"] == "blocks.0.attention.qkv"]
        self.assertEqual(len(qkv), 1)
        self.assertEqual(qkv[0]["loc"]["line"], line_of(path, "self.qkv(x).split"))
        self.assertEqual(qkv[0]["outputs"][0]["shape"], [2 * 1023, 3 * 768])

    def test_small_transformer(self):
        path = sample("small_transformer.py")
        trace = self.trace("small_transformer.py")
        step_lines = self.assert_common(trace, path)
        self.assertEqual(step_lines, {line_of(path, "optimizer.step()")})
        if not HAS_SDPA:
            self.assertEqual(count(trace, "aten::_softmax", "forward"), 2)
            return
        # TransformerEncoderLayer calls SDPA (need_weights=False): fp32 -> memory-efficient.
        self.assertEqual(count(trace, "aten::_softmax", "forward"), 0)
        forward = [op for op in trace["ops"] if op["name"] == "aten::_scaled_dot_product_efficient_attention"]
        backward = [op for op in trace["ops"] if op["name"] == "aten::_scaled_dot_product_efficient_attention_backward"]
        self.assertEqual([op["module"] for op in forward], ["encoder.layers.0.self_attn", "encoder.layers.1.self_attn"])
        self.assertEqual(sorted(op["forward_id"] for op in backward), [op["id"] for op in forward])
        # (batch, heads, seq, head_dim) = (2, 4, 64, 128 / 4); the backward takes grad_out first.
        self.assertEqual([i["shape"] for i in forward[0]["inputs"][:3]], [[2, 4, 64, 32]] * 3)
        self.assertEqual(backward[0]["inputs"][0]["shape"], [2, 4, 64, 32])
        self.assertEqual(backward[0]["args"]["backend"], "efficient")


    def test_moe(self):
        # 2 x 256 tokens, 2 experts each of 8: an even router gives every expert 128 tokens.
        path = sample("moe.py")
        trace = self.trace("moe.py")
        step_lines = self.assert_common(trace, path, fallback_ops=["aten::nonzero"])
        self.assertEqual(step_lines, {line_of(path, "optimizer.step()")})
        routed = [op for op in trace["ops"] if op["name"] == "aten::nonzero"]
        self.assertEqual([op["outputs"][0]["shape"] for op in routed], [[128, 2]] * 4 * 8)
        first_expert = [op for op in trace["ops"] if op["name"] == "aten::addmm" and op["phase"] == "forward"
                        and op["module"] == "blocks.0.moe.experts.0.0"]
        self.assertEqual(first_expert[0]["inputs"][1]["shape"], [128, 512])
        self.assertIn({"kind": "even_routing", "severity": "info", "file": path,
                       "line": line_of(path, "torch.where(chosen == e)"), "count": 8,
                       "origin": {"file": path, "line": line_of(path, ".topk(TOP_K")}}, trace["warnings"])


class Errors(unittest.TestCase):
    def test_missing_provider(self):
        with self.assertRaises(TraceError) as caught:
            run_trace(os.path.join(FIXTURES, "no_providers.py"))
        self.assertEqual(caught.exception.kind, "missing_provider")

    def test_exception_in_helper_module(self):
        with self.assertRaises(TraceError) as caught:
            run_trace(os.path.join(FIXTURES, "raises.py"), batch_size=2)
        self.assertEqual(caught.exception.kind, "user_exception")
        self.assertEqual(caught.exception.file, os.path.join(FIXTURES, "raises_helper.py"))
        self.assertEqual(caught.exception.line, 14)

    def test_unknown_mode(self):
        with self.assertRaises(TraceError) as caught:
            run_trace(sample("small_cnn.py"), mode="gpu")
        self.assertEqual(caught.exception.kind, "bad_request")

    @unittest.skipIf(torch.cuda.is_available(), "a GPU is visible: cuda mode can measure")
    def test_cuda_mode_without_gpu(self):
        with self.assertRaises(TraceError) as caught:
            run_trace(sample("small_cnn.py"), mode="cuda")
        self.assertEqual(caught.exception.kind, "environment_error")
        self.assertEqual(caught.exception.message, "no CUDA GPU visible to torch; use shape mode")

    def test_script_written_for_cuda(self):
        path = os.path.join(FIXTURES, "uses_cuda.py")
        for mode in ("shape", "cpu"):
            trace = run_trace(path, batch_size=8, mode=mode)
            addmm = [op for op in trace["ops"] if op["name"] == "aten::addmm"]
            self.assertEqual([op["outputs"][0]["shape"] for op in addmm], [[8, 32], [8, 4]])
            self.assertEqual(count(trace, "aten::nll_loss_backward", "backward"), 1)
            self.assertIn({"kind": "cuda_traced_on_cpu", "severity": "info"}, trace["warnings"])

    def test_a_torch_older_than_2_is_a_warning(self):
        # Run under both the venv's torch 2.x and the system's 1.13 (python_tracer_system_torch).
        trace = run_trace(os.path.join(FIXTURES, "uses_cuda.py"), batch_size=2)
        old = [w for w in trace["warnings"] if w["kind"] == "old_torch"]
        if torch.__version__.startswith("1."):
            self.assertEqual(old, [{"kind": "old_torch", "severity": "warning", "version": torch.__version__}])
        else:
            self.assertEqual(old, [])

    def test_value_dependent_ops_fall_back_to_real_values(self):
        path = os.path.join(FIXTURES, "value_dependent.py")
        trace = run_trace(path, batch_size=4)
        # 4 rows of 12 tokens, the last 3 of each padding: 36 real tokens.
        fallbacks = {op["name"]: op for op in trace["ops"] if op["fallback"]}
        self.assertEqual(trace["fallback_ops"],
                         ["aten::nonzero", "aten::masked_select", "aten::index", "aten::_local_scalar_dense"])
        self.assertEqual(fallbacks["aten::nonzero"]["outputs"][0]["shape"], [36, 2])
        self.assertEqual(fallbacks["aten::masked_select"]["outputs"][0]["shape"], [36])
        self.assertEqual(fallbacks["aten::index"]["outputs"][0]["shape"], [36, 100])
        self.assertEqual(fallbacks["aten::nonzero"]["loc"]["line"], line_of(path, "keep.nonzero()"))
        self.assertEqual(count(trace, "aten::nll_loss_forward", "forward"), 1)
        self.assertFalse(any(op["fallback"] for op in trace["ops"] if op["name"] == "aten::addmm"))

    def test_label_smoothing_masks_with_the_labels(self):
        # index_put_ writes the loss, not the mask it indexes with: the mask keeps its
        # values and masked_select gets the real count (16 samples, 4 ignored).
        trace = run_trace(os.path.join(FIXTURES, "label_smoothing.py"), batch_size=16)
        if HAS_SDPA:  # torch 2.x zeroes the ignored samples with masked_fill_: nothing value-dependent
            self.assertEqual(trace["fallback_ops"], [])
            self.assertEqual(count(trace, "aten::masked_select", "forward"), 0)
            fills = [op for op in trace["ops"] if op["name"] == "aten::masked_fill_"]
            self.assertEqual([op["inputs"][1]["shape"] for op in fills], [[16]])
            self.assertEqual(count(trace, "aten::nll_loss_backward", "backward"), 1)
            return
        selected = [op for op in trace["ops"] if op["name"] == "aten::masked_select"]
        self.assertEqual(len(selected), 1)
        self.assertEqual(selected[0]["outputs"][0]["shape"], [12])
        self.assertEqual(count(trace, "aten::nll_loss_backward", "backward"), 1)

    def test_mask_from_activations_is_traced_in_cpu_mode(self):
        path = os.path.join(FIXTURES, "mask_from_activations.py")
        trace = run_trace(path, batch_size=4)
        self.assertEqual(trace["mode"], "cpu")
        [note] = [w for w in trace["warnings"] if w["kind"] == "traced_in_cpu_mode"]
        self.assertEqual(note["severity"], "info")
        self.assertEqual((note["file"], note["line"]), (path, line_of(path, "y[y > 0]")))
        self.assertIn(note["call"], ("aten::nonzero", "aten::index"))  # 1.13 refuses the boolean index itself
        self.assertNotIn("origin", note)  # the script's own line asked, not a library under it
        self.assertEqual(count(trace, "aten::index", "forward"), 1)  # the boolean mask, run for real
        self.assertEqual(count(trace, "aten::index_put", "backward"), 1)

    @unittest.skipUnless(HAS_TORCHVISION, "torchvision is not installed in this environment")
    def test_a_library_needing_values_is_named(self):
        path = os.path.join(FIXTURES, "library_needs_values.py")
        trace = run_trace(path, batch_size=4)
        self.assertEqual(trace["mode"], "cpu")
        [note] = [w for w in trace["warnings"] if w["kind"] == "traced_in_cpu_mode"]
        self.assertEqual(note["line"], line_of(path, "remove_small_boxes"))
        self.assertEqual(note["call"], "aten::nonzero")
        self.assertTrue(note["origin"]["file"].endswith(os.path.join("torchvision", "ops", "boxes.py")), note)

    def test_a_write_through_a_view_is_not_followed_from_stale_values(self):
        # The zeros' values were followed; the write into their first two entries was not,
        # so shape mode cannot know which are nonzero: cpu mode does.
        path = os.path.join(FIXTURES, "written_through_view.py")
        trace = run_trace(path, batch_size=16)
        self.assertEqual(trace["mode"], "cpu")
        [note] = [w for w in trace["warnings"] if w["kind"] == "traced_in_cpu_mode"]
        self.assertEqual(note["line"], line_of(path, "counts.nonzero()"))

    def test_cpu_mode_failing_too_reports_shape_modes_error(self):
        path = os.path.join(FIXTURES, "values_then_failure.py")
        with self.assertRaises(TraceError) as caught:
            run_trace(path, batch_size=4)
        self.assertEqual(caught.exception.kind, "unsupported_operation")
        self.assertEqual(caught.exception.line, line_of(path, "len((y > 0).nonzero())"))
        self.assertIn("depends on tensor values", caught.exception.message)
        raising = line_of(path, "raise RuntimeError")
        self.assertIn(f"Tracing in cpu mode was tried instead, and failed at values_then_failure.py:{raising}: "
                      "RuntimeError: a check that only runs where the values exist failed", caught.exception.hint)

    def test_cpu_mode_runs_for_real(self):
        trace = run_trace(sample("small_cnn.py"), batch_size=2, mode="cpu")
        self.assertEqual(trace["mode"], "cpu")
        self.assertEqual(count(trace, "aten::convolution", "forward"), 3)


if __name__ == "__main__":
    unittest.main()


class ProviderScriptsAreContained(unittest.TestCase):
    """A provider script's own code runs from its folder in the sandbox of a script run as
    written: what it writes leaves the user's files (and the caller's folder) as they were."""

    SCRIPT = """
import logging
import os

import torch
import torch.nn as nn

logging.basicConfig(filename="train.log", level=logging.INFO)
os.makedirs("runs", exist_ok=True)
with open("runs/config.txt", "w") as f:
    f.write("lr=0.1")


def wavecast_model():
    return nn.Linear(4, 4)


def wavecast_input(batch_size=2):
    return (torch.randn(batch_size, 4),)


def wavecast_iteration(model):
    def iteration(x):
        model(x).sum().backward()
        torch.save(model.state_dict(), "checkpoint.pt")

    return iteration
"""

    def test_writes_and_checkpoints_touch_no_file(self):
        with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as caller:
            path = os.path.join(folder, "model.py")
            with open(path, "w") as f:
                f.write(self.SCRIPT)
            before = os.getcwd()
            os.chdir(caller)
            try:
                trace = run_trace(path, batch_size=2)
            finally:
                os.chdir(before)
            self.assertEqual(os.listdir(folder), ["model.py"])
            self.assertEqual(os.listdir(caller), [])
            stubbed = [w for w in trace["warnings"] if w["kind"] == "call_stubbed"]
            self.assertEqual(stubbed, [{"kind": "call_stubbed", "severity": "info", "file": path,
                                        "line": line_of(path, "torch.save("), "call": "torch.save"}])

    def test_a_download_stops_the_trace_with_how_to_work_offline(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.py")
            with open(path, "w") as f:
                f.write(self.SCRIPT.replace('logging.basicConfig(filename="train.log", level=logging.INFO)',
                                            'import urllib.request\n'
                                            'urllib.request.urlopen("https://example.com/weights.bin")'))
            with self.assertRaises(TraceError) as caught:
                run_trace(path, batch_size=2)
        self.assertEqual(caught.exception.kind, "blocked_call")
        self.assertIn("example.com", caught.exception.message)
