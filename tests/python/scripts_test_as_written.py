"""Training scripts traced as written (samples/scripts/): each kind is traced, its lines
carry what they run, and its predicted GPU time on an H100 lands within 10% of the same
model and step written with provider functions (the `*_providers.py` twins)."""

import collections
import importlib.util
import json
import os
import subprocess
import tempfile
import unittest

from source_lines import line_of
from wavecast_tracer.batches import HOST_WORK_OP
from wavecast_tracer.tracer import run_trace

SCRIPTS = os.path.abspath(os.path.join(os.environ.get(
    "WAVECAST_SAMPLES_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "samples")), "scripts"))
WAVECAST = os.environ.get("WAVECAST_BINARY", "")
# Within 10% of the provider twin: the two run the same ops but for what a script adds
# around them (printing loss.item(), the data loader's batch, a Trainer's bookkeeping).
TOLERANCE = 0.10


def script(name):
    return os.path.join(SCRIPTS, name)


def lines_of(trace, phase):
    return {op["loc"]["line"] for op in trace["ops"] if op["phase"] == phase and op["name"] != HOST_WORK_OP}


def names(trace):
    return collections.Counter(op["name"] for op in trace["ops"] if op["name"] != HOST_WORK_OP)


def predicted_gpu_ms(trace):
    """GPU busy time of one iteration on an H100, from `wavecast predict` of the saved trace."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(trace, f)
    try:
        out = subprocess.run([WAVECAST, "predict", f.name, "--gpu", "H100", "--json"], check=True,
                             capture_output=True, text=True, timeout=300).stdout
    finally:
        os.unlink(f.name)
    return json.loads(out)["summaries"][0]["gpu_ms"]


def needs(module):
    missing = importlib.util.find_spec(module) is None
    return unittest.skipIf(missing, f"{module} is not installed in this Python environment "
                                    f"(scripts/python-env/test.lock installs it)")


class AsWritten:
    """Mixed into one TestCase per sample: traces the script and its twin once."""

    name = ""
    twin_batch = None
    args = ()
    forward_text = ""  # the line whose forward (and backward) ops the model's call carries
    step_text = ""  # the line the optimizer's ops are credited to

    @classmethod
    def setUpClass(cls):
        cls.path = script(cls.name + ".py")
        cls.trace = run_trace(cls.path, script_args=list(cls.args))
        cls.twin = run_trace(script(cls.name + "_providers.py"), batch_size=cls.twin_batch)

    def test_model_line_carries_forward_and_backward(self):
        line = line_of(self.path, self.forward_text)
        self.assertIn(line, lines_of(self.trace, "forward"))
        self.assertIn(line, lines_of(self.trace, "backward"))
        self.assertEqual(self.trace["providers"], {})
        self.assertEqual(self.trace["batch_size"], self.twin_batch)
        self.assertEqual(self.trace["samples_per_iteration"], self.twin_batch)  # one batch per step

    def test_step_line_carries_the_optimizer(self):
        self.assertEqual(lines_of(self.trace, "optimizer"), {line_of(self.path, self.step_text)})

    def test_one_iteration_of_the_same_compute_as_the_twin(self):
        for op in ("aten::convolution", "aten::addmm", "aten::mm", "aten::convolution_backward"):
            self.assertEqual(names(self.trace)[op], names(self.twin)[op], op)

    @unittest.skipUnless(os.path.exists(WAVECAST), "WAVECAST_BINARY (build/bin/wavecast) is not built")
    def test_predicted_h100_time_within_ten_percent_of_the_twin(self):
        script_ms, twin_ms = predicted_gpu_ms(self.trace), predicted_gpu_ms(self.twin)
        self.assertGreater(twin_ms, 0)
        self.assertLessEqual(abs(script_ms - twin_ms), TOLERANCE * twin_ms, (script_ms, twin_ms))


class PlainLoop(AsWritten, unittest.TestCase):
    name = "plain_loop"
    args = ("--batch-size", "64")
    twin_batch = 64
    forward_text = "loss = criterion(model(images), labels)"
    step_text = "scaler.step(optimizer)"

    def test_real_batches_are_host_time_on_the_loop_line(self):
        loop = line_of(self.path, "for step, (images, labels) in enumerate(loader)")
        host = [op for op in self.trace["ops"] if op["name"] == HOST_WORK_OP]
        self.assertEqual([op["loc"]["line"] for op in host], [loop])
        self.assertEqual(host[0]["device"], "cpu")
        self.assertGreater(host[0]["args"]["host_ms"], 0)
        notes = [w for w in self.trace["warnings"] if w["kind"] == "host_time_measured"]
        self.assertEqual([(w["line"], w["ms"]) for w in notes], [(loop, host[0]["args"]["host_ms"])])

    def test_tensorboard_is_stubbed_with_a_note_at_its_line(self):
        stubbed = {(w["line"], w["call"]) for w in self.trace["warnings"] if w["kind"] == "call_stubbed"}
        self.assertIn((line_of(self.path, "writer = SummaryWriter(args.out)"), "SummaryWriter"), stubbed)

    def test_amp_scaler_runs_as_on_a_gpu(self):
        self.assertEqual(self.trace["precision"]["autocast"], "float16")
        self.assertEqual(names(self.trace)["aten::_amp_foreach_non_finite_check_and_unscale_"], 1)


@needs("transformers")
@needs("accelerate")
class HuggingFaceTrainer(AsWritten, unittest.TestCase):
    name = "hf_trainer"
    twin_batch = 8
    # The model is the library's: its ops are credited to the script's trainer.train() line.
    forward_text = "trainer.train()"
    step_text = "trainer.train()"

    def test_report_to_is_stubbed(self):
        stubbed = {w["call"] for w in self.trace["warnings"] if w["kind"] == "call_stubbed"}
        self.assertIn("report_to", stubbed)


@needs("accelerate")
class AccelerateLoop(AsWritten, unittest.TestCase):
    name = "accelerate_loop"
    twin_batch = 64
    forward_text = "loss = criterion(model(features), labels)"
    step_text = "optimizer.step()"


@needs("lightning")
class LightningModule(AsWritten, unittest.TestCase):
    name = "lightning_module"
    twin_batch = 32
    forward_text = "return self.head(self.encoder(self.embed(x)).mean(dim=1))"
    # Lightning steps inside trainer.fit: the optimizer's ops are credited to that line.
    step_text = "trainer.fit(Classifier(), loader)"

    def test_logger_and_checkpointing_are_stubbed(self):
        stubbed = {w["call"] for w in self.trace["warnings"] if w["kind"] == "call_stubbed"}
        self.assertLessEqual({"lightning logger", "lightning checkpointing"}, stubbed)


@needs("timm")
class TimmStyle(AsWritten, unittest.TestCase):
    name = "timm_style"
    twin_batch = 32
    forward_text = "loss = loss_fn(model(images), target)"
    step_text = "loss_scaler(loss, optimizer, clip_grad=None, parameters=model.parameters())"


if __name__ == "__main__":
    unittest.main()
