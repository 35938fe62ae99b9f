"""What training scripts written for torch 2.x use: foreach and fused optimizers,
channels_last, activation checkpointing, gradient accumulation, in-place ops on
views."""

import inspect
import json
import os
import subprocess
import sys
import textwrap
import unittest
from unittest import mock

import torch
from torch.optim import optimizer as optimizer_module

from mlp_script import MLP, PARAMETERS, trace_mlp
from source_lines import line_of, script_file
from wavecast_tracer import multi_tensor
from wavecast_tracer.tracer import run_trace

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
# torch 2.x optimizers default to the multi-tensor kernels on CUDA; 1.13's loop per parameter.
FOREACH_DEFAULT = hasattr(optimizer_module, "_default_to_fused_or_foreach")
# torch >= 2.0 has optimizer step hooks: the tracer records the steady step, not the first.
STEADY_STEPS = hasattr(optimizer_module, "register_optimizer_step_pre_hook")
HAS_COMPILE = hasattr(torch, "compile")

def step_ops(trace):
    return [(op["name"], op["args"].get("num_tensors")) for op in trace["ops"] if op["phase"] == "optimizer"
            and op["name"] != "aten::_local_scalar_dense"]


class Optimizers(unittest.TestCase):
    @unittest.skipUnless(FOREACH_DEFAULT, "torch 1.13 has no foreach default")
    def test_adamw_defaults_to_foreach(self):
        trace = trace_mlp("torch.optim.AdamW(model.parameters(), lr=1e-3)")
        # One multi-tensor op per step of the algorithm over the 4 parameters; the
        # step counters' += 1 too (they live on the CPU on a GPU as well).
        self.assertEqual(step_ops(trace), [
            ("aten::_foreach_add_", 4), ("aten::_foreach_mul_", 4), ("aten::_foreach_lerp_", 4),
            ("aten::_foreach_mul_", 4), ("aten::_foreach_addcmul_", 4), ("aten::_foreach_sqrt", 4),
            ("aten::_foreach_div_", 4), ("aten::_foreach_add_", 4), ("aten::_foreach_addcdiv_", 4)])
        # exp_avg and exp_avg_sq per parameter, plus a float32 step counter each.
        self.assertEqual(trace["memory"]["optimizer_state_bytes"], 2 * 4 * PARAMETERS + 4 * 4)
        # exp_avg_sq.addcmul_(grad, grad): the second list is the first one's tensors again.
        addcmul = next(op for op in trace["ops"] if op["name"] == "aten::_foreach_addcmul_")
        self.assertEqual([t.get("same_as") for t in addcmul["inputs"]], [None] * 8 + [4, 5, 6, 7])

    @unittest.skipUnless(FOREACH_DEFAULT, "torch 1.13 has no fused AdamW")
    def test_fused_adamw_is_one_op_per_dtype(self):
        trace = trace_mlp("torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)")
        self.assertEqual(step_ops(trace), [("aten::_foreach_add_", 4), ("aten::_fused_adamw_", 4)])
        self.assertEqual(trace["memory"]["optimizer_state_bytes"], 2 * 4 * PARAMETERS + 4 * 4)

    def test_explicit_foreach_false_is_honoured(self):
        trace = trace_mlp("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)")
        names = [name for name, _ in step_ops(trace)]
        self.assertFalse(any(name.startswith("aten::_foreach") for name in names), names)
        if STEADY_STEPS:  # per parameter: buf.mul_(momentum).add_(grad), p.add_(buf, alpha=-lr)
            self.assertEqual(names.count("aten::mul_"), 4)
            self.assertEqual(names.count("aten::add_"), 8)
        else:  # torch 1.13 records the first step: buffers cloned, then p.add_(buf)
            self.assertEqual(names.count("aten::clone"), 4)
            self.assertEqual(names.count("aten::add_"), 4)
        self.assertEqual(trace["memory"]["optimizer_state_bytes"], 4 * PARAMETERS)

    @unittest.skipUnless(FOREACH_DEFAULT, "torch 1.13 has no foreach default")
    def test_a_new_list_of_a_multi_tensor_op_is_as_fake_tensor_mode_makes_it(self):
        # SGD's weight decay (grads + wd * params) and AdamW's sqrt make new tensors; the
        # recorder makes them directly instead of FakeTensorMode's decomposition per tensor.
        optimizers = ("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)",
                      "torch.optim.AdamW(model.parameters(), lr=1e-3)")
        for optimizer in optimizers:
            direct = trace_mlp(optimizer)
            with mock.patch.object(multi_tensor, "makes_elementwise_list", lambda func: False):
                decomposed = trace_mlp(optimizer)
            strip = lambda trace: [{k: v for k, v in op.items() if k not in ("loc", "stack")}  # noqa: E731
                                   for op in trace["ops"]]
            self.assertEqual(strip(direct), strip(decomposed))
            self.assertEqual(direct["memory"], decomposed["memory"])
            made = next(op for op in direct["ops"] if op["name"] in ("aten::_foreach_add", "aten::_foreach_sqrt"))
            self.assertEqual([o["shape"] for o in made["outputs"]], [[64, 32], [64], [10, 64], [10]])

    @unittest.skipUnless(FOREACH_DEFAULT, "torch 1.13 has no foreach default")
    def test_sgd_momentum_defaults_to_foreach(self):
        # The step every iteration after the first runs: the momentum buffers exist
        # (the first step's one clone per parameter is not traced), buf = buf * m + g,
        # then p -= lr * buf.
        trace = trace_mlp("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)")
        self.assertEqual(step_ops(trace), [
            ("aten::_foreach_mul_", 4), ("aten::_foreach_add_", 4), ("aten::_foreach_add_", 4)])
        self.assertEqual(trace["memory"]["optimizer_state_bytes"], 4 * PARAMETERS)


CLIPPED = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()


def wavecast_input(batch_size=16):
    return (torch.randn(batch_size, 32, device="cuda"),)


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def iteration(x):
        optimizer.zero_grad()
        model(x).sum().backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return iteration
"""


@unittest.skipUnless("foreach" in inspect.signature(torch.nn.utils.clip_grad_norm_).parameters,
                     "torch 1.13's clip_grad_norm_ has no multi-tensor path")
class GradientClipping(unittest.TestCase):
    def test_clip_grad_norm_takes_the_multi_tensor_kernels_as_on_a_gpu(self):
        # On CUDA: one _foreach_norm over the 4 gradients, the norm of their norms, and one
        # _foreach_mul_ scaling them; not a norm and a multiply per parameter.
        with script_file(CLIPPED, "clipped.py") as path:
            trace = run_trace(path, batch_size=16)
        line = 1 + CLIPPED.split("\n").index("        nn.utils.clip_grad_norm_(model.parameters(), 1.0)")
        clipping = [(op["name"], op["args"].get("num_tensors")) for op in trace["ops"] if op["loc"]["line"] == line]
        self.assertIn(("aten::_foreach_norm", 4), clipping)
        self.assertIn(("aten::_foreach_mul_", 4), clipping)
        self.assertEqual([name for name, _ in clipping].count("aten::linalg_vector_norm"), 1)


POLICY = """
import torch
import torch.nn as nn
from torch.distributions import Categorical


def wavecast_model():
    return nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 4)).cuda()


def wavecast_input(batch_size=16):
    return torch.randn(batch_size, 8, device="cuda"), torch.randn(batch_size, device="cuda")


def wavecast_iteration(model):
    optimizer = torch.optim.Adam(model.parameters())

    def iteration(observations, advantages):
        policy = Categorical(logits=model(observations))
        actions = policy.sample()
        (-(policy.log_prob(actions) * advantages).mean()).backward()
        optimizer.step()
        optimizer.zero_grad()

    return iteration
"""


@unittest.skipUnless(HAS_COMPILE, "torch 1.13 has no shape-only multinomial: it would draw from zeros")
class Distributions(unittest.TestCase):
    def test_a_policy_gradient_step_traces_with_its_argument_checks(self):
        # Categorical checks its logits (an .all() of computed values, read as true: data as
        # it should be); the sampled actions have the batch's shape.
        with script_file(POLICY, "policy.py") as path:
            trace = run_trace(path, batch_size=16)
        names = [op["name"] for op in trace["ops"]]
        self.assertIn("aten::multinomial", names)
        self.assertIn("aten::addmm", names)
        sampled = next(op for op in trace["ops"] if op["name"] == "aten::multinomial")
        self.assertEqual(sampled["outputs"][0]["shape"], [16, 1])


# wav2vec2's and HuBERT's LayerDrop: each layer is skipped when a draw on the host falls
# under the drop probability.
LAYER_DROP = """
import torch
import torch.nn as nn

DROP = {drop}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(8))
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        for layer in self.layers:
            if self.training and torch.rand([]) < DROP:
                continue
            x = layer(x)
        return self.head(x)


def wavecast_model():
    return Net().cuda()


def wavecast_input(batch_size=4):
    return (torch.randn(batch_size, 16, device="cuda"),)


def wavecast_iteration(model):
    def iteration(x):
        model(x).sum().backward()

    return iteration
"""


class RandomDraws(unittest.TestCase):
    def layers_run(self, drop):
        with script_file(LAYER_DROP.format(drop=drop), "layer_drop.py") as path:
            trace = run_trace(path, batch_size=4)
        return [op["id"] for op in trace["ops"]
                if op["name"] == "aten::addmm" and op["phase"] == "forward" and op["inputs"][2]["shape"] == [16, 16]]

    def test_a_draw_the_script_branches_on_is_drawn_for_real_and_the_same_each_time(self):
        self.assertEqual(len(self.layers_run(0.0)), 8)
        self.assertEqual(len(self.layers_run(1.0)), 0)
        # Each trace starts from the same seed: a save does not move the prediction by chance.
        some = self.layers_run(0.5)
        self.assertTrue(0 < len(some) < 8, some)
        self.assertEqual(self.layers_run(0.5), some)


# A CTC loss whose frame counts come from a mask made with ones_like (wav2vec2's way).
CTC = """
import torch
import torch.nn as nn
import torch.nn.functional as F


def wavecast_model():
    return nn.Linear(16, 6).cuda()


def wavecast_input(batch_size=4):
    return torch.randn(batch_size, 30, 16, device="cuda"), torch.randint(1, 6, (batch_size, 7), device="cuda")


def wavecast_iteration(model):
    def iteration(features, labels):
        mask = torch.ones_like(features[..., 0], dtype=torch.long)
        log_probs = model(features).log_softmax(-1).transpose(0, 1)
        frames = mask.sum(-1)
        lengths = (labels > 0).sum(-1)
        F.ctc_loss(log_probs, labels, frames, lengths).backward()

    return iteration
"""


class LengthsFromShapes(unittest.TestCase):
    @unittest.skipUnless(HAS_COMPILE, "torch 1.13 traces CTC with fake tensors that make up log_alpha's shape "
                         "instead of asking for the lengths' values")
    def test_a_ctc_loss_over_lengths_from_a_ones_like_mask(self):
        with script_file(CTC, "ctc.py") as path:
            trace = run_trace(path, batch_size=4)
        (loss,) = [op for op in trace["ops"] if op["name"] == "aten::_ctc_loss"]
        self.assertEqual(loss["inputs"][0]["shape"], [30, 4, 6])
        self.assertEqual(loss["outputs"][1]["shape"], [4, 30, 2 * 7 + 1])  # log_alpha
        self.assertIn("aten::_ctc_loss_backward", [op["name"] for op in trace["ops"]])

    def test_counts_filled_into_an_empty_tensor(self):
        # `empty` has no values to follow, but fill_ gives every entry its own: 3 each.
        with script_file(FILLED_COUNTS, "filled.py") as path:
            trace = run_trace(path, batch_size=4)
        self.assertEqual(trace["mode"], "shape")
        (indices,) = [op for op in trace["ops"] if op["name"] == "aten::repeat_interleave"]
        self.assertEqual(indices["outputs"][0]["shape"], [12])  # each row's index, 3 times
        (rows,) = [op for op in trace["ops"] if op["name"] == "aten::index_select" and op["phase"] == "forward"]
        self.assertEqual(rows["outputs"][0]["shape"], [12, 8])


FILLED_COUNTS = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Linear(8, 8)


def wavecast_input(batch_size=4):
    return (torch.randn(batch_size, 8),)


def wavecast_iteration(model):
    def iteration(x):
        repeats = torch.empty(x.shape[0], dtype=torch.long).fill_(3)
        model(x).repeat_interleave(repeats, dim=0).sum().backward()

    return iteration
"""

MIXTURE_OF_EXPERTS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class MoE(nn.Module):
    def __init__(self, d=32, experts=8, k=2):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(experts))

    def forward(self, x):
        weights, chosen = F.softmax(self.router(x), dim=-1).topk(self.k, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            out.index_add_(0, token, weights[token, slot, None] * expert(x[token]))
        best = self.router(x).argmax(dim=-1)
        return out, best


def wavecast_model():
    return MoE().cuda()


def wavecast_input(batch_size=12):
    return (torch.randn(batch_size, 32, device="cuda"),)


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def iteration(x):
        out, best = model(x)
        top = int((best == 3).sum())
        out.sum().backward()
        optimizer.step()
        optimizer.zero_grad()

    return iteration
"""


class MixtureOfExperts(unittest.TestCase):
    def test_the_router_spreads_tokens_evenly_over_the_experts(self):
        # 12 tokens, 2 picks each, 8 experts: 3 tokens per expert, whatever the router computes.
        with script_file(MIXTURE_OF_EXPERTS, "moe.py") as path:
            trace = run_trace(path, batch_size=12)
            where, pick, read, best = (line_of(path, text) for text in (
                "torch.where(chosen == e)", ".topk(self.k", "int((best == 3).sum())", ".argmax(dim=-1)"))
        forward = [op for op in trace["ops"] if op["phase"] == "forward"]
        expert_calls = [op for op in forward if op["name"] == "aten::addmm"]
        self.assertEqual([op["inputs"][1]["shape"] for op in expert_calls], [[3, 32]] * 8)
        self.assertEqual([op["outputs"][0]["shape"] for op in forward if op["name"] == "aten::nonzero"],
                         [[3, 2]] * 8)
        self.assertIn("aten::nonzero", trace["fallback_ops"])
        # The note names the pick the shapes come from, and so does a value read (argmax's
        # picks, one of 8 per row).
        routing = [w for w in trace["warnings"] if w["kind"] == "even_routing"]
        self.assertEqual(routing, [
            {"kind": "even_routing", "severity": "info", "file": path, "line": where, "count": 8,
             "origin": {"file": path, "line": pick}},
            {"kind": "even_routing", "severity": "info", "file": path, "line": read, "count": 8,
             "origin": {"file": path, "line": best}},
        ])
        reads = [op for op in trace["ops"] if op["name"] == "aten::_local_scalar_dense"]
        self.assertEqual([op["loc"]["line"] for op in reads], [read])

    def test_even_picks(self):
        from wavecast_tracer.values import _even_picks

        def picks(func, source, out, *args, **kwargs):
            return _even_picks(func, (source, *args), kwargs, out)[1].tolist()

        scores = torch.randn(4, 3)
        _, indices = scores.topk(2, dim=-1)
        self.assertEqual(picks(torch.ops.aten.topk.default, scores, (None, indices), 2), [[0, 1], [2, 0], [1, 2], [0, 1]])
        # Over dim 0 (columns are the rows being routed): column c picks (c * k + j) mod 4.
        _, indices = scores.topk(2, dim=0)
        self.assertEqual(picks(torch.ops.aten.topk.default, scores, (None, indices), 2, 0), [[0, 2, 0], [1, 3, 1]])
        self.assertEqual(picks(torch.ops.aten.argmax.default, scores, scores.argmax(1), 1), [0, 1, 2, 0])
        self.assertIsNone(_even_picks(torch.ops.aten.argmax.default, (scores,), {}, scores.argmax()))


class RepeatedInputs(unittest.TestCase):
    def test_a_tensor_passed_twice_names_its_first_place(self):
        trace = trace_mlp("torch.optim.SGD(model.parameters(), lr=0.1)", model="model.register_forward_hook("
                          "lambda module, args, out: out * out)")
        square = [op for op in trace["ops"] if op["name"] == "aten::mul" and op["phase"] == "forward"]
        self.assertEqual(len(square), 1)
        self.assertNotIn("same_as", square[0]["inputs"][0])
        self.assertEqual(square[0]["inputs"][1]["same_as"], 0)


class ChannelsLast(unittest.TestCase):
    def test_model_and_batch_in_channels_last(self):
        trace = run_trace(os.path.join(FIXTURES, "channels_last.py"), batch_size=8)
        conv = next(op for op in trace["ops"] if op["name"] == "aten::convolution")
        nhwc = {"dtype": "float32", "contiguous": False, "memory_format": "channels_last"}
        # NHWC strides: channels innermost.
        self.assertEqual(conv["inputs"][0], dict(nhwc, shape=[8, 3, 32, 32], strides=[3072, 1, 96, 3]))
        self.assertEqual(conv["inputs"][1], dict(nhwc, shape=[16, 3, 3, 3], strides=[27, 1, 9, 3]))
        self.assertEqual(conv["outputs"][0], dict(nhwc, shape=[8, 16, 32, 32], strides=[16384, 1, 512, 16]))
        self.assertEqual(trace["memory"]["parameters_bytes"], 4 * (16 * 27 + 16 + 2 * 16 + 16 * 10 + 10))


class InPlaceOnViews(unittest.TestCase):
    """An in-place op on a view of a tensor that needs a gradient (EfficientNet's in-place
    dropout on its flattened features): autograd replays the view while it holds the view's
    lock, and the tracer must not read that view's autograd node meanwhile."""

    def test_in_place_ops_on_a_flattened_tensor_trace_and_get_their_backward(self):
        model = ("model = nn.Sequential(nn.Linear(32, 64), nn.Unflatten(1, (8, 8)), nn.Flatten(1), "
                 "nn.ReLU(inplace=True), nn.Dropout(0.1, inplace=True), nn.Linear(64, 10)).cuda()")
        optimizer = "torch.optim.SGD(model.parameters(), lr=0.1)"
        with script_file(textwrap.dedent(MLP).format(optimizer=optimizer, model=model), "mlp.py") as path:
            # In a process of its own: a deadlock holds the interpreter's lock, and this one's.
            try:
                done = subprocess.run([sys.executable, "-m", "wavecast_tracer", path, "--batch-size", "16"],
                                      capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                self.fail("the trace deadlocked on the in-place ops")
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        ops = json.loads(done.stdout)["ops"]
        forward = [op["name"] for op in ops if op["phase"] == "forward"]
        self.assertIn("aten::relu_", forward)
        backward = [op for op in ops if op["phase"] == "backward"]
        self.assertEqual(len([op for op in backward if op["name"] == "aten::threshold_backward"]), 1)
        # Every backward op is on the line that ran the forward and the backward.
        line = 1 + textwrap.dedent(MLP).split("\n").index("        model(x).sum().backward()")
        self.assertEqual({op["loc"]["line"] for op in backward}, {line})


    def test_the_gradient_of_an_op_in_place_on_a_slice_is_on_its_line(self):
        # Each op writes into h through a view made for it alone; its gradient is computed
        # in the node autograd puts on h.
        script = textwrap.dedent("""
            import torch
            import torch.nn as nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 10)

                def forward(self, x):
                    h = self.a(x)
                    h[..., 8:16].mul_(2)
                    h.view(-1, 4, 8)[:, 0].sigmoid_()
                    return self.b(h)


            def wavecast_model():
                return Model().cuda()


            def wavecast_input(batch_size=4):
                return (torch.randn(batch_size, 16, device="cuda"),)


            def wavecast_iteration(model):
                def iteration(x):
                    model(x).sum().backward()

                return iteration
            """)
        with script_file(script, "slices.py") as path:
            trace = run_trace(path, batch_size=4)
        lines = script.split("\n")
        mul_line = 1 + lines.index("        h[..., 8:16].mul_(2)")
        sigmoid_line = 1 + lines.index("        h.view(-1, 4, 8)[:, 0].sigmoid_()")
        backward = {op["name"]: op["loc"]["line"] for op in trace["ops"] if op["phase"] == "backward"}
        self.assertEqual(backward["aten::mul"], mul_line)
        self.assertEqual(backward["aten::sigmoid_backward"], sigmoid_line)


class Checkpointing(unittest.TestCase):
    """fixtures/checkpointed.py: Linear(64, 256) -> ReLU -> Linear(256, 64) checkpointed,
    then Linear(64, 10); two micro-batches of 8 before one step."""

    def trace(self, reentrant):
        with mock.patch.dict(os.environ, {"WAVECAST_REENTRANT": "1" if reentrant else "0"}):
            return run_trace(os.path.join(FIXTURES, "checkpointed.py"), batch_size=16)

    def test_recompute_in_backward_on_the_checkpoint_line(self):
        path = os.path.join(FIXTURES, "checkpointed.py")
        checkpoint_line = 1 + open(path, encoding="utf-8").read().split("\n").index(
            "        x = checkpoint(self.block, x, use_reentrant=REENTRANT)")
        for reentrant in (False, True):
            with self.subTest(reentrant=reentrant):
                trace = self.trace(reentrant)
                first = [op for op in trace["ops"] if op["name"] == "aten::addmm"
                         and op["outputs"][0]["shape"] == [8, 256]]
                # Per micro-batch: the forward, then its recomputation in backward.
                self.assertEqual([op["phase"] for op in first], ["forward", "backward"] * 2)
                self.assertEqual({op["loc"]["line"] for op in first}, {checkpoint_line})
                relu_grads = [op for op in trace["ops"] if op["name"] == "aten::threshold_backward"]
                self.assertEqual(len(relu_grads), 2)
                # Kept for backward: the block's output (8 x 64 floats) only, not the ReLU's.
                self.assertEqual(trace["memory"]["activations_saved_bytes"], 8 * 64 * 4)

    def test_gradient_accumulation_records_every_micro_batch(self):
        trace = self.trace(False)
        heads = [op for op in trace["ops"] if op["name"] == "aten::addmm" and op["outputs"][0]["shape"] == [8, 10]]
        self.assertEqual([op["phase"] for op in heads], ["forward", "forward"])
        self.assertEqual(len([op for op in trace["ops"] if op["name"] == "aten::sum"
                              and op["phase"] == "forward"]), 2)
        self.assertEqual(len({op["loc"]["line"] for op in trace["ops"] if op["phase"] == "optimizer"}), 1)


if __name__ == "__main__":
    unittest.main()
