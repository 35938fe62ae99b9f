"""A kept model called as in the last trace is replayed from that trace's records
(replay.py), and the trace is the one a fresh worker makes: ops, lines, memory figures."""

import os
import sys
import tempfile
import textwrap
import unittest

from wavecast_tracer.reuse import TraceCache
from wavecast_tracer.tracer import run_trace

REPLAYED = "replaying the model's traced ops"

ENTRY = """
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 50


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.token = nn.Embedding(VOCAB, 8)
        self.head = nn.Linear(8, VOCAB, bias=False)
        self.head.weight = self.token.weight  # tied: two gradients summed into one
        self.extra = False

    def forward(self, images, tokens):
        x = F.relu(self.bn(self.conv(images))).mean(dim=(2, 3))
        x = x[:, None, :] + self.token(tokens)
        if self.extra:
            x = x * 2
        return self.head(x)


def wavecast_model():
    return Net()


def wavecast_input(batch_size=4):
    return torch.randn(batch_size, 3, 8, 8), torch.randint(0, VOCAB, (batch_size, 5))


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def iteration(images, tokens):
        optimizer.zero_grad()
        logits = model(images, tokens)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens.reshape(-1))
        loss.backward()
        optimizer.step()

    return iteration
"""


def _facts(document):
    """The document but what was timed on this CPU: the trace, a copy's staging."""
    facts = {key: value for key, value in document.items() if key != "trace_seconds"}
    facts["ops"] = [dict(op, args={k: v for k, v in op["args"].items() if k != "staging_ms"})
                    for op in document["ops"]]
    return facts


class ReplayTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.entry = os.path.join(self.directory.name, "train.py")
        self.write(ENTRY)
        self.cache = TraceCache()
        self.steps = []

    def tearDown(self):
        self.directory.cleanup()

    def write(self, text):
        with open(self.entry, "w") as f:
            f.write(textwrap.dedent(text))
        os.utime(self.entry, ns=(1, 1))

    def edit(self, old, new):
        with open(self.entry) as f:
            text = f.read()
        self.assertIn(old, text)
        self.write(text.replace(old, new))

    def kept(self):
        self.steps = []
        return run_trace(self.entry, None, "shape", self.steps.append, cache=self.cache)

    def second_trace(self):
        """The trace after one that recorded the model's calls."""
        self.kept()
        return self.kept()

    def assertSameAsFresh(self, document):
        fresh = run_trace(self.entry, None, "shape")
        self.assertEqual(_facts(document)["ops"], _facts(fresh)["ops"])
        self.assertEqual(_facts(document), _facts(fresh))

    def test_an_unchanged_call_is_replayed_and_traces_the_same(self):
        first = self.kept()
        self.assertNotIn(REPLAYED, self.steps)
        second = self.kept()
        self.assertIn(REPLAYED, self.steps)
        self.assertEqual(_facts(first), _facts(second))
        self.assertSameAsFresh(second)
        names = [op["name"] for op in second["ops"]]
        self.assertIn("aten::convolution_backward", names)
        self.assertIn("aten::embedding_dense_backward", names)
        self.assertGreater(second["memory"]["activations_saved_bytes"], 0)

    def test_a_moved_call_is_replayed_with_its_new_line(self):
        self.kept()
        self.edit("        optimizer.zero_grad()\n",
                  "        optimizer.zero_grad()\n        # two lines that move the call\n\n")
        document = self.kept()
        self.assertIn(REPLAYED, self.steps)
        call_line = next(op["stack"][0]["line"] for op in document["ops"] if op["name"] == "aten::convolution")
        with open(self.entry) as f:
            self.assertIn("model(images, tokens)", f.read().splitlines()[call_line - 1])
        self.assertSameAsFresh(document)

    def test_a_loss_that_sends_another_gradient_back_is_traced_again(self):
        self.kept()
        self.kept()
        # sum's gradient reaches the model's last op expanded (strides 0), not contiguous
        self.edit("        loss.backward()", "        print(\"step\")\n        logits.sum().backward()")
        document = self.kept()
        self.assertIn(REPLAYED, self.steps)  # found out only in the backward: traced again
        self.assertEqual(self.steps.count("tracing forward"), 2)
        self.assertEqual(document["user_output"], "step\n")  # printed by the trace that counts
        self.assertSameAsFresh(document)
        document = self.kept()
        self.assertIn(REPLAYED, self.steps)
        self.assertEqual(self.steps.count("tracing forward"), 1)
        self.assertSameAsFresh(document)

    def test_a_setting_the_iteration_changes_is_traced_again(self):
        self.kept()
        self.kept()
        self.edit("        logits = model(images, tokens)",
                  "        model.extra = True\n        logits = model(images, tokens)")
        document = self.kept()
        self.assertNotIn(REPLAYED, self.steps)
        self.assertSameAsFresh(document)
        document = self.kept()  # the new setting's call was recorded in turn
        self.assertIn(REPLAYED, self.steps)
        self.assertSameAsFresh(document)

    def test_a_mask_made_on_the_host_inside_the_call_is_replayed(self):
        # nn.Transformer's generate_square_subsequent_mask: a host tensor moved to the GPU.
        self.edit("        if self.extra:",
                  "        x = x + torch.zeros(x.shape[1], x.shape[2]).to(images.device)\n        if self.extra:")
        document = self.second_trace()
        self.assertIn(REPLAYED, self.steps)
        self.assertIn("cpu", [op.get("device") for op in document["ops"]])
        self.assertSameAsFresh(document)

    def test_what_the_call_prints_is_printed_again(self):
        self.edit("        if self.extra:", "        print(\"tokens\", tuple(tokens.shape))\n        if self.extra:")
        document = self.second_trace()
        self.assertIn(REPLAYED, self.steps)
        self.assertIn("tokens (4, 5)", document["user_output"])
        self.assertSameAsFresh(document)

    def test_checkpointed_blocks_are_replayed_with_their_recompute(self):
        self.edit("import torch.nn.functional as F",
                  "import torch.nn.functional as F\nfrom torch.utils.checkpoint import checkpoint")
        self.edit("        x = F.relu(self.bn(self.conv(images))).mean(dim=(2, 3))",
                  "        x = checkpoint(lambda i: F.relu(self.bn(self.conv(i))), images, use_reentrant=False)\n"
                  "        x = checkpoint(lambda t: t.mean(dim=(2, 3)), x, use_reentrant=False)")
        document = self.second_trace()
        self.assertIn(REPLAYED, self.steps)
        names = [op["name"] for op in document["ops"] if op["phase"] == "backward"]
        self.assertIn("aten::convolution", names)  # the recompute
        self.assertSameAsFresh(document)

    def test_a_call_that_reads_a_value_is_not_recorded(self):
        self.edit("        if self.extra:", "        if bool(tokens.max() > 0):")
        document = self.second_trace()
        self.assertNotIn(REPLAYED, self.steps)
        self.assertSameAsFresh(document)

    def test_a_call_whose_shapes_come_from_even_picks_is_replayed(self):
        # A mixture of experts: the tokens each expert gets (nonzero, run for real) depend on
        # the router's picks, which shape mode spreads evenly: on shapes alone, so the call
        # traces the same every time.
        self.edit("        x = x[:, None, :] + self.token(tokens)", """        x = x[:, None, :] + self.token(tokens)
        flat = x.reshape(-1, 8)
        chosen = flat.topk(2, dim=-1).indices
        token, _ = torch.where(chosen == 3)
        x = x + flat[token].sum() * 0""")
        document = self.second_trace()
        self.assertIn(REPLAYED, self.steps)
        self.assertIn("aten::nonzero", document["fallback_ops"])
        self.assertIn("even_routing", [w["kind"] for w in document["warnings"]])
        self.assertSameAsFresh(document)

    def test_an_input_that_needs_a_gradient_is_traced_again(self):
        self.edit("        logits = model(images, tokens)",
                  "        images = images.requires_grad_()\n        logits = model(images, tokens)")
        document = self.second_trace()
        self.assertNotIn(REPLAYED, self.steps)
        self.assertSameAsFresh(document)

    def test_an_autocast_call_is_replayed_with_its_casts(self):
        # The weights' bf16 copies live in the autocast cache until the region ends: before
        # the backward here, after it in the next test.
        self.edit("        logits = model(images, tokens)",
                  "        with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
                  "            logits = model(images, tokens)")
        document = self.second_trace()
        self.assertIn(REPLAYED, self.steps)
        self.assertEqual(document["precision"]["autocast"], "bfloat16")
        self.assertIn("aten::_to_copy", [op["name"] for op in document["ops"]])
        self.assertSameAsFresh(document)

    def test_a_backward_inside_the_autocast_region_is_replayed(self):
        self.edit("        logits = model(images, tokens)\n"
                  "        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens.reshape(-1))\n"
                  "        loss.backward()\n",
                  "        with torch.autocast(\"cuda\", dtype=torch.float16):\n"
                  "            logits = model(images, tokens)\n"
                  "            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens.reshape(-1))\n"
                  "            loss.backward()\n")
        document = self.second_trace()
        self.assertIn(REPLAYED, self.steps)
        self.assertSameAsFresh(document)

    def test_a_cast_used_after_the_call_is_not_recorded(self):
        # The cache hands the head's copy to code after the call: a replay would not know it.
        self.edit("        logits = model(images, tokens)\n",
                  "        with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
                  "            logits = model(images, tokens)\n"
                  "            logits = logits + F.linear(logits[..., :8].float(), model.head.weight).mean()\n")
        document = self.second_trace()
        self.assertNotIn(REPLAYED, self.steps)
        self.assertSameAsFresh(document)

    def test_a_model_called_twice_traces_as_a_fresh_worker(self):
        # The engine runs the two calls' backward nodes interleaved: neither call's backward
        # is a run of its own ops, so neither is replayed.
        self.edit("        logits = model(images, tokens)",
                  "        logits = model(images, tokens) + model(images[:2].repeat(2, 1, 1, 1), tokens)")
        document = self.second_trace()
        self.assertNotIn(REPLAYED, self.steps)
        self.assertSameAsFresh(document)


if __name__ == "__main__":
    sys.exit(unittest.main())
