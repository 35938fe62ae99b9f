"""Memory figures of the trace: bytes autograd saves for backward, and the peak of live tensors.

The expected values are derived by hand from what PyTorch 1.13 saves and allocates;
cpu mode (real tensors) must agree with shape mode (fake tensors).
"""

import os
import tempfile
import textwrap
import unittest

import torch

from wavecast_tracer.tracer import run_trace

SAMPLES = os.environ.get(
    "WAVECAST_SAMPLES_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "samples")
)

# Linear(32, 64) -> ReLU -> Linear(64, 10) on a batch of 16, loss = sum of the outputs.
MLP = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(inplace={inplace}), nn.Linear(64, 10))


def wavecast_input(batch_size=16):
    return (torch.randn(batch_size, 32),)


def wavecast_iteration(model):
    {optimizer}

    def iteration(x):
        model(x).sum().backward()
        {step}

    return iteration
"""

# The MLP trained by SGD, with zero_grad at the top of the iteration or after the step.
ZERO_GRAD_MLP = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


def wavecast_input(batch_size=16):
    return (torch.randn(batch_size, 32),)


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def iteration(x):
        {top}
        model(x).sum().backward()
        optimizer.step()
        {end}

    return iteration
"""

# A buffer freed and allocated again by resizing its storage in place, as FSDP2 frees each
# gathered parameter after its module's forward and grows it back for backward.
RESIZED = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Linear(4, 4, bias=False)


def wavecast_input(batch_size=1):
    return (torch.zeros(batch_size, 4),)


def wavecast_iteration(model):
    def iteration(x):
        gathered = torch.empty(1 << 20)
        gathered.untyped_storage().resize_(0)
        scratch = torch.empty(3 << 18)
        del scratch
        gathered.untyped_storage().resize_(4 << 20)
        out = torch.empty(1 << 18)
        model(x)

    return iteration
"""

FLOAT = 4
HAS_SDPA = hasattr(torch.nn.functional, "scaled_dot_product_attention")
PARAMETERS = (64 * 32 + 64 + 10 * 64 + 10) * FLOAT  # 11048
INPUT = 16 * 32 * FLOAT
HIDDEN = 16 * 64 * FLOAT  # one (16, 64) float tensor: 4096


def write_mlp(directory, inplace=False, momentum=False):
    optimizer = "pass"
    if momentum:
        optimizer = "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)"
    step = "optimizer.step()" if momentum else ""
    path = os.path.join(directory, f"mlp_{int(inplace)}{int(momentum)}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(MLP).format(inplace=inplace, optimizer=optimizer, step=step))
    return path


def saved_by_op(trace):
    return {(op["id"], op["name"]): op["saved_bytes"] for op in trace["ops"] if "saved_bytes" in op}


class SavedActivations(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_linear_relu_linear_keeps_only_the_relu_output(self):
        # addmm #1 saves its input x (the batch, not an activation; the weight is not
        # saved since x needs no gradient); relu saves its result; addmm #2 saves that
        # same result (deduplicated) and the transposed weight (a parameter); sum saves
        # only sizes.
        path = write_mlp(self.directory.name)
        for mode in ("shape", "cpu"):
            with self.subTest(mode=mode):
                trace = run_trace(path, batch_size=16, mode=mode)
                self.assertEqual(trace["memory"]["activations_saved_bytes"], HIDDEN)
                self.assertEqual(saved_by_op(trace), {(2, "aten::relu"): HIDDEN})

    def test_inplace_relu_keeps_the_linear_output(self):
        # relu_ saves its result, which is addmm #1's storage: credited to addmm.
        trace = run_trace(write_mlp(self.directory.name, inplace=True), batch_size=16)
        self.assertEqual(trace["memory"]["activations_saved_bytes"], HIDDEN)
        self.assertEqual(saved_by_op(trace), {(1, "aten::addmm"): HIDDEN})

    def test_peak_live_bytes_of_the_mlp(self):
        # Live at the peak (threshold_backward writes the gradient of the pre-activation):
        # parameters + their gradients (kept from one iteration to the next) + the batch
        # + the saved relu output + the loss and its seed gradient (4 B each) + the
        # gradient of the relu output + the new gradient of the pre-activation.
        expected = 2 * PARAMETERS + INPUT + HIDDEN + 2 * FLOAT + HIDDEN + HIDDEN
        for mode in ("shape", "cpu"):
            with self.subTest(mode=mode):
                trace = run_trace(write_mlp(self.directory.name), batch_size=16, mode=mode)
                memory = trace["memory"]
                self.assertEqual(memory["peak_live_bytes"], expected)
                self.assertEqual(memory["peak_phase"], "backward")
                self.assertEqual(trace["ops"][memory["peak_op_id"]]["name"], "aten::threshold_backward")
                # Every tensor of the small MLP is under 1 MiB: the caching allocator
                # serves them all from 2 MiB segments, as few as hold the peak.
                self.assertEqual(memory["peak_reserved_bytes"] % (2 << 20), 0)
                self.assertGreaterEqual(memory["peak_reserved_bytes"], expected)
                self.assertLess(memory["peak_reserved_bytes"], expected + 3 * (2 << 20))

    def test_live_bytes_per_op_reach_the_peak_where_the_peak_is(self):
        # Each op that allocates carries the bytes live once its outputs exist: the
        # threshold_backward at the peak carries the peak; the first addmm the baseline
        # (parameters, gradients, the batch) plus its own output.
        for mode in ("shape", "cpu"):
            with self.subTest(mode=mode):
                trace = run_trace(write_mlp(self.directory.name), batch_size=16, mode=mode)
                live = {op["id"]: op["live_bytes"] for op in trace["ops"] if "live_bytes" in op}
                memory = trace["memory"]
                self.assertEqual(live[memory["peak_op_id"]], memory["peak_live_bytes"])
                self.assertEqual(max(live.values()), memory["peak_live_bytes"])
                first = next(op for op in trace["ops"] if op["name"] == "aten::addmm")
                self.assertEqual(live[first["id"]], 2 * PARAMETERS + INPUT + HIDDEN)
                self.assertNotIn("live_bytes", trace["ops"][0], "aten::t is a view: allocates nothing")

    @unittest.skipUnless(hasattr(torch.Tensor, "untyped_storage"),
                         "torch 1.13 has no Tensor.untyped_storage to resize")
    def test_a_storage_resized_in_place_is_freed_and_allocated_there(self):
        # Live at the peak: the weight (64 B) and the batch (16 B), the 4 MiB buffer grown
        # back, the 1 MiB one and the Linear's output (16 B). The 3 MiB scratch lived while
        # the buffer was resized to nothing: counting the buffer throughout would make the
        # peak 7 MiB.
        path = os.path.join(self.directory.name, "resized.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(RESIZED)
        for mode in ("shape", "cpu"):
            with self.subTest(mode=mode):
                memory = run_trace(path, batch_size=1, mode=mode)["memory"]
                self.assertEqual(memory["peak_live_bytes"], (5 << 20) + 64 + 16 + 16)

    def test_optimizer_state_counts_from_the_start_of_the_iteration(self):
        # SGD's momentum buffers (one per parameter) appear at the first step and stay:
        # in every later iteration they are live during backward too.
        trace = run_trace(write_mlp(self.directory.name, momentum=True), batch_size=16)
        memory = trace["memory"]
        self.assertEqual(memory["optimizer_state_bytes"], PARAMETERS)
        self.assertEqual(memory["peak_live_bytes"],
                         3 * PARAMETERS + INPUT + HIDDEN + 2 * FLOAT + HIDDEN + HIDDEN)
        self.assertEqual(memory["peak_phase"], "backward")

    def test_gradients_set_to_none_live_only_from_backward(self):
        # zero_grad(set_to_none=True), at the top of the iteration or after the step,
        # frees the previous iteration's gradients before the forward. The peak moves to the
        # end of backward: the first Linear's bias gradient (a sum over the batch) is made
        # while every gradient, the parameters, the batch, the gradient of the
        # pre-activation it sums, and the loss and its seed gradient are live.
        # set_to_none=False zeroes them in place: they stay live throughout, and the peak is
        # threshold_backward (test_peak_live_bytes_of_the_mlp).
        for where in ("top", "after_step"):
            for set_to_none in (True, False):
                zero = f"optimizer.zero_grad(set_to_none={set_to_none})"
                script = ZERO_GRAD_MLP.format(top=zero if where == "top" else "pass",
                                              end=zero if where == "after_step" else "pass")
                path = os.path.join(self.directory.name, f"mlp_zero_grad_{where}_{set_to_none}.py")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(script)
                if set_to_none:
                    expected, op = 2 * PARAMETERS + INPUT + HIDDEN + 2 * FLOAT, "aten::sum"
                else:
                    expected, op = 2 * PARAMETERS + INPUT + 3 * HIDDEN + 2 * FLOAT, "aten::threshold_backward"
                for mode in ("shape", "cpu"):
                    with self.subTest(where=where, set_to_none=set_to_none, mode=mode):
                        trace = run_trace(path, batch_size=16, mode=mode)
                        memory = trace["memory"]
                        self.assertEqual(memory["peak_live_bytes"], expected)
                        self.assertEqual(memory["gradients_at_peak_bytes"], PARAMETERS)
                        self.assertEqual(memory["peak_phase"], "backward")
                        self.assertEqual(trace["ops"][memory["peak_op_id"]]["name"], op)

    def test_batch_size_scales_the_activations(self):
        path = write_mlp(self.directory.name)
        small = run_trace(path, batch_size=16)["memory"]
        large = run_trace(path, batch_size=64)["memory"]
        self.assertEqual(large["activations_saved_bytes"], 4 * small["activations_saved_bytes"])
        # Everything but parameters and gradients grows with the batch.
        self.assertEqual(large["peak_live_bytes"] - 2 * PARAMETERS,
                         4 * (small["peak_live_bytes"] - 2 * PARAMETERS) - 3 * 2 * FLOAT)


# Linear(32, 64) -> Dropout(0.1) -> Linear(64, 10), trained: dropout as CUDA runs it.
DROPOUT = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Sequential(nn.Linear(32, 64), nn.Dropout(0.1), nn.Linear(64, 10))


def wavecast_input(batch_size=16):
    return (torch.randn(batch_size, 32),)


def wavecast_iteration(model):
    def iteration(x):
        model(x).sum().backward()

    return iteration
"""


class Dropout(unittest.TestCase):
    def test_training_dropout_is_one_fused_op_with_a_byte_mask(self):
        # CUDA: native_dropout (output + bool mask) forward, native_dropout_backward;
        # not the CPU composite bernoulli_/div_/mul with a float mask.
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "dropout.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(DROPOUT)
            for mode in ("shape", "cpu"):
                with self.subTest(mode=mode):
                    trace = run_trace(path, batch_size=16, mode=mode)
                    names = [op["name"] for op in trace["ops"]]
                    self.assertEqual(names.count("aten::native_dropout"), 1, names)
                    self.assertEqual(names.count("aten::native_dropout_backward"), 1, names)
                    self.assertNotIn("aten::bernoulli_", names)
                    # Saved for backward: the 1-byte mask and the dropout output (the
                    # second Linear's input), not a float mask.
                    self.assertEqual(trace["memory"]["activations_saved_bytes"], HIDDEN + HIDDEN // FLOAT)


class ShapeModeMatchesRealExecution(unittest.TestCase):
    def test_samples(self):
        for name, batch in (("small_cnn.py", 4), ("small_transformer.py", 2)):
            path = os.path.abspath(os.path.join(SAMPLES, name))
            shape = run_trace(path, batch_size=batch, mode="shape")["memory"]
            cpu = run_trace(path, batch_size=batch, mode="cpu")["memory"]
            with self.subTest(sample=name):
                if name == "small_transformer.py" and HAS_SDPA:
                    self.assertEqual(*self.attention_difference(shape, cpu))
                else:
                    self.assertEqual(shape, cpu)
                self.assertGreater(shape["activations_saved_bytes"], 0)
                # Everything kept for backward is live when backward starts, beside the
                # parameters and the optimizer state; the gradients, all live at the step.
                self.assertGreater(shape["peak_live_bytes"],
                                   shape["parameters_bytes"] + shape["optimizer_state_bytes"]
                                   + shape["activations_saved_bytes"])
                self.assertGreater(shape["peak_live_bytes"],
                                   shape["parameters_bytes"] + shape["gradients_bytes"]
                                   + shape["optimizer_state_bytes"])

    def attention_difference(self, shape, cpu):
        """torch 2.x: shape mode records SDPA as CUDA's memory-efficient kernel, cpu mode
        runs the CPU's math path (training dropout rules out its fused kernel). Per layer
        (batch 2, 4 heads, 64 tokens, head_dim 32) the math path keeps the scaled query,
        the softmax output, the float dropout mask and the dropped-out weights; the
        efficient kernel keeps its logsumexp (seq padded to 32) and RNG seed and offset."""
        weights = 2 * 4 * 64 * 64 * FLOAT
        math_kept = 2 * 4 * 64 * 32 * FLOAT + 3 * weights
        efficient_kept = 2 * 4 * 64 * FLOAT + 2 * 8
        difference = 2 * (math_kept - efficient_kept)
        self.assertEqual(shape["activations_saved_bytes"], cpu["activations_saved_bytes"] - difference)
        # zero_grad() sets the gradients to None before the forward, so at batch 2 the peak
        # is Adam's step (its foreach temporaries beside every gradient and both moments),
        # after the attention's saved tensors are gone: the same in both modes.
        self.assertEqual(shape["peak_live_bytes"], cpu["peak_live_bytes"])
        self.assertEqual(shape["peak_phase"], "optimizer")
        drop = ("activations_saved_bytes", "peak_live_bytes", "peak_op_id")
        return ({k: v for k, v in shape.items() if k not in drop}, {k: v for k, v in cpu.items() if k not in drop})

if __name__ == "__main__":
    unittest.main()
