"""The calibration suite (wavecast_tracer.calibrate) on the CPU with its fake timer.

The fake timer gives each op 2 us + 1 ns per element of its tensors (+ 1 us backward),
so the entries' times are checked against that formula by hand.
"""

import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

import torch

from wavecast_tracer.calibrate import __main__ as calibrate_main
from wavecast_tracer.calibrate import cases as case_defs
from wavecast_tracer.calibrate import suite as suite_module
from wavecast_tracer.calibrate.timing import FakeTimer

LINEAR = {"name": "linear 64x32 -> 16", "kind": "linear", "quick": True, "backward": True,
          "precisions": ["fp32", "tf32", "bf16"],
          "params": {"tokens": 64, "in_features": 32, "out_features": 16, "bias": True}}
CAST = {"name": "cast", "kind": "cast", "quick": False, "backward": False, "precisions": ["fp32"],
        "params": {"shape": [1000], "to": "bfloat16"}}


def run_suite(cases, quick=False, budget_s=None, clock=None):
    kwargs = {"clock": clock} if clock else {}
    suite = suite_module.Suite(FakeTimer("NVIDIA H100 80GB HBM3"), quick, budget_s, repeats=3,
                               progress=lambda line: None, cases=cases, **kwargs)
    suite.run()
    gpu, versions = suite.timer.describe()
    return suite, suite.document(gpu, versions, suite.timer.host())


def entries_named(document, name, phase, precision):
    return [e for e in document["entries"]
            if e["name"] == name and e["phase"] == phase and e["precision"] == precision]


class CasesFileTest(unittest.TestCase):
    def test_every_case_is_runnable_and_covers_the_issue(self):
        cases = case_defs.load_cases()
        kinds = {c["kind"] for c in cases}
        self.assertEqual(kinds, set(case_defs.KINDS))
        for case in cases:
            self.assertTrue(set(case["precisions"]) <= set(case_defs.DTYPES), case["name"])
        linear = [c["params"] for c in cases if c["kind"] == "linear"]
        self.assertTrue(any(p["out_features"] == 50257 for p in linear), "vocabulary-sized N")
        self.assertTrue(any(p["in_features"] % 8 for p in linear), "an unaligned K")
        self.assertTrue(any(p["in_features"] <= 64 for p in linear), "small K")
        backends = {c["params"]["backend"] for c in cases if c["kind"] == "sdpa"}
        self.assertEqual(backends, {"flash", "efficient", "cudnn", "math"})
        convs = [c["params"] for c in cases if c["kind"] == "conv2d"]
        self.assertTrue(any(p["channels_last"] for p in convs))
        self.assertTrue(any(p["groups"] == p["in_channels"] > 1 for p in convs), "depthwise")
        self.assertTrue(any(p["stride"] > 1 for p in convs), "strided")
        self.assertTrue(any(p.get("bias") for p in convs), "a bias PyTorch adds after cuDNN")
        norms = [c["params"] for c in cases if c["kind"] == "batch_norm"]
        self.assertTrue(any(p["shape"][1] < 132 for p in norms), "fewer channels than an H100 has SMs")
        self.assertTrue(any(p["channels_last"] for p in norms))
        pools = {c["params"]["op"] for c in cases if c["kind"] == "pool2d"}
        self.assertEqual(pools, {"max", "avg"})
        permutes = [c["params"]["dims"] for c in cases if c["params"].get("op") == "permute"]
        self.assertIn([0, 2, 1, 3], permutes, "a head split keeps the inner dimension")
        self.assertIn([0, 2, 3, 1], permutes, "k.transpose(-2, -1) reads across rows")
        recurrent = [c["params"] for c in cases if c["kind"] == "rnn"]
        self.assertEqual({p["mode"] for p in recurrent}, {"lstm", "gru"})
        self.assertTrue(any(p["layers"] > 1 and p["dropout"] for p in recurrent), "a stacked layer")
        self.assertTrue(any(p["bidirectional"] for p in recurrent))
        self.assertTrue(all("fp16" in c["precisions"] and "bf16" not in c["precisions"]
                            for c in cases if c["kind"] == "rnn"), "autocast runs cuDNN's RNNs in float16")
        self.assertTrue(any(c["quick"] for c in cases) and not all(c["quick"] for c in cases))


class FakeSuiteTest(unittest.TestCase):
    def test_entries_are_the_ops_as_traced_with_their_times(self):
        suite, doc = run_suite([LINEAR])
        self.assertEqual(doc["format"], "wavecast-calibration")
        self.assertEqual(doc["version"], 1)
        self.assertTrue(doc["complete"])
        self.assertEqual(doc["gpu"]["name"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(doc["timer"], "fake")
        self.assertEqual(doc["host"], {"op_us": 20.0, "launch_us": 5.0, "loop": 0,
                                       "host_to_device_gbs": {"pinned": 25.0, "pageable": 10.0, "bytes": 0},
                                       "device_to_host_gbs": {"pinned": 24.0, "pageable": 8.0, "bytes": 0}})
        for key in ("torch", "cuda", "driver", "date", "entries", "skipped"):
            self.assertIn(key, doc)
        # F.linear forward is aten::addmm(bias, x, w^T): 16 + 64*32 + 32*16 in, 64*16 out.
        addmm = entries_named(doc, "aten::addmm", "forward", "fp32")
        self.assertEqual(len(addmm), 1)
        entry = addmm[0]
        self.assertEqual([i["shape"] for i in entry["inputs"]], [[16], [64, 32], [32, 16]])
        self.assertEqual(entry["inputs"][2]["contiguous"], False, "w.t() is a transposed view")
        self.assertEqual(entry["inputs"][0]["dtype"], "float32")
        self.assertEqual(entry["args"], {"beta": 1, "alpha": 1})
        self.assertFalse(entry["tf32"])
        self.assertAlmostEqual(entry["median_ms"], 0.002 + (16 + 2048 + 512 + 1024) * 1e-6)
        self.assertEqual(entry["spread_ms"], 0.0)
        self.assertEqual(entry["repeats"], 3)
        self.assertEqual(entry["case"], "linear 64x32 -> 16")
        # The weight gradient in backward: mm(grad^T [16, 64], x [64, 32]), 1 us more.
        grads = [e for e in entries_named(doc, "aten::mm", "backward", "fp32")
                 if [i["shape"] for i in e["inputs"]] == [[16, 64], [64, 32]]]
        self.assertEqual(len(grads), 1)
        self.assertAlmostEqual(grads[0]["median_ms"], 0.003 + (1024 + 2048 + 512) * 1e-6)
        tf32 = entries_named(doc, "aten::addmm", "forward", "tf32")
        self.assertTrue(tf32 and tf32[0]["tf32"])
        bf16 = entries_named(doc, "aten::addmm", "forward", "bf16")
        self.assertEqual(bf16[0]["inputs"][1]["dtype"], "bfloat16")
        self.assertFalse(any(e["name"] in ("aten::t", "aten::view") for e in doc["entries"]),
                         "views launch nothing and are not timed")

    @unittest.skipUnless(hasattr(torch, "_grouped_mm"), "this torch has no torch._grouped_mm (torch < 2.8)")
    def test_a_grouped_gemm_is_the_op_a_mixture_of_experts_traces(self):
        # bf16: the fake suite runs on fake tensors, whose grouped GEMM takes bf16 only (a GPU
        # runs float32 too, one mm per expert).
        grouped = {"name": "experts", "kind": "grouped_mm", "quick": True, "backward": True,
                   "precisions": ["bf16"], "params": {"tokens": 32, "in_features": 16, "out_features": 8,
                                                      "experts": 4}}
        _, doc = run_suite([grouped])
        forward = entries_named(doc, "aten::_grouped_mm", "forward", "bf16")
        self.assertEqual(len(forward), 1)
        # The (token, expert) rows, the weights stored [out, in] and passed transposed, and
        # one int32 end offset per expert, as transformers calls it and a trace records it.
        self.assertEqual([i["shape"] for i in forward[0]["inputs"][:3]], [[32, 16], [4, 16, 8], [4]])
        self.assertFalse(forward[0]["inputs"][1]["contiguous"])
        self.assertEqual(forward[0]["inputs"][2]["dtype"], "int32")
        backward = entries_named(doc, "aten::_grouped_mm", "backward", "bf16")
        # The rows' gradient (2-D x 3-D) and the weights' (2-D x 2-D, cut along K).
        self.assertEqual(sorted(len(e["inputs"][1]["shape"]) for e in backward), [2, 3])

    def test_fourier_transforms_are_the_ops_torch_fft_traces(self):
        spectral = {"name": "fno", "kind": "fft", "quick": True, "backward": True, "precisions": ["fp32"],
                    "params": {"shape": [2, 4, 8, 8]}}
        _, doc = run_suite([spectral])
        names = {(e["name"], e["phase"]) for e in doc["entries"]}
        self.assertIn(("aten::_fft_r2c", "forward"), names)
        self.assertIn(("aten::_fft_c2r", "forward"), names)
        self.assertIn(("aten::_fft_r2c", "backward"), names)  # irfft2's gradient
        r2c = entries_named(doc, "aten::_fft_r2c", "forward", "fp32")[0]
        self.assertEqual(r2c["args"]["dim"], [2, 3])
        self.assertEqual(r2c["inputs"][0]["shape"], [2, 4, 8, 8])

    def test_norms_pools_biased_convolutions_and_permutes_are_traced_ops(self):
        small = [
            {"name": "bn", "kind": "batch_norm", "quick": True, "backward": True, "precisions": ["bf16"],
             "params": {"shape": [4, 8, 6, 6], "channels_last": False}},
            {"name": "max", "kind": "pool2d", "quick": True, "backward": True, "precisions": ["fp32"],
             "params": {"op": "max", "shape": [4, 8, 6, 6], "kernel": 3, "stride": 2, "padding": 1}},
            {"name": "avg", "kind": "pool2d", "quick": True, "backward": True, "precisions": ["fp32"],
             "params": {"op": "avg", "shape": [4, 8, 6, 6], "kernel": 3, "stride": 1, "padding": 1}},
            {"name": "conv", "kind": "conv2d", "quick": True, "backward": True, "precisions": ["fp32"],
             "params": {"batch": 2, "in_channels": 3, "size": 8, "out_channels": 4, "kernel": 3,
                        "stride": 1, "padding": 1, "groups": 1, "channels_last": False, "bias": True}},
            {"name": "keys", "kind": "copy", "quick": True, "backward": False, "precisions": ["fp32"],
             "params": {"op": "permute", "shape": [2, 16, 4, 8], "dims": [0, 2, 3, 1]}},
        ]
        suite, doc = run_suite(small)
        names = {(e["case"], e["name"], e["phase"]) for e in doc["entries"]}
        expected = [("bn", "aten::native_batch_norm", "forward"),
                    ("bn", "aten::native_batch_norm_backward", "backward"),
                    ("max", "aten::max_pool2d_with_indices", "forward"),
                    ("max", "aten::max_pool2d_with_indices_backward", "backward"),
                    ("avg", "aten::avg_pool2d", "forward"),
                    ("avg", "aten::avg_pool2d_backward", "backward"),
                    ("keys", "aten::clone", "forward")]
        if [s["case"] for s in doc["skipped"]] == ["conv"]:
            # torch 1.13 has no meta kernel for convolution's backward: the fake timer
            # cannot run the case, and the suite says so rather than dropping it.
            import torch
            self.assertTrue(torch.__version__.startswith("1."), doc["skipped"])
            self.assertIn("convolution_backward", doc["skipped"][0]["reason"])
        else:
            self.assertEqual(doc["skipped"], [])
            expected += [("conv", "aten::convolution", "forward"),
                         ("conv", "aten::convolution_backward", "backward")]
            conv = entries_named(doc, "aten::convolution", "forward", "fp32")[0]
            self.assertEqual(conv["args"]["bias"], True)
        for entry in expected:
            self.assertIn(entry, names)
        bn = entries_named(doc, "aten::native_batch_norm", "forward", "bf16")[0]
        self.assertEqual([i["dtype"] for i in bn["inputs"][:3]], ["bfloat16", "float32", "float32"],
                         "the activation in bf16, the affine parameters float32, as under autocast")
        clone = entries_named(doc, "aten::clone", "forward", "fp32")[0]
        self.assertEqual(clone["inputs"][0]["shape"], [2, 4, 8, 16])
        self.assertFalse(clone["inputs"][0]["contiguous"])
        self.assertEqual(clone["inputs"][0]["strides"], [512, 8, 1, 32],
                         "the view reads across rows: its last dimension is not unit-stride")

    def test_cudnn_batch_norm_is_recorded_as_a_shape_trace_records_batch_norm(self):
        # On a GPU, F.batch_norm reaches cudnn_batch_norm; a shape-mode trace (CUDA code on
        # the CPU) records native_batch_norm. The entries must carry the traced names, in
        # the traced argument order, for predictions to find them.
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        from wavecast_tracer.op_description import describe_call

        aten = torch.ops.aten
        seen = {}

        class Capture(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                seen[func] = (args, kwargs or {}, out)
                return out

        x = torch.randn(2, 4, 3, 3, requires_grad=True)
        bn = torch.nn.BatchNorm2d(4)
        with Capture():
            bn(x).sum().backward()
        args, kwargs, out = seen[aten.native_batch_norm.default]
        cudnn_forward = suite_module.as_shape_traced(aten.cudnn_batch_norm.default, args, kwargs,
                                                     tuple(out) + (torch.empty(0, dtype=torch.uint8),))
        self.assertIs(cudnn_forward[0], aten.native_batch_norm.default)
        self.assertEqual(len(cudnn_forward[3]), 3, "cuDNN's reserve space is not an output of the trace's op")
        self.assertEqual(describe_call(*cudnn_forward[:1], "aten::native_batch_norm", *cudnn_forward[1:3]),
                         describe_call(aten.native_batch_norm.default, "aten::native_batch_norm", args, kwargs))
        # cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var,
        # save_mean, save_var, epsilon, reserve) from native's (grad_out, input, ..., train, eps,
        # output_mask).
        args, kwargs, out = seen[aten.native_batch_norm_backward.default]
        grad, inp, weight, mean, var, save_mean, save_invstd, _train, eps = args[:9]
        cudnn_args = (inp, grad, weight, mean, var, save_mean, save_invstd, eps,
                      torch.empty(0, dtype=torch.uint8))
        func, traced_args, traced_kwargs, traced_out = suite_module.as_shape_traced(
            aten.cudnn_batch_norm_backward.default, cudnn_args, {}, out)
        self.assertIs(func, aten.native_batch_norm_backward.default)
        name = "aten::native_batch_norm_backward"
        self.assertEqual(describe_call(func, name, traced_args, traced_kwargs),
                         describe_call(func, name, args, kwargs))

    def test_cudnn_rnn_ops_are_recorded_as_a_trace_records_the_layer(self):
        # On a GPU a recurrent layer reaches _cudnn_rnn forward and _cudnn_rnn_backward; a
        # trace records aten::<kind> (input, states, weights) and the backward with the
        # outputs' gradients. The entries must be the trace's ops, or no prediction finds them.
        from wavecast_tracer import rnn
        from wavecast_tracer.project import Project
        from wavecast_tracer.trace_state import TraceState

        torch.manual_seed(0)
        layers = [(torch.nn.LSTM(5, 7, num_layers=2, dropout=0.2, proj_size=3), [6, 2, 5]),
                  (torch.nn.GRU(5, 4, num_layers=2, bidirectional=True, batch_first=True), [2, 6, 5])]
        for layer, shape in layers:
            with self.subTest(layer=type(layer).__name__):
                x = torch.randn(*shape, requires_grad=True)
                state = TraceState(Project(__file__), lambda message: None)
                with rnn.fuse_recurrent_layers(state, compute_values=True):
                    out = layer(x)[0]
                    out.backward(torch.ones(out.shape))  # contiguous, as the suite's and a layer's above
                forward, backward = state.ops[-2], state.ops[-1]

                lstm = isinstance(layer, torch.nn.LSTM)
                directions = 2 if layer.bidirectional else 1
                batch = shape[0] if layer.batch_first else shape[1]
                states = layer.num_layers * directions, batch
                hx = torch.zeros(*states, layer.proj_size or layer.hidden_size)
                cx = torch.zeros(*states, layer.hidden_size) if lstm else None
                settings = (2 if lstm else 3, layer.hidden_size, layer.proj_size, layer.num_layers,
                            layer.batch_first, layer.dropout, True, layer.bidirectional, [])
                stride = len(layer._flat_weights) // (layer.num_layers * directions)
                output = torch.randn(*shape[:2], directions * (layer.proj_size or layer.hidden_size))
                dispatched = (x, layer._flat_weights, stride, None, hx, cx) + settings + (None,)
                name, inputs, outputs, args = rnn.as_traced_layer(
                    "aten::_cudnn_rnn", dispatched, (output, hx, cx, torch.empty(0), torch.empty(0)))
                self.assertEqual((name, inputs, args), (forward["name"], forward["inputs"], forward["args"]))
                # Outputs are no part of an entry's key: their shapes only (the CPU's
                # decomposed batch-first layer returns transposed views).
                self.assertEqual([list(t.shape) for t in outputs], [o["shape"] for o in forward["outputs"]])

                grad_output = torch.ones_like(output)
                dispatched = ((x, layer._flat_weights, stride, torch.empty(0), hx, cx, output, grad_output,
                               None, None) + settings + (None, torch.empty(0), [True, False, False, True]))
                weight_grads = [torch.zeros_like(w) for w in layer._flat_weights]
                name, inputs, outputs, args = rnn.as_traced_layer(
                    "aten::_cudnn_rnn_backward", dispatched, (torch.zeros_like(x), None, None, weight_grads))
                self.assertEqual((name, inputs, args), (backward["name"], backward["inputs"], backward["args"]))
                self.assertEqual([list(t.shape) for t in outputs], [o["shape"] for o in backward["outputs"]])
        self.assertIsNone(rnn.as_traced_layer("aten::addmm", (), None))

    def test_a_recurrent_layer_needs_cudnn(self):
        # The fake timer's meta tensors would split the layer into per-step ops.
        case = next(c for c in case_defs.load_cases() if c["kind"] == "rnn")
        suite, doc = run_suite([case])
        self.assertEqual(doc["entries"], [])
        self.assertEqual({s["precision"] for s in doc["skipped"]}, set(case["precisions"]))
        self.assertIn("cuDNN", doc["skipped"][0]["reason"])

    def test_transient_bytes_are_each_entrys_largest(self):
        # A timer that sees workspaces: each op holds 300 bytes while it runs in the first
        # repeat, 200 in the second, 100 in the third. An entry keeps its largest; none is
        # written where all are 0 (the fake timer's).
        class WorkspaceTimer(FakeTimer):
            def __init__(self):
                super().__init__("NVIDIA H100 80GB HBM3")
                self.repeat = 0

            def begin(self):
                self.repeat += 1

            def transient_bytes(self, before):
                return 400 - 100 * self.repeat

        suite = suite_module.Suite(WorkspaceTimer(), quick=False, repeats=3,
                                   cases=[dict(LINEAR, precisions=["fp32"])],
                                   progress=lambda line: None)
        suite.run()
        doc = suite.document(*suite.timer.describe(), host=None)
        self.assertTrue(doc["entries"])
        self.assertEqual({e["transient_bytes"] for e in doc["entries"]}, {300})
        _, plain = run_suite([LINEAR])
        self.assertFalse(any("transient_bytes" in e for e in plain["entries"]))

    def test_quick_runs_only_quick_cases(self):
        suite, doc = run_suite([LINEAR, CAST], quick=True)
        self.assertEqual({e["case"] for e in doc["entries"]}, {"linear 64x32 -> 16"})
        suite, doc = run_suite([LINEAR, CAST])
        self.assertIn("cast", {e["case"] for e in doc["entries"]})

    def test_the_budget_stops_adding_cases(self):
        ticks = iter(range(0, 1000, 10))  # every clock read is 10 s later
        suite, doc = run_suite([LINEAR, CAST], budget_s=20, clock=lambda: next(ticks))
        self.assertFalse(doc["complete"])
        self.assertEqual({e["precision"] for e in doc["entries"]}, {"fp32"})

    def test_an_unavailable_case_is_skipped_with_its_reason(self):
        broken = dict(CAST, name="broken", params={"shape": [4], "to": "no_such_dtype"})
        suite, doc = run_suite([broken, CAST])
        self.assertTrue(doc["complete"])
        self.assertEqual(doc["skipped"][0]["case"], "broken")
        self.assertIn("cast", {e["case"] for e in doc["entries"]})

    def test_an_interrupt_keeps_what_was_measured(self):
        calls = {"n": 0}
        real = case_defs.build

        def interrupting(case, precision, device):
            calls["n"] += 1
            if calls["n"] == 2:
                raise KeyboardInterrupt
            return real(case, precision, device)

        case_defs.build = interrupting
        try:
            with tempfile.TemporaryDirectory() as folder:
                out = os.path.join(folder, "cal.json")
                stdout = io.StringIO()
                with redirect_stdout(stdout), redirect_stderr(io.StringIO()):
                    status = calibrate_main.main(["--out", out, "--timer", "fake", "--only",
                                                  "linear 8192x768 -> 768"])
                self.assertEqual(status, 130)
                with open(out) as f:
                    doc = json.load(f)
                answer = json.loads(stdout.getvalue().strip().splitlines()[-1])
        finally:
            case_defs.build = real
        self.assertFalse(doc["complete"])
        self.assertEqual({e["precision"] for e in doc["entries"]}, {"fp32"})
        self.assertEqual(answer["result"]["complete"], False)
        self.assertEqual(answer["result"]["entries"], len(doc["entries"]))


class CommandLineTest(unittest.TestCase):
    def run_module(self, *args):
        env = dict(os.environ)
        return subprocess.run([sys.executable, "-m", "wavecast_tracer.calibrate", *args],
                              capture_output=True, text=True, env=env, timeout=300)

    def test_without_a_gpu_one_message_and_a_non_zero_exit(self):
        import torch
        if torch.cuda.is_available():
            self.skipTest("this machine has a GPU: the no-GPU message cannot be checked")
        with tempfile.TemporaryDirectory() as folder:
            done = self.run_module("--out-dir", folder, "--quick")
            self.assertEqual(done.returncode, 1)
            answer = json.loads(done.stdout.strip().splitlines()[-1])
            self.assertIn("no CUDA GPU visible to torch", answer["error"]["message"])
            self.assertEqual(os.listdir(folder), [], "nothing written")

    def test_fake_run_names_the_file_after_the_gpu(self):
        with tempfile.TemporaryDirectory() as folder:
            done = self.run_module("--out-dir", folder, "--timer", "fake", "--fake-gpu",
                                   "NVIDIA A100-SXM4-40GB", "--only", "cast to bfloat16",
                                   "--repeats", "2")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(os.listdir(folder), ["nvidia-a100-sxm4-40gb.json"])
            self.assertIn("cast to bfloat16", done.stderr, "progress lines on stderr")
            with open(os.path.join(folder, "nvidia-a100-sxm4-40gb.json")) as f:
                doc = json.load(f)
            self.assertTrue(doc["complete"])
            # x.to(bfloat16) of 6,291,456 floats: one _to_copy, in and out.
            copies = [e for e in doc["entries"] if e["name"] == "aten::_to_copy"
                      and e["inputs"][0]["shape"] == [6291456] and e["precision"] == "fp32"]
            self.assertEqual(len(copies), 1)
            self.assertAlmostEqual(copies[0]["median_ms"], 0.002 + 2 * 6291456 * 1e-6)
            self.assertEqual(copies[0]["args"].get("dtype"), "bfloat16")


if __name__ == "__main__":
    unittest.main()
