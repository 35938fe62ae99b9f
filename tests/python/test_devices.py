"""A script written for a GPU traced without one: CUDA devices (given, or the default device)
mapped to the CPU, torch.cuda's calls answered, and the tensors the iteration leaves on the CPU
warned about when mixed with GPU tensors, their ops marked `"device": "cpu"` (Adam's step
counters)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch
from torch.optim import optimizer as optimizer_module

from source_lines import line_of, script_file
from wavecast_tracer.tracer import run_trace

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "cpu_tensor_in_iteration.py")
SAMPLES = os.path.abspath(os.environ.get("WAVECAST_SAMPLES_DIR", os.path.join(HERE, "..", "..", "samples")))
# torch 2.x optimizers step with the multi-tensor kernels (the step counters' += 1 is one op).
FOREACH_DEFAULT = hasattr(optimizer_module, "_default_to_fused_or_foreach")
def cpu_tensor_warnings(trace):
    return [w for w in trace["warnings"] if w["kind"] == "host_tensor_with_gpu"]


def without_cuda(source):
    return source.replace(".cuda()", "")


class CpuTensorsMixedWithGpuTensors(unittest.TestCase):
    def test_every_sample_keeps_its_tensors_on_the_inputs_device(self):
        # The samples never ask for CUDA themselves: traced as the truth harness runs them,
        # with the model and batch moved to the GPU.
        names = sorted(n for n in os.listdir(SAMPLES) if n.endswith(".py"))
        self.assertGreaterEqual(len(names), 8)
        for name in names:
            with self.subTest(sample=name):
                trace = run_trace(os.path.join(SAMPLES, name), batch_size=2, assume_gpu=True)
                self.assertEqual(cpu_tensor_warnings(trace), [])
                forward_on_cpu = [op["name"] for op in trace["ops"]
                                  if op.get("device") == "cpu" and op["phase"] != "optimizer"]
                # transformer.py builds its causal mask on the CPU, then moves it with .to(target.device).
                self.assertLessEqual(set(forward_on_cpu), {"aten::full", "aten::triu"})

    def test_one_warning_on_the_line_that_mixes(self):
        trace = run_trace(FIXTURE, batch_size=4)
        warnings = cpu_tensor_warnings(trace)
        self.assertEqual(len(warnings), 1, trace["warnings"])
        mixed = line_of(FIXTURE, "# MIXED")
        created = line_of(FIXTURE, "torch.ones(D)")
        self.assertEqual(warnings[0], {"kind": "host_tensor_with_gpu", "severity": "warning", "file": FIXTURE,
                                       "line": mixed, "origin": {"file": FIXTURE, "line": created}})
        # The ones() ran on the CPU; the add that mixed it in is a GPU op.
        ones = [op for op in trace["ops"] if op["name"] == "aten::ones"]
        self.assertEqual([op.get("device") for op in ones], ["cpu"])
        add = next(op for op in trace["ops"] if op["loc"]["line"] == mixed and op["phase"] == "forward")
        self.assertNotIn("device", add)
        # torch.arange(seq, device=tokens.device) followed the input onto the GPU.
        arange = next(op for op in trace["ops"] if op["name"] == "aten::arange")
        self.assertNotIn("device", arange)

    def test_cpu_mode_warns_the_same(self):
        trace = run_trace(FIXTURE, batch_size=4, mode="cpu")
        self.assertEqual(len(cpu_tensor_warnings(trace)), 1, trace["warnings"])

    def write(self, directory, source, name="script.py"):
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        return path

    def test_no_warning_for_a_script_that_never_asks_for_cuda(self):
        with open(FIXTURE, encoding="utf-8") as f:
            source = without_cuda(f.read())
        with tempfile.TemporaryDirectory() as directory:
            path = self.write(directory, source)
            self.assertEqual(cpu_tensor_warnings(run_trace(path, batch_size=4)), [])
            # Unless the caller runs its model and batch on a GPU.
            self.assertEqual(len(cpu_tensor_warnings(run_trace(path, batch_size=4, assume_gpu=True))), 1)

    def test_moved_to_the_gpu_is_no_mix(self):
        with open(FIXTURE, encoding="utf-8") as f:
            source = f.read()
        fixes = ["torch.ones(D).cuda()", "torch.ones(D).to(x.device)", "torch.ones(D).to(x)",
                 "torch.ones(D, device=x.device)", 'torch.ones(D, device="cuda")', "torch.ones(D).to('cuda:0')",
                 "torch.ones((), dtype=x.dtype)"]
        with tempfile.TemporaryDirectory() as directory:
            for fix in fixes:
                with self.subTest(fix=fix):
                    path = self.write(directory, source.replace("torch.ones(D)", fix))
                    self.assertEqual(cpu_tensor_warnings(run_trace(path, batch_size=4)), [])

    def test_one_warning_per_line(self):
        with open(FIXTURE, encoding="utf-8") as f:
            source = f.read()
        # A CPU tensor built from a CPU tensor (still on the CPU) and mixed in twice on one line,
        # and a CPU index into a GPU tensor (a host-to-device copy on a GPU).
        source = source.replace("x = x + bias  # MIXED", "bias = bias.unsqueeze(0) * 2\n"
                                "        x = x + bias - bias  # MIXED\n"
                                "        x = x[:, torch.arange(seq)]  # INDEX")
        with tempfile.TemporaryDirectory() as directory:
            path = self.write(directory, source)
            warnings = cpu_tensor_warnings(run_trace(path, batch_size=4))
            self.assertEqual([(w["file"], w["line"]) for w in warnings],
                             [(path, line_of(path, "# MIXED")), (path, line_of(path, "# INDEX"))])


DEFAULT_DEVICE = """
import torch
import torch.nn as nn

{before}


def wavecast_model():
    {build}


def wavecast_input(batch_size=4):
    return (torch.randn(batch_size, 32),)


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def iteration(x):
        bias = torch.ones(32)
        model(x + bias).sum().backward()
        optimizer.step()
        optimizer.zero_grad()

    return iteration
"""


@unittest.skipUnless(hasattr(torch, "set_default_device"), "torch 1.13 has no default device")
class DefaultDevice(unittest.TestCase):
    """torch.set_default_device("cuda") and `with torch.device("cuda"):` put every factory's
    tensor on the GPU: the model and tensors made without `device=` are GPU tensors."""

    def trace(self, before, build):
        with script_file(DEFAULT_DEVICE.format(before=before, build=build), "default_device.py") as path:
            try:
                return run_trace(path, batch_size=4)
            finally:
                torch.set_default_device(None)

    def test_set_default_device_cuda(self):
        trace = self.trace('torch.set_default_device("cuda")', "return nn.Linear(32, 10)")
        self.assertEqual(cpu_tensor_warnings(trace), [])
        self.assertEqual([op["name"] for op in trace["ops"] if op.get("device") == "cpu"
                          and op["phase"] != "optimizer"], [])

    def test_a_model_built_under_torch_device_cuda(self):
        trace = self.trace("", 'with torch.device("cuda"):\n        return nn.Linear(32, 10)')
        self.assertIn("aten::addmm", [op["name"] for op in trace["ops"]])
        # The batch and the bias are made without a device outside the context: CPU tensors,
        # mixed with the GPU model's on the iteration's line.
        self.assertEqual(len(cpu_tensor_warnings(trace)), 1)


CUDA_CALLS = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.DataParallel(nn.Linear(32, 10).cuda())


def wavecast_input(batch_size=4):
    generator = torch.Generator(device="cuda")
    generator.manual_seed(0)
    state = torch.cuda.get_rng_state()
    torch.cuda.set_rng_state(state)
    return (torch.randn(batch_size, 32, device="cuda", generator=generator),)


def wavecast_iteration(model):
    def iteration(x):
        model(x).sum().backward()

    return iteration
"""


# Code that asks where its tensors are (libraries branch on it): told the GPU for the
# script's GPU tensors, the CPU for its host ones and in a script that never asks for CUDA.
ASKS_THE_DEVICE = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Linear(8, 8){move}


def wavecast_input(batch_size=4):
    return (torch.randn(batch_size, 8){move},)


def wavecast_iteration(model):
    def iteration(x):
        host = torch.arange(8)
        seen = (str(x.device), x.is_cuda, x.get_device(), str(model.weight.device), str(host.device))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with torch.autocast(x.device.type, enabled=False):  # Llama's rotary: kept in float32
                kept = model(x)
            y = model(kept)
        if x.is_cuda:
            y = y * 2
        counts = torch.histc(host.int(), bins=8, min=0, max=7)  # transformers' tokens per expert
        y.float().sum().backward()
        return seen, counts.dtype, counts.tolist()

    return iteration
"""


class AskedDevices(unittest.TestCase):
    def trace(self, move):
        seen = []
        with script_file(ASKS_THE_DEVICE.format(move=move), "asks.py") as path:
            from unittest import mock

            from wavecast_tracer import tracer

            call_user = tracer._call_user

            def keep(fn, project, during, *args, **kwargs):
                result = call_user(fn, project, during, *args, **kwargs)
                if during == "during the training iteration":
                    seen.append(result)
                return result

            with mock.patch.object(tracer, "_call_user", keep):
                trace = run_trace(path, batch_size=4)
        return trace, seen[-1]

    @unittest.skipUnless(FOREACH_DEFAULT, "torch 1.13's fake tensors are meta tensors: they report no CPU to map")
    def test_gpu_tensors_report_the_gpu_and_the_script_takes_its_way(self):
        trace, (seen, counts_dtype, counts) = self.trace(".cuda()")
        self.assertEqual(seen, ("cuda:0", True, 0, "cuda:0", "cpu"))
        # autocast(x.device.type, enabled=False) switched CUDA autocast off: float32 inside.
        addmm = [op for op in trace["ops"] if op["name"] == "aten::addmm" and op["phase"] == "forward"]
        self.assertEqual([op["outputs"][0]["dtype"] for op in addmm], ["float32", "bfloat16"])
        self.assertIn("aten::mul", [op["name"] for op in trace["ops"] if op["phase"] == "forward"])
        # CUDA counts integers; the CPU's kernel takes floats only.
        self.assertEqual((counts_dtype, counts), (torch.int32, [1] * 8))

    @unittest.skipUnless(FOREACH_DEFAULT, "torch 1.13's fake tensors cannot give their values with .tolist()")
    def test_a_script_that_never_asks_for_cuda_sees_the_cpu(self):
        trace, (seen, _, _) = self.trace("")
        self.assertEqual(seen, ("cpu", False, -1, "cpu", "cpu"))
        self.assertNotIn("aten::mul", [op["name"] for op in trace["ops"] if op["phase"] == "forward"])


class CudaCalls(unittest.TestCase):
    def test_a_cuda_generator_its_rng_state_and_data_parallel_on_one_gpu(self):
        with script_file(CUDA_CALLS, "cuda_calls.py") as path:
            trace = run_trace(path, batch_size=4)
        forward = [op for op in trace["ops"] if op["phase"] == "forward"]
        self.assertEqual([op["outputs"][0]["shape"] for op in forward if op["name"] == "aten::addmm"], [[4, 10]])
        self.assertEqual(cpu_tensor_warnings(trace), [])


BF16_AUTOCAST = """
import torch
import torch.nn as nn


def wavecast_model():
    return nn.Linear(32, 10).cuda()


def wavecast_input(batch_size=4):
    return (torch.randn(batch_size, 32, device="cuda"),)


def wavecast_iteration(model):
    def iteration(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = model(x)
        y.float().sum().backward()

    return iteration
"""


class TargetGpuAnswers(unittest.TestCase):
    def test_bf16_autocast_traces_with_a_t4_first(self):
        # torch emulates bf16 before Ampere: autocast on a T4 runs, as it does on the GPU.
        t4 = {"name": "Tesla T4", "memory_bytes": 16 * 2 ** 30, "capability": [7, 5],
              "multiprocessors": 40, "l2_cache_bytes": 4 * 2 ** 20}
        with script_file(BF16_AUTOCAST, "bf16.py") as path:
            trace = run_trace(path, batch_size=4, device=t4)
        gemm = next(op for op in trace["ops"] if op["name"] == "aten::addmm")
        self.assertEqual(gemm["inputs"][1]["dtype"], "bfloat16")


class AnsweredQueriesInAFreshWorker(unittest.TestCase):
    @unittest.skipUnless(hasattr(torch, "compile"), "torch 1.13 has no torch._dynamo")
    def test_cpu_mode_builds_an_optimizer_while_torch_cuda_answers(self):
        # A worker's first optimizer makes torch._dynamo index torch's functions by identity
        # while torch.cuda's answers stand in for them: in a process of its own, since the
        # index is built once per process.
        source = DEFAULT_DEVICE.format(before="", build="return nn.Linear(32, 10).cuda()").replace(
            "torch.optim.SGD(model.parameters(), lr=0.1)", "torch.optim.AdamW(model.parameters())")
        with script_file(source, "adamw.py") as path:
            done = subprocess.run([sys.executable, "-m", "wavecast_tracer", path, "--mode", "cpu"],
                                  capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stdout[-2000:] + done.stderr[-2000:])
        self.assertIn("aten::addmm", [op["name"] for op in json.loads(done.stdout)["ops"]])


class HostOps(unittest.TestCase):
    def test_adam_step_counters_run_on_the_cpu(self):
        trace = run_trace(FIXTURE, batch_size=4)
        on_cpu = [op for op in trace["ops"] if op.get("device") == "cpu" and op["phase"] == "optimizer"]
        names = sorted({op["name"] for op in on_cpu})
        # += 1 on the 4 counters (one multi-tensor op in torch 2.x) and their .item()s (two each
        # in torch 2.x's foreach Adam, one in 1.13's per-parameter loop).
        if FOREACH_DEFAULT:
            self.assertEqual(names, ["aten::_foreach_add_", "aten::_local_scalar_dense"])
            foreach = [op for op in on_cpu if op["name"] == "aten::_foreach_add_"]
            self.assertEqual([op["args"]["num_tensors"] for op in foreach], [4])
            self.assertEqual({tuple(i["shape"]) for i in foreach[0]["inputs"]}, {()})
        else:
            self.assertEqual(names, ["aten::_local_scalar_dense", "aten::add_"])
        items = sum(op["name"] == "aten::_local_scalar_dense" for op in trace["ops"])
        self.assertEqual(sum(op["name"] == "aten::_local_scalar_dense" for op in on_cpu), items)
        self.assertEqual(items, (2 if FOREACH_DEFAULT else 1) * 4)
        # The parameters' update runs on the GPU.
        for op in trace["ops"]:
            if op["phase"] == "optimizer" and op not in on_cpu:
                self.assertNotIn("device", op)

    def test_no_cpu_ops_without_cpu_tensors(self):
        path = os.path.join(SAMPLES, "resnet50.py")
        trace = run_trace(path, batch_size=2)
        self.assertEqual([op for op in trace["ops"] if "device" in op], [])


if __name__ == "__main__":
    unittest.main()
