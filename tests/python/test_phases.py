"""Which phase an op is in (trace_state.TraceState): the work on the gradients between the
backward pass that made them and the step (clipping, a GradScaler's unscale) is the
optimizer's, while the next micro-batch's forward and what follows the step are not."""

import collections
import unittest

import torch

from source_lines import script_file
from wavecast_tracer.tracer import run_trace

SCALED = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()


def wavecast_input(batch_size=16):
    return (torch.randn(batch_size, 32, device="cuda"),)


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler()

    def iteration(x):
        for micro in range(2):
            loss = model(x).square().mean()  # forward
            scaler.scale(loss).backward()  # backward
        scaler.unscale_(optimizer)  # unscale
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # clip
        scaler.step(optimizer)  # step
        scaler.update()  # update
        optimizer.zero_grad()

    return iteration
"""


@unittest.skipIf(torch.__version__.startswith("1."),
                 "torch 1.13's fake tensors are meta tensors, which its GradScaler refuses as not CUDA's")
class GradientWork(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with script_file(SCALED) as path:
            cls.trace = run_trace(path, batch_size=16)
        cls.phases = collections.defaultdict(collections.Counter)
        cls.work = collections.Counter()
        for op in cls.trace["ops"]:
            line = op["loc"]["line"]
            cls.phases[line][op["phase"]] += 1
            cls.work[line] += bool(op.get("gradient_work"))

    def line(self, marker):
        return 1 + next(i for i, text in enumerate(SCALED.split("\n")) if text.endswith(f"# {marker}"))

    def test_clipping_and_unscaling_are_the_optimizers_work_before_its_step(self):
        for marker in ("unscale", "clip"):
            line = self.line(marker)
            self.assertEqual(set(self.phases[line]), {"optimizer"}, marker)
            self.assertEqual(self.work[line], sum(self.phases[line].values()), marker)
        clip = [op["name"] for op in self.trace["ops"] if op["loc"]["line"] == self.line("clip")]
        self.assertIn("aten::mul_" if "aten::mul_" in clip else "aten::_foreach_mul_", clip)

    def test_the_step_itself_is_no_gradient_work(self):
        step = [op for op in self.trace["ops"] if op["loc"]["line"] == self.line("step")]
        self.assertTrue(all(op["phase"] == "optimizer" for op in step), step)
        self.assertTrue(any(not op.get("gradient_work") for op in step), "the step's own update")

    def test_the_next_micro_batch_and_what_follows_the_step_are_not(self):
        # The second micro-batch's forward runs after the first one's gradients exist; the
        # scaler's update reads what its unscale wrote, after the step spent the gradients.
        self.assertEqual(set(self.phases[self.line("forward")]), {"forward", "backward"})
        self.assertGreater(self.phases[self.line("backward")]["forward"], 0, "the loss's scaling")
        self.assertEqual(self.phases[self.line("backward")]["optimizer"], 0)
        self.assertEqual(set(self.phases[self.line("update")]), {"forward"})


MANUAL = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()


def wavecast_input(batch_size=16):
    return (torch.randn(batch_size, 32, device="cuda"),)


def wavecast_iteration(model):
    def iteration(x):
        loss = model(x).square().mean()  # forward
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter -= 0.01 * parameter.grad  # update
        model(x).sum()  # forward again

    return iteration
"""


class UpdateByHand(unittest.TestCase):
    def test_an_update_without_an_optimizer_is_its_work_and_the_next_forward_is_not(self):
        # No optimizer holds the parameters: their gradients are the ones backward made. The
        # parameters the update wrote are what the next forward takes.
        with script_file(MANUAL) as path:
            trace = run_trace(path, batch_size=16)
        lines = MANUAL.split("\n")
        phases = collections.defaultdict(set)
        for op in trace["ops"]:
            phases[lines[op["loc"]["line"] - 1].rsplit("# ", 1)[-1]].add(op["phase"])
        self.assertEqual(phases["update"], {"optimizer"})
        self.assertEqual(phases["forward again"], {"forward"})


if __name__ == "__main__":
    unittest.main()
