"""How a script run as written is read (script_runner.py): what torch.cuda answers for
the target GPU, where the batch size comes from, and what the run leaves of the process."""

import logging
import os
import signal
import tempfile
import textwrap
import unittest

import torch

from script_folder import REAL_SAMPLES, ScriptFolderCase
from scripts_test_sandbox import TRAIN  # two optimizer steps of a small model
from wavecast_tracer.errors import TraceError
from wavecast_tracer.project import Project, repository_root
from wavecast_tracer.tracer import run_trace

class ScriptRunnerTest(ScriptFolderCase):
    def test_a_gpu_before_ampere_has_no_bf16_kernels(self):
        path = self.write(textwrap.dedent("""
            import torch
            assert torch.cuda.get_device_capability() == (7, 5)
            assert not torch.cuda.is_bf16_supported(including_emulation=False), "a T4 has no bf16 kernels"
            assert torch.cuda.is_bf16_supported(), "torch emulates bf16 on a T4"
            assert torch.cuda.get_device_properties(0).L2_cache_size == 4 * 2 ** 20
            """) + TRAIN)
        device = {"name": "Tesla T4", "memory_bytes": 16 * 2 ** 30, "capability": [7, 5],
                  "multiprocessors": 40, "l2_cache_bytes": 4 * 2 ** 20}
        self.assertEqual(run_trace(path, device=device)["batch_size"], 4)

    def test_a_loss_reading_activations_is_traced_in_cpu_mode(self):
        # Hard-example mining: the loss keeps the samples the model gets most wrong, a count
        # only the activations' values give (of a batch drawn at random, too large for shape
        # mode to draw for real). The script runs again, for real on the CPU.
        path = self.write("""
            import torch
            import torch.nn as nn

            model = nn.Linear(64, 4).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                x = torch.randn(32, 64, device="cuda")
                losses = nn.functional.cross_entropy(model(x), torch.zeros(32, dtype=torch.long, device="cuda"),
                                                     reduction="none")
                hard = losses[losses > losses.mean()]
                hard.mean().backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        self.assertEqual(trace["mode"], "cpu")
        [note] = [w for w in trace["warnings"] if w["kind"] == "traced_in_cpu_mode"]
        with open(path) as f:
            line = next(n for n, text in enumerate(f, 1) if "hard = losses[" in text)
        self.assertEqual((note["file"], note["line"]), (path, line))
        self.assertEqual(trace["batch_size"], 32)
        self.assertEqual(sum(op["name"] == "aten::addmm" for op in trace["ops"]), 1)

    def test_a_loop_that_stops_on_a_value_it_reads_is_traced_in_cpu_mode(self):
        # pytorch/examples' regression: it trains until `loss.item()` is small, which shape
        # mode would read as 0, ending the loop after one backward pass. The value changed
        # what the script did: it is traced again in cpu mode, where the loss is real.
        path = self.write("""
            import itertools
            import torch
            import torch.nn.functional as F

            fc = torch.nn.Linear(4, 1)
            for batch in itertools.count(1):
                x = torch.randn(32, 4)
                output = F.smooth_l1_loss(fc(x), x.sum(1, keepdim=True))
                loss = output.item()  # the stop test's value
                fc.zero_grad()
                output.backward()
                for param in fc.parameters():
                    param.data.add_(-0.1 * param.grad)
                if loss < 1e-3 or batch == 50:
                    break
            """)
        trace = run_trace(path)
        self.assertEqual(trace["mode"], "cpu")
        [note] = [w for w in trace["warnings"] if w["kind"] == "traced_in_cpu_mode"]
        with open(path) as f:
            line = next(n for n, text in enumerate(f, 1) if "# the stop test's value" in text)
        self.assertEqual((note["line"], note["call"]), (line, "aten::_local_scalar_dense"))
        self.assertEqual(trace["batch_size"], 32)

    def test_a_failure_after_reading_a_made_up_value_is_traced_in_cpu_mode(self):
        # The value read may be the failure's cause (here a loss of exactly 0 is refused):
        # cpu mode, where it is real, traces; a script that fails there too gets that error.
        script = """
            import torch

            model = torch.nn.Linear(4, 1).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(5):
                loss = model(torch.randn(32, 4, device="cuda")).square().mean()
                if loss.item() == 0.0:  # the value read
                    raise ValueError("a loss of exactly 0")
                loss.backward()
                optimizer.step(){broken}
                optimizer.zero_grad()
            """
        path = self.write(script.format(broken=""))
        trace = run_trace(path)
        self.assertEqual(trace["mode"], "cpu")
        [note] = [w for w in trace["warnings"] if w["kind"] == "traced_in_cpu_mode"]
        with open(path) as f:
            line = next(n for n, text in enumerate(f, 1) if "# the value read" in text)
        self.assertEqual(note["line"], line)
        path = self.write(script.format(broken="\n                1 / 0"))
        with self.assertRaises(TraceError) as caught:
            run_trace(path)
        self.assertIn("ZeroDivisionError", caught.exception.message)

    def test_gradient_accumulation_trains_on_every_batch_of_the_step(self):
        # Four batches of 16 per optimizer step, from a DataLoader or made by the loop: the
        # batch size is one batch's, the samples per iteration all four's.
        for batches in ("DataLoader(data, batch_size=16)",
                        "((torch.randn(16, 32), torch.randint(0, 10, (16,))) for _ in range(64))"):
            with self.subTest(batches=batches.split("(")[0]):
                path = self.write(f"""
                    import torch
                    import torch.nn as nn
                    from torch.utils.data import DataLoader, TensorDataset

                    data = TensorDataset(torch.randn(256, 32), torch.randint(0, 10, (256,)))
                    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()
                    criterion = nn.CrossEntropyLoss()
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                    for step, (x, y) in enumerate({batches}):
                        loss = criterion(model(x.cuda()), y.cuda()) / 4
                        loss.backward()
                        if step % 4 == 3:
                            optimizer.step()
                            optimizer.zero_grad()
                    """)
                trace = run_trace(path)
                self.assertEqual(trace["batch_size"], 16)
                self.assertEqual(trace["samples_per_iteration"], 64)

    def test_a_dataloader_loop_is_recorded_from_fetch_to_fetch(self):
        # One whole pass of the loop: its batch, the step and what follows it; not what the
        # first pass alone does after its step. The loop breaks off after the second step and
        # the script then fails: the iteration stands as recorded.
        path = self.write(REAL_SAMPLES + textwrap.dedent("""
            import torch.nn as nn

            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for i, (x, y) in enumerate(DataLoader(Samples(), batch_size=16)):
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if i % 100 == 0:
                    torch.cdist(x.cuda(), x.cuda())  # the first pass's alone
                model.weight.data.mul_(0.99)  # every pass's, after its step
                if i == 1:
                    break
            raise RuntimeError("a final evaluation that fails")
            """))
        trace = run_trace(path)
        names = [op["name"] for op in trace["ops"]]
        self.assertEqual(names[0], "wavecast::data_loading", "the iteration starts at its fetch")
        self.assertEqual(names.count("wavecast::data_loading"), 1)
        self.assertFalse([name for name in names if "cdist" in name], names)
        self.assertIn("aten::mul_", names[names.index("aten::_foreach_add_"):], "after the step")
        self.assertEqual(trace["batch_size"], 16)

    def test_a_loop_over_batches_drawn_beforehand_is_recorded_from_model_call_to_model_call(self):
        # The DataLoader is emptied before the first step: no fetch marks a pass.
        path = self.write(REAL_SAMPLES + textwrap.dedent("""
            import torch.nn as nn

            batches = list(DataLoader(Samples(), batch_size=16))
            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in batches:
                nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
                optimizer.zero_grad()
            """))
        names = [op["name"] for op in run_trace(path)["ops"]]
        self.assertEqual(names.count("aten::addmm"), 1, names)
        self.assertIn("aten::_foreach_add_", names)
        # It ends where the next pass calls the model: that pass's batch is copied over.
        self.assertEqual(names[-1], "wavecast::host_to_device", names)

    def test_a_loop_without_a_dataloader_is_recorded_from_model_call_to_model_call(self):
        path = self.write("""
            import torch
            import torch.nn as nn

            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for i in range(5):
                x = torch.randn(16, 32, device="cuda")
                model(x).sum().backward()
                optimizer.step()
                if i % 100 == 0:
                    torch.cdist(x, x)  # after the first step only: out of the recorded pass
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        names = [op["name"] for op in trace["ops"]]
        self.assertFalse([name for name in names if "cdist" in name], names)
        self.assertEqual(names.count("aten::addmm"), 1, names)
        self.assertIn("aten::_foreach_add_", names)
        self.assertEqual(names[-1], "aten::randn", "ends at the next pass's model call, its batch made")
        self.assertIn({"kind": "unrepeated_work", "severity": "info", "file": path, "line": 12, "count": 1},
                      trace["warnings"])

    def test_a_loop_calling_no_module_is_recorded_from_step_to_step(self):
        path = self.write("""
            import torch

            w = torch.zeros(32, 10, device="cuda", requires_grad=True)
            optimizer = torch.optim.SGD([w], lr=0.1)
            for i in range(5):
                x = torch.randn(16, 32, device="cuda")
                (x @ w).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        names = [op["name"] for op in run_trace(path)["ops"]]
        self.assertEqual(names.count("aten::mm"), 2, names)  # forward, and w's gradient
        self.assertEqual(names[-1], "aten::_foreach_add_", "ends at the second step")

    def test_an_evaluation_on_some_steps_only_is_noted_and_left_out(self):
        # nanoGPT evaluates at step 0, then every eval_interval steps, in a function, with
        # the model its training runs (the model's own lines are in the recorded iteration).
        path = self.write("""
            import torch
            import torch.nn as nn

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(32, 10)

                def forward(self, x):
                    return self.fc(x).relu()

            model = Model().cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)

            @torch.no_grad()
            def evaluate():
                x = torch.randn(64, 32, device="cuda")
                return model(x).softmax(-1).mean()

            for step in range(5):
                if step % 2000 == 0:
                    print(evaluate().item())
                x = torch.randn(16, 32, device="cuda")
                model(x).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        names = [op["name"] for op in trace["ops"]]
        self.assertNotIn("aten::_softmax", names)
        self.assertEqual(names.count("aten::addmm"), 1, names)
        notes = [w for w in trace["warnings"] if w["kind"] == "unrepeated_work"]
        # At the loop's call of the evaluation: its ops, the model's included, count there.
        self.assertEqual(notes, [{"kind": "unrepeated_work", "severity": "info", "file": path, "line": 23,
                                  "count": 1}], notes)

    def test_the_accelerator_api_finds_the_gpu_and_rnns_run_as_cudnn_runs_them(self):
        # pytorch/examples' word language model: torch.accelerator picks the device, an LSTM
        # trains with a hand-written update after each backward pass (no optimizer).
        path = self.write("""
            import torch
            import torch.nn as nn

            assert torch.accelerator.is_available() and torch.accelerator.device_count() == 1
            device = torch.accelerator.current_accelerator()
            assert device.type == "cuda", device
            torch.accelerator.synchronize()
            model = nn.LSTM(16, 32, num_layers=2).to(device)
            for step in range(3):
                model.zero_grad()
                output, _ = model(torch.randn(5, 4, 16, device=device))
                output.sum().backward()
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-0.1)
            """)
        trace = run_trace(path)
        names = [op["name"] for op in trace["ops"]]
        self.assertIn("aten::lstm", names)
        self.assertIn("aten::_cudnn_rnn_backward", names)
        self.assertFalse([name for name in names if "mkldnn" in name], names)
        self.assertEqual(names.count("aten::add_"), 8, "one update per parameter, after one backward pass")
        # Its batches are sequence first (5 steps of 4 sequences), as nn.LSTM takes them.
        self.assertEqual((trace["batch_size"], trace["samples_per_iteration"]), (4, 4))
        self.assertFalse(torch.accelerator.is_available(), "put back after the trace")

    def test_a_backward_pass_before_the_optimizer_is_made_is_no_iteration(self):
        # llm.c runs one forward and backward to export its gradients, then makes its
        # optimizer and trains: the iterations are bounded by the optimizer's steps.
        path = self.write("""
            import torch
            import torch.nn as nn

            model = nn.Linear(32, 32).cuda()
            model(torch.randn(4, 32, device="cuda")).sum().backward()
            exported = [p.grad.cpu() for p in model.parameters()]
            optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
            for step in range(3):
                optimizer.zero_grad()
                model(torch.randn(4, 32, device="cuda")).sum().backward()
                optimizer.step()
            """)
        names = [op["name"] for op in run_trace(path)["ops"]]
        self.assertIn("aten::_foreach_lerp_", names)
        self.assertNotIn("wavecast::device_to_host", names, "the export is not the iteration")

    def test_a_script_that_never_asks_for_cuda_is_told_so(self):
        cpu_only = self.write(TRAIN.replace(".cuda()", "").replace(', device="cuda"', ""))
        kinds = [w["kind"] for w in run_trace(cpu_only)["warnings"]]
        self.assertIn("cpu_only_script", kinds)
        self.assertNotIn("cpu_only_script", [w["kind"] for w in run_trace(self.write(TRAIN))["warnings"]])
        # A bare index names CUDA's device, as pytorch/examples' DDP tutorial moves its model
        # and batches (`.to(gpu_id)` with gpu_id = 0); an index after the device is no device.
        by_index = self.write(TRAIN.replace(".cuda()", ".to(0)").replace(', device="cuda"', "").replace(
            "model(torch.randn(4, 8)", "model(torch.randn(4, 8).to(0, torch.float32, False)"))
        kinds = [w["kind"] for w in run_trace(by_index)["warnings"]]
        self.assertIn("cuda_traced_on_cpu", kinds)
        self.assertNotIn("cpu_only_script", kinds)

    def test_a_script_in_a_subfolder_has_its_repositorys_code_as_its_own(self):
        # minGPT's projects/chargpt/chargpt.py imports its model from mingpt/ at the top:
        # that model's lines carry its ops, while the script runs from its own folder.
        top = self.directory.name
        os.makedirs(os.path.join(top, "mypkg"))
        os.makedirs(os.path.join(top, "scripts"))
        open(os.path.join(top, "pyproject.toml"), "w").close()
        with open(os.path.join(top, "mypkg", "__init__.py"), "w") as f:
            f.write("")
        with open(os.path.join(top, "mypkg", "model.py"), "w") as f:
            f.write(textwrap.dedent("""
                import torch.nn as nn

                class Model(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.layer = nn.Linear(8, 8)

                    def forward(self, x):
                        return self.layer(x).relu()
                """))
        path = os.path.join(top, "scripts", "train.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent("""
                import os
                import sys
                sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
                import torch
                from mypkg.model import Model

                assert os.getcwd() == os.path.dirname(os.path.abspath(__file__))
                model = Model().cuda()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for step in range(3):
                    model(torch.randn(4, 8, device="cuda")).sum().backward()
                    optimizer.step()
                    optimizer.zero_grad()
                """))
        trace = run_trace(path)
        files = {op["name"]: os.path.relpath(op["loc"]["file"], top) for op in trace["ops"]}
        self.assertEqual(files["aten::addmm"], os.path.join("mypkg", "model.py"))
        self.assertEqual(files["aten::relu"], os.path.join("mypkg", "model.py"))
        self.assertEqual(files["aten::_foreach_add_"], os.path.join("scripts", "train.py"))
        self.assertEqual(trace["project_root"], os.path.abspath(top))

    def test_a_home_folder_kept_in_git_is_no_project(self):
        home = os.path.join(self.directory.name, "home")
        os.makedirs(os.path.join(home, ".git"))
        os.makedirs(os.path.join(home, "experiments", "run1"))
        saved = os.environ.get("HOME")
        os.environ["HOME"] = home
        try:
            folder = os.path.join(home, "experiments", "run1")
            self.assertEqual(repository_root(folder), folder)
        finally:
            if saved is None:
                del os.environ["HOME"]
            else:
                os.environ["HOME"] = saved

    def test_a_wrapper_forwarding_its_arguments_leaves_the_work_to_its_caller(self):
        # torchtitan's tensor parallelism replaces a module's forward with a function that
        # redistributes the inputs and calls the original with them; a timing decorator
        # does the same. The Linear's work is the line that called the module.
        path = self.write("""
            import functools
            import torch
            import torch.nn as nn


            def timed(fn):
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    return fn(*args, **kwargs)
                return wrapper


            model = nn.Linear(32, 10).cuda()
            model.forward = timed(model.forward)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                out = model(torch.randn(16, 32, device="cuda"))  # the model's line
                out.sum().backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        with open(path) as f:
            line = next(i for i, text in enumerate(f, 1) if "# the model's line" in text)
        addmm = next(op for op in trace["ops"] if op["name"] == "aten::addmm")
        self.assertEqual(addmm["loc"]["line"], line)

    def test_a_script_importing_torchs_scripted_optimizers_traces(self):
        # llm.c imports ZeroRedundancyOptimizer: torch.distributed.optim scripts functional
        # optimizers when imported, compiling the foreach default the tracer answers.
        path = self.write("from torch.distributed.optim import ZeroRedundancyOptimizer\n"
                          + TRAIN.replace("torch.optim.SGD", "torch.optim.AdamW"))
        trace = run_trace(path)
        self.assertIn("aten::_foreach_lerp_", {op["name"] for op in trace["ops"]})

    def test_a_compiled_extensions_relative_source_is_no_project_file(self):
        # Cython records `pyarrow/error.pxi`; from the project's folder it would read as the
        # project's own file and take the line of an error raised there.
        project = Project(self.write("print()\n"))
        cwd = os.getcwd()
        os.chdir(project.folder)
        try:
            self.assertFalse(project.contains("pyarrow/error.pxi"))
            self.assertTrue(project.contains(os.path.join(project.folder, "model.py")))
        finally:
            os.chdir(cwd)

    def test_an_entry_inside_the_projects_package_is_told_how_python_finds_it(self):
        # torchtitan/train.py imports `torchtitan`: found by `python -m torchtitan.train`
        # from the repository's top, not by `python torchtitan/train.py`.
        root = self.directory.name
        open(os.path.join(root, "pyproject.toml"), "w").close()
        os.makedirs(os.path.join(root, "titan"))
        open(os.path.join(root, "titan", "__init__.py"), "w").close()
        entry = os.path.join(root, "titan", "train.py")
        with open(entry, "w") as f:
            f.write("from titan.models import llama\n")
        with self.assertRaises(TraceError) as raised:
            run_trace(entry)
        error = raised.exception
        self.assertEqual((error.kind, error.line), ("import_error", 1))
        self.assertIn("the project's own package", error.message)
        self.assertIn(f"install -e {root}", error.hint)
        self.assertIn(f"PYTHONPATH={root}", error.hint)

    def test_a_name_the_installed_package_lacks_names_its_version(self):
        # transformers 5 dropped names its older example scripts import: the package is
        # there, in another version than the script was written for.
        path = self.write("from torch.optim import NoSuchOptimizer\n")
        with self.assertRaises(TraceError) as raised:
            run_trace(path)
        error = raised.exception
        self.assertEqual((error.kind, error.line), ("import_error", 1))
        self.assertIn(f"torch {torch.__version__.split('+')[0]}", error.message)
        self.assertIn("has no such name", error.message)
        self.assertIn("another version of torch", error.hint)

    def test_metrics_read_values_as_a_gpu_run_reads_them(self):
        # pytorch/examples' ImageNet script formats a 0-d accuracy tensor (`{val:6.2f}`), and
        # scripts compute metrics with NumPy: a fake tensor formats and converts as a real one
        # does, with the value the trace follows (the labels) or zeros (the predictions).
        path = self.write("""
            import numpy as np
            import torch
            import torch.nn as nn

            model = nn.Linear(16, 4).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                x = torch.randn(8, 16).cuda()
                y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3]).cuda()
                output = model(x)
                loss = nn.functional.cross_entropy(output, y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                accuracy = (output.argmax(1) == y).float().mean() * 100
                print(f"loss {loss:.4f} accuracy {accuracy:6.2f}")
                labels = y.cpu().numpy()
                assert labels.tolist() == [0, 1, 2, 3, 0, 1, 2, 3], labels
                predictions = np.asarray(output.detach().argmax(1).cpu())
                assert predictions.shape == (8,) and predictions.dtype == np.int64
                try:
                    output.numpy()
                except RuntimeError as error:
                    assert "requires grad" in str(error)
                else:
                    raise AssertionError("numpy() of a tensor that requires grad")
            """)
        self.assertEqual(run_trace(path)["batch_size"], 8)

    def test_what_the_script_changes_of_the_process_is_put_back(self):
        path = self.write(textwrap.dedent("""
            import logging, os, signal
            os.environ["WAVECAST_TEST_VARIABLE"] = "set by the script"
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
            logging.basicConfig(filename="train.log", level=logging.DEBUG)
            """) + TRAIN)
        handler = signal.getsignal(signal.SIGUSR1)
        handlers = list(logging.getLogger().handlers)
        run_trace(path)
        self.assertNotIn("WAVECAST_TEST_VARIABLE", os.environ)
        self.assertIs(signal.getsignal(signal.SIGUSR1), handler)
        self.assertEqual(logging.getLogger().handlers, handlers)

    def test_a_project_finds_its_own_modules_after_another_projects_trace(self):
        projects = []
        for width in (16, 24):
            folder = tempfile.mkdtemp(dir=self.directory.name)
            with open(os.path.join(folder, "helpers.py"), "w") as f:
                f.write(f"WIDTH = {width}\n")
            with open(os.path.join(folder, "train.py"), "w") as f:
                f.write(TRAIN.replace("import torch", "import torch\nfrom helpers import WIDTH")
                        .replace("Linear(8, 8)", "Linear(8, WIDTH)"))
            projects.append(os.path.join(folder, "train.py"))
        for path in (projects[0], projects[1], projects[0]):
            trace = run_trace(path)
            width = 16 if path == projects[0] else 24
            shapes = [op["outputs"][0]["shape"] for op in trace["ops"] if op["name"] == "aten::addmm"]
            self.assertEqual(shapes[0], [4, width], path)

    def test_transformers_sees_fake_tensors_as_fake_again_after_the_trace(self):
        # During the trace transformers' is_fake_tensor says False (its value checks run);
        # a transformers module that took the function meanwhile keeps a replacement that
        # hands back to the real one once the trace is over.
        try:
            import transformers.utils.import_utils as import_utils
        except ImportError:
            self.skipTest("transformers is not installed in this Python (the test environment has it)")
        from torch._subclasses.fake_tensor import FakeTensorMode
        import torch

        path = self.write(textwrap.dedent("""
            import transformers
            from transformers.utils.import_utils import is_fake_tensor
            transformers._wavecast_test_kept = is_fake_tensor
            assert not is_fake_tensor(None), "the trace's answer"
            """) + TRAIN)
        original = import_utils.is_fake_tensor
        run_trace(path)
        import transformers

        kept = transformers._wavecast_test_kept
        del transformers._wavecast_test_kept
        self.assertIs(import_utils.is_fake_tensor, original)
        fake = FakeTensorMode().from_tensor(torch.zeros(2))
        self.assertTrue(kept(fake), "the kept replacement hands off to the real function")
        self.assertTrue(original(fake))


if __name__ == "__main__":
    unittest.main()
