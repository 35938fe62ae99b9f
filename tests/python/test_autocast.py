"""CUDA autocast and the precision settings, traced without a GPU."""

import importlib.util
import math
import os
import tempfile
import textwrap
import unittest
from unittest import mock

import torch

from source_lines import line_of
from wavecast_tracer import recorder
from wavecast_tracer.errors import TraceError
from wavecast_tracer.tracer import run_trace

SAMPLES = os.environ.get(
    "WAVECAST_SAMPLES_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "samples")
)
# torch 1.13's GradScaler asserts that the loss is a CUDA tensor; 2.x's takes any device.
HAS_AMP_GRAD_SCALER = hasattr(torch.amp, "GradScaler")

# The shared Linear runs twice in the autocast region: its weight is cast once (cached).
AMP = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(32, 32)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.shared(self.shared(x).relu())
        return self.head(self.norm(x).softmax(dim=-1))


def wavecast_model():
    return Net().cuda()


def wavecast_input(batch_size=16):
    return torch.randn(batch_size, 32, device="cuda"), torch.randint(0, 10, (batch_size,), device="cuda")


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    {setup}

    def iteration(x, y):
        optimizer.zero_grad()
        with {autocast}:
            loss = F.cross_entropy(model(x), y)
        {step}

    return iteration
"""


def write(directory, name, autocast, setup="", step="loss.backward(); optimizer.step()"):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(AMP).format(autocast=autocast, setup=setup, step=step))
    return path


def forward_ops(trace, name):
    return [op for op in trace["ops"] if op["name"] == name and op["phase"] == "forward"]


def dtypes(op):
    return [i["dtype"] if i else None for i in op["inputs"]]


# BCELoss outside a region and on a CPU tensor inside one run; on a GPU tensor inside
# one, CUDA autocast refuses it.
BCE = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Sequential(nn.Linear(8, 1), nn.Sigmoid()).cuda()


def wavecast_input(batch_size=4):
    return torch.randn(batch_size, 8, device="cuda"), torch.rand(batch_size, 1, device="cuda")


def wavecast_iteration(model):
    loss_fn = nn.BCELoss()

    def iteration(x, y):
        loss = loss_fn(model(x), y)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled={enabled}):
            host = torch.rand(4)
            torch.nn.functional.binary_cross_entropy(host, host)
            loss = loss + loss_fn(model(x), y)
        loss.backward()

    return iteration
"""


class CudaAutocast(unittest.TestCase):
    def setUp(self):
        self.directory = self.enterContext(tempfile.TemporaryDirectory())

    def test_bf16_region_casts_as_cuda(self):
        path = write(self.directory, "bf16.py", 'torch.autocast("cuda", dtype=torch.bfloat16)')
        trace = run_trace(path, batch_size=16)
        # Matmuls in bf16 (bias, input, weight), forward and backward.
        self.assertEqual([dtypes(op) for op in forward_ops(trace, "aten::addmm")], [["bfloat16"] * 3] * 3)
        self.assertEqual({i["dtype"] for op in trace["ops"] if op["name"] == "aten::mm" for i in op["inputs"]},
                         {"bfloat16"})
        # layer_norm, softmax, log_softmax and the loss in float32; relu follows its input.
        self.assertEqual(dtypes(forward_ops(trace, "aten::native_layer_norm")[0]), ["float32"] * 3)
        self.assertEqual(dtypes(forward_ops(trace, "aten::relu")[0]), ["bfloat16"])
        self.assertEqual(forward_ops(trace, "aten::_softmax")[0]["outputs"][0]["dtype"], "float32")
        # cross_entropy's log_softmax keeps the logits' dtype (the composite passes it);
        # nll_loss casts its result to float32.
        self.assertEqual(dtypes(forward_ops(trace, "aten::_log_softmax")[0]), ["bfloat16"])
        self.assertEqual(dtypes(forward_ops(trace, "aten::nll_loss_forward")[0]), ["float32", "int64", None])
        # Down: the shared weight and bias once, the head's two, the input and the softmax
        # output entering the head. Up: layer_norm's input and log_softmax's output.
        casts = [(dtypes(op)[0], op["outputs"][0]["dtype"]) for op in forward_ops(trace, "aten::_to_copy")]
        self.assertEqual(casts.count(("float32", "bfloat16")), 4 + 2)
        self.assertEqual(casts.count(("bfloat16", "float32")), 2)
        self.assertEqual(trace["precision"], {"matmul_tf32": False, "cudnn_tf32": True,
                                              "float32_matmul_precision": "highest", "autocast": "bfloat16"})
        # The optimizer updates the float32 parameters.
        self.assertEqual({i["dtype"] for op in trace["ops"] if op["phase"] == "optimizer" for i in op["inputs"]
                          if i}, {"float32"})

    @unittest.skipUnless(HAS_AMP_GRAD_SCALER, "torch 1.13's CPU has no float16 relu: cpu mode cannot run float16")
    def test_cpu_mode_computes_float16_matrix_work_in_float32_keeping_its_dtypes(self):
        # The CPU has no fast float16 matrix kernels (a ResNet-18 at batch 8 traced 5x slower):
        # cpu mode runs them in float32 and rounds the results, the ops keep float16.
        path = write(self.directory, "fp16.py", 'torch.autocast("cuda", dtype=torch.float16)')
        with mock.patch.object(recorder, "_computed_in_float32", wraps=recorder._computed_in_float32) as widened:
            trace = run_trace(path, batch_size=16, mode="cpu")
        self.assertEqual(trace["mode"], "cpu")
        self.assertEqual([dtypes(op) for op in forward_ops(trace, "aten::addmm")], [["float16"] * 3] * 3)
        self.assertEqual({op["outputs"][0]["dtype"] for op in trace["ops"] if op["name"] in ("aten::addmm", "aten::mm")},
                         {"float16"})
        matrix_ops = sum(op["name"] in ("aten::addmm", "aten::mm") for op in trace["ops"])
        self.assertEqual(widened.call_count, matrix_ops)

    def test_cudnn_rnn_runs_in_float16_under_either_16_bit_dtype(self):
        # AutocastRNN.cpp: the weights are copied into a float16 buffer and the input and
        # states cast, whatever the region's dtype; the layer's outputs are float16.
        path = os.path.join(self.directory, "lstm.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent("""
                import torch
                import torch.nn as nn

                def wavecast_model():
                    return nn.LSTM(16, 32, num_layers=2).cuda()

                def wavecast_input(batch_size=4):
                    return (torch.randn(10, batch_size, 16, device="cuda"),)

                def wavecast_iteration(model):
                    def iteration(x):
                        with torch.autocast("cuda", dtype=torch.bfloat16):
                            out, _ = model(x)
                            loss = out.float().sum()
                        loss.backward()
                    return iteration
            """))
        for mode in ("shape", "cpu"):
            with self.subTest(mode=mode):
                trace = run_trace(path, batch_size=4, mode=mode)
                (lstm,) = forward_ops(trace, "aten::lstm")
                self.assertEqual({d for d in dtypes(lstm) if d}, {"float16"})
                self.assertEqual(lstm["outputs"][0]["dtype"], "float16")
                casts = [(dtypes(op)[0], op["outputs"][0]["dtype"]) for op in forward_ops(trace, "aten::_to_copy")]
                # Two layers of four weights each, the input, and the zero states nn.LSTM
                # makes (h0, c0); the float16 output back up.
                self.assertEqual(casts.count(("float32", "float16")), 8 + 1 + 2)
                self.assertEqual(casts.count(("float16", "float32")), 1)
                (backward,) = [op for op in trace["ops"] if op["name"] == "aten::_cudnn_rnn_backward"]
                self.assertEqual({i["dtype"] for i in backward["inputs"] if i}, {"float16"})

    def test_cuda_amp_autocast_defaults_to_fp16(self):
        path = write(self.directory, "fp16.py", "torch.cuda.amp.autocast()")
        trace = run_trace(path, batch_size=16)
        self.assertEqual(dtypes(forward_ops(trace, "aten::addmm")[0]), ["float16"] * 3)
        self.assertEqual(trace["precision"]["autocast"], "float16")

    @unittest.skipUnless(HAS_AMP_GRAD_SCALER, "torch 1.13's GradScaler needs CUDA tensors")
    def test_grad_scaler(self):
        path = write(self.directory, "scaler.py", 'torch.autocast("cuda", dtype=torch.float16)',
                     setup='scaler = torch.amp.GradScaler("cuda")',
                     step="scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()")
        trace = run_trace(path, batch_size=16)
        unscale = [op for op in trace["ops"] if op["name"] == "aten::_amp_foreach_non_finite_check_and_unscale_"]
        self.assertEqual(len(unscale), 1)
        self.assertEqual(unscale[0]["args"]["num_tensors"], 6)  # the gradients of 6 parameters
        self.assertEqual(len([op for op in trace["ops"] if op["name"] == "aten::_amp_update_scale_"]), 1)
        # step() reads found_inf (a sync on a GPU too); gradients are taken to be finite, so it steps.
        self.assertEqual(trace["fallback_ops"], ["aten::_local_scalar_dense"])
        self.assertTrue(any(op["phase"] == "optimizer" for op in trace["ops"]))
        self.assertEqual(trace["precision"]["autocast"], "float16")

    @unittest.skipUnless(HAS_AMP_GRAD_SCALER, "torch 1.13's CPU has no float16 relu: cpu mode cannot run float16")
    def test_grad_scaler_steps_in_cpu_mode_even_when_its_scale_overflows(self):
        # The scaled gradients overflow float16 (as a run's first steps do): a GPU would skip
        # this step, but the iteration traced is the steady state, which steps; the weights
        # stay finite, as the skipped step leaves them.
        path = write(self.directory, "overflow.py", 'torch.autocast("cuda", dtype=torch.float16)',
                     setup='scaler = torch.amp.GradScaler("cuda")',
                     step="scaler.scale(loss * 1e6).backward(); scaler.step(optimizer); scaler.update(); "
                          "assert all(bool(p.isfinite().all()) for p in model.parameters())")
        trace = run_trace(path, batch_size=16, mode="cpu")
        self.assertIn("aten::_foreach_add_", [op["name"] for op in trace["ops"] if op["phase"] == "optimizer"],
                      "SGD's update")
        self.assertIn("aten::_local_scalar_dense", [op["name"] for op in trace["ops"]], "found_inf is read")

    def test_precision_settings_are_the_scripts_and_do_not_leak(self):
        path = write(self.directory, "tf32.py", "torch.autocast('cuda', enabled=False)",
                     setup='torch.set_float32_matmul_precision("high"); torch.backends.cudnn.allow_tf32 = False')
        trace = run_trace(path, batch_size=16)
        self.assertEqual(trace["precision"], {"matmul_tf32": True, "cudnn_tf32": False,
                                              "float32_matmul_precision": "high", "autocast": None})
        self.assertEqual(dtypes(forward_ops(trace, "aten::addmm")[0]), ["float32"] * 3)
        cnn = run_trace(os.path.abspath(os.path.join(SAMPLES, "small_cnn.py")), batch_size=2)
        self.assertEqual(cnn["precision"], {"matmul_tf32": False, "cudnn_tf32": True,
                                            "float32_matmul_precision": "highest", "autocast": None})

    @unittest.skipUnless(HAS_AMP_GRAD_SCALER, "torch 1.13's torch.autocast has no checks to patch")
    def test_regions_cuda_would_not_run_as_written_warn_with_their_line(self):
        cases = [
            ('torch.autocast("cpu", dtype=torch.bfloat16)', {"kind": "autocast_cpu_only"}),
            ('torch.autocast("cuda", dtype=torch.float64)', {"kind": "autocast_unsupported_dtype", "dtype": "float64"}),
            ('torch.autocast("xpu", dtype=torch.bfloat16)', {"kind": "autocast_other_device", "device": "xpu"}),
        ]
        for autocast, facts in cases:
            with self.subTest(autocast=autocast):
                path = write(self.directory, "odd.py", autocast)
                line = line_of(path, "with torch.autocast")
                trace = run_trace(path, batch_size=16)
                warning = next((w for w in trace["warnings"] if w["kind"] == facts["kind"]), None)
                self.assertEqual(warning, dict(facts, severity="warning", file=path, line=line), trace["warnings"])
                # Never a silent answer: every op keeps float32, and the trace says no autocast.
                self.assertEqual(dtypes(forward_ops(trace, "aten::addmm")[0]), ["float32"] * 3)
                self.assertIsNone(trace["precision"]["autocast"])

    def test_binary_cross_entropy_on_a_gpu_tensor_raises_as_on_a_gpu(self):
        # autocast_mode.cpp bans it under CUDA autocast: the trace stops where the GPU run
        # would, at the loss's line, with torch's message and what to use instead.
        def script(enabled):
            path = os.path.join(self.directory, f"bce_{enabled}.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(BCE.format(enabled=enabled))
            return path

        trace = run_trace(script(False), batch_size=4)
        self.assertEqual(len(forward_ops(trace, "aten::binary_cross_entropy")), 3)
        path = script(True)
        with self.assertRaises(TraceError) as raised:
            run_trace(path, batch_size=4)
        error = raised.exception
        self.assertEqual((error.kind, error.file, error.line),
                         ("user_exception", path, line_of(path, "loss + loss_fn")))
        self.assertTrue(error.message.startswith(
            "RuntimeError: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
            "autocast."), error.message)
        self.assertIn("nn.BCEWithLogitsLoss", error.hint)

# Ops whose CUDA autocast dtypes the comparison checks, and losses of every cross_entropy
# variant (LossNLL.cpp: plain, label smoothing, class probabilities, weights, a class
# dimension that is not last).
MIXED = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 32)
        self.proj = nn.Linear(32, 96)
        self.norm = nn.LayerNorm(32)
        self.conv = nn.Conv1d(32, 32, 3, padding=1)
        self.head = nn.Linear(32, 37)

    def forward(self, tokens):
        x = self.norm(self.embed(tokens))
        q, k, v = self.proj(x).chunk(3, dim=-1)
        attention = (q @ k.transpose(-2, -1) / 4).softmax(-1)
        x = x + F.gelu(attention @ v)
        x = x + self.conv(x.transpose(1, 2)).transpose(1, 2).exp().log1p()
        return self.head(x)


def losses(logits, labels, probs):
    flat = logits.flatten(0, 1)
    weight = torch.linspace(0.5, 1.5, 37, device=flat.device)
    return (F.cross_entropy(flat, labels) + F.cross_entropy(flat, labels, label_smoothing=0.1)
            + F.cross_entropy(flat, labels, weight=weight, label_smoothing=0.1)
            + F.cross_entropy(flat, probs, label_smoothing=0.1) + F.cross_entropy(flat, probs, weight=weight)
            + nn.CrossEntropyLoss(reduction="none")(flat, labels).mean()
            + F.cross_entropy(logits.transpose(1, 2), labels.view(logits.shape[:2]), reduction="sum")
            + F.mse_loss(flat, probs) + F.binary_cross_entropy_with_logits(flat, probs))


def wavecast_model():
    return Net().cuda()


def wavecast_input(batch_size=4):
    return (torch.randint(0, 50, (batch_size, 16), device="cuda"),
            torch.randint(0, 37, (batch_size * 16,), device="cuda"),
            torch.rand(batch_size * 16, 37, device="cuda").softmax(-1))


def wavecast_iteration(model):
    def iteration(tokens, labels, probs):
        with torch.autocast("cuda", dtype=torch.{dtype}):
            loss = losses(model(tokens), labels, probs)
        loss.backward()

    return iteration
"""

# Ops that only make views or mark profiler ranges: not what autocast decides.
NOT_COMPARED = {"view", "t", "transpose", "_unsafe_view", "slice", "select", "expand", "unsqueeze", "squeeze",
                "permute", "split", "split_with_sizes", "detach", "as_strided", "alias", "unbind",
                "_reshape_alias", "lift_fresh", "_record_function_enter_new", "_record_function_exit"}


def _fake_cuda_available():
    if torch.version.cuda is None:
        return False
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            torch.empty(1, device="cuda")
        return True
    except Exception:  # an older torch without fake CUDA tensors
        return False


class AgainstTorchsOwnCudaAutocast(unittest.TestCase):
    """The tracer's CUDA autocast against torch's own: torch's dispatcher applies CUDA
    autocast to fake CUDA tensors without a GPU, so the forward pass's ops and dtypes as
    CUDA would run them can be read here and compared op for op."""

    def torchs_forward(self, module, batch_size, dtype):
        from unittest import mock

        import torch.cuda.amp.common as amp_common
        import torch.utils._pytree as pytree
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.utils._python_dispatch import TorchDispatchMode

        class Record(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.ops = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if func.namespace == "aten":
                    outputs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
                    self.ops.append((func.overloadpacket.__name__, tuple(str(t.dtype)[6:] for t in outputs),
                                     tuple(t.numel() for t in outputs)))
                return out

        record = Record()
        # torch.autocast switches itself off where CUDA is not available; the dispatcher's
        # autocast itself needs no GPU.
        with mock.patch.object(amp_common, "amp_definitely_not_available", return_value=False), \
                mock.patch.object(torch.cuda, "is_bf16_supported", return_value=True), \
                FakeTensorMode(), torch.device("cuda"):
            model = module.Net()
            tokens, labels, probs = module.wavecast_input(batch_size)
            with torch.autocast("cuda", dtype=dtype), record:
                module.losses(model(tokens), labels, probs)
        return record.ops

    @unittest.skipUnless(_fake_cuda_available(), "this torch cannot make fake CUDA tensors (a CPU-only build or "
                         "torch 1.x), so torch's own CUDA autocast cannot run here to compare with")
    def test_binary_cross_entropy_is_refused_with_torchs_message(self):
        from unittest import mock

        import torch.cuda.amp.common as amp_common
        from torch._subclasses.fake_tensor import FakeTensorMode

        from wavecast_tracer.autocast import BANNED_MESSAGE

        with mock.patch.object(amp_common, "amp_definitely_not_available", return_value=False), \
                mock.patch.object(torch.cuda, "is_bf16_supported", return_value=True), \
                FakeTensorMode(), torch.device("cuda"):
            probs = torch.rand(4, 1)
            with torch.autocast("cuda", dtype=torch.bfloat16), self.assertRaises(RuntimeError) as raised:
                torch.nn.functional.binary_cross_entropy(probs, probs)
        self.assertEqual(str(raised.exception), BANNED_MESSAGE)

    @unittest.skipUnless(_fake_cuda_available(), "this torch cannot make fake CUDA tensors (a CPU-only build or "
                         "torch 1.x), so torch's own CUDA autocast cannot run here to compare with")
    def test_forward_ops_and_dtypes_are_torchs(self):
        import collections
        import importlib.util

        for dtype in (torch.bfloat16, torch.float16):
            with self.subTest(dtype=dtype):
                directory = self.enterContext(tempfile.TemporaryDirectory())
                path = os.path.join(directory, "mixed.py")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(MIXED.replace("{dtype}", str(dtype)[6:]))
                spec = importlib.util.spec_from_file_location("wavecast_mixed_precision", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                torchs = collections.Counter(op for op in self.torchs_forward(module, 4, dtype)
                                             if op[0] not in NOT_COMPARED)

                trace = run_trace(path, batch_size=4)
                traced = collections.Counter()
                for op in trace["ops"]:
                    name = op["name"].split("::")[-1]
                    if op["phase"] == "forward" and name not in NOT_COMPARED:
                        outputs = [t for t in op["outputs"] if t]
                        traced[(name, tuple(t["dtype"] for t in outputs),
                                tuple(math.prod(t["shape"]) for t in outputs))] += 1
                # (op, output dtypes, output sizes): element counts, since nll_loss casts a
                # class-dimension-not-last input after reshaping it to 4-D, the tracer before.
                self.assertEqual(dict(torchs - traced), {}, "ops torch's CUDA autocast runs that the trace lacks")
                self.assertEqual(dict(traced - torchs), {}, "ops the trace has that torch's CUDA autocast does not run")
                self.assertGreater(sum(torchs.values()), 60)


SCRIPTED = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(F.layer_norm(x, (16,)))


def wavecast_model():
    return torch.jit.script(Net()).cuda()


def wavecast_input(batch_size=8):
    return (torch.randn(batch_size, 16, device="cuda"),)


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def iteration(x):
        model(x).sum().backward()
        optimizer.step()

    return iteration
"""


class TorchScript(unittest.TestCase):
    def test_a_scripted_model_compiles_torchs_functions_not_the_tracers_wrappers(self):
        # The autocast emulation wraps F.linear (a builtin) and F.layer_norm (Python):
        # torch.jit.script resolves them as without the tracer, so the model compiles.
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "scripted.py")
            with open(path, "w") as f:
                f.write(SCRIPTED)
            trace = run_trace(path, batch_size=8)
        forward = [op["name"] for op in trace["ops"] if op["phase"] == "forward"]
        self.assertIn("aten::native_layer_norm", forward)
        self.assertIn("aten::addmm", forward)
        self.assertIn("aten::mm", [op["name"] for op in trace["ops"] if op["phase"] == "backward"])

    def test_a_failure_quoting_the_tracers_code_is_the_tracers(self):
        # TorchScript compiling one of the tracer's functions (as it did autocast's wrappers)
        # quotes its source: the hint says whose fault it is, not "fix your script".
        source = SCRIPTED.replace("return torch.jit.script(Net()).cuda()",
                                  "from wavecast_tracer import values\n"
                                  "    torch.jit.script(values.flatten_tensors)\n"
                                  "    return Net().cuda()")
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "scripted.py")
            with open(path, "w") as f:
                f.write(source)
            with self.assertRaises(TraceError) as raised:
                run_trace(path, batch_size=8)
        self.assertEqual(raised.exception.kind, "user_exception")
        self.assertIn("wavecast's own code", raised.exception.hint)


if __name__ == "__main__":
    unittest.main()


# A detector's two-stage head under AMP (torchvision's references/detection --amp):
# float16 features and float32 boxes meet in roi_align and nms.
DETECTION_HEAD = """
import torch
import torchvision


def wavecast_model():
    return torch.nn.Conv2d(3, 8, 3, padding=1).cuda()


def wavecast_input(batch_size=2):
    rois = torch.tensor([[0, 1.0, 1.0, 20.0, 20.0], [1, 4.0, 4.0, 30.0, 30.0]], device="cuda")
    return torch.rand(batch_size, 3, 32, 32, device="cuda"), rois


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")

    def iteration(images, rois):
        with torch.autocast("cuda"):
            features = model(images)
            pooled = torchvision.ops.roi_align(features, rois, output_size=7)
            keep = torchvision.ops.nms(rois[:, 1:].half(), pooled.float().mean((1, 2, 3)), 0.5)
            loss = pooled.float().mean() + pooled[keep].float().sum() * 0
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return iteration
"""


@unittest.skipUnless(importlib.util.find_spec("torchvision") and HAS_AMP_GRAD_SCALER,
                     "needs torchvision, and torch 2.x's GradScaler (torch.amp.GradScaler)")
class TorchvisionOps(unittest.TestCase):
    def test_roi_align_and_nms_run_in_float32_as_torchvisions_autocast_kernels_do(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "detection_head.py")
            with open(path, "w") as f:
                f.write(DETECTION_HEAD)
            trace = run_trace(path, batch_size=2)
        [roi_align] = forward_ops(trace, "torchvision::roi_align")
        self.assertEqual(dtypes(roi_align)[:2], ["float32", "float32"])
        self.assertEqual(forward_ops(trace, "torchvision::nms")[0]["inputs"][0]["dtype"], "float32")
        # The features come back in the input's dtype, float16, as the kernel returns them.
        after = [op for op in forward_ops(trace, "aten::_to_copy") if op["id"] > roi_align["id"]]
        self.assertEqual((dtypes(after[0])[0], after[0]["outputs"][0]["dtype"]), ("float32", "float16"))
