"""A script run as written cannot harm the user's files or machine (sandbox.py), and each
thing tracing refuses is one clear error at the script's line."""

import builtins
import bz2
import glob
import importlib.util
import io
import os
import pathlib
import shutil
import signal
import socket
import stat
import sys
import tarfile
import tempfile
import textwrap
import types
import unittest
import warnings
from unittest import mock

import torch

from wavecast_tracer.errors import TraceError, TraceInterrupted
from wavecast_tracer.patching import PatchOnImport
from wavecast_tracer.sandbox import Sandbox
from wavecast_tracer.tracer import run_trace

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
HAS_HUB = importlib.util.find_spec("huggingface_hub") is not None
HAS_PYARROW = importlib.util.find_spec("pyarrow") is not None

# Two optimizer steps of a small model, as a training script's loop would run them.
TRAIN = """
import torch
model = torch.nn.Linear(8, 8).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    model(torch.randn(4, 8, device="cuda")).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def listing(folder):
    """Every file and folder under `folder`, with each file's bytes."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            found[os.path.relpath(os.path.join(root, name), folder)] = None
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = f.read()
    return found


def snapshot(folder):
    """`listing` with each entry's mode and modification time too."""
    found = {}
    for path, data in listing(folder).items():
        status = os.lstat(os.path.join(folder, path))
        found[path] = (data, status.st_mode, status.st_mtime_ns)
    return found


class _Project:
    """What a Sandbox reads of a project."""

    def __init__(self, root):
        self.root = root
        self.entry_file = os.path.join(root, "train.py")

    def contains(self, path):
        return path.startswith(self.root + os.sep)


class ScriptCase(unittest.TestCase):
    def setUp(self):
        self.folder = self.enterContext(tempfile.TemporaryDirectory(prefix="wavecast-script-test-"))

    def write(self, source, name="train.py"):
        path = os.path.join(self.folder, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(source))
        return path

    def line(self, path, text):
        with open(path) as f:
            return next(number for number, line in enumerate(f, 1) if text in line)

    def error(self, path, *args):
        with self.assertRaises(TraceError) as caught:
            run_trace(path, script_args=list(args))
        return caught.exception


class StubbedWrites(ScriptCase):
    def test_writes_leave_the_folder_as_it_was(self):
        path = self.write("""
            import os, pathlib, shutil, torch
            os.makedirs("out/ckpt", exist_ok=True)
            with open("out/log.txt", "w") as log:
                log.write("epoch 0")
            pathlib.Path("notes.txt").write_text("hello")
            with open("out/log.txt") as log:
                assert log.read() == "epoch 0"  # the script reads back what it wrote
            os.remove("data.txt")
            os.rename("keep.txt", "moved.txt")
            shutil.rmtree("out")
            model = torch.nn.Linear(8, 8).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                model(torch.randn(4, 8, device="cuda")).sum().backward()
                optimizer.step()
                torch.save(model.state_dict(), f"out/ckpt/{step}.pt")
            """)
        for name, text in (("data.txt", "1,2,3"), ("keep.txt", "mine")):
            with open(os.path.join(self.folder, name), "w") as f:
                f.write(text)
        before = listing(self.folder)
        trace = run_trace(path)
        self.assertEqual(listing(self.folder), before)
        stubbed = [(w["call"], w["line"]) for w in trace["warnings"] if w["kind"] == "call_stubbed"]
        self.assertEqual(stubbed, [("torch.save", self.line(path, "torch.save("))])


class SandboxedFiles(ScriptCase):
    """The file system as a script in the sandbox sees it, run in the project folder."""

    def setUp(self):
        super().setUp()
        for name, text in (("data.txt", "1,2,3"), ("out/old.txt", "old"), ("empty/.keep", "")):
            os.makedirs(os.path.dirname(os.path.join(self.folder, name)), exist_ok=True)
            with open(os.path.join(self.folder, name), "w") as f:
                f.write(text)
        os.remove(os.path.join(self.folder, "empty/.keep"))
        with tarfile.open(os.path.join(self.folder, "data.tar"), "w") as archive:
            archive.add(os.path.join(self.folder, "data.txt"), "inner/data.txt")
        past = 1_000_000_000
        for path in listing(self.folder):
            os.utime(os.path.join(self.folder, path), ns=(past, past))
        self.before = snapshot(self.folder)

    def sandboxed(self, body):
        """body() run in a sandbox; the project folder is checked unchanged after."""
        sandbox = Sandbox(_Project(self.folder), lambda: (None, 0), lambda *args: None)
        cwd = os.getcwd()
        os.chdir(self.folder)
        try:
            with sandbox.active():
                result = body()
        finally:
            os.chdir(cwd)
        self.assertEqual(snapshot(self.folder), self.before)
        return result

    def test_a_replacement_kept_past_the_trace_is_the_real_function(self):
        # A library first imported during a trace keeps what `from os.path import exists` found.
        kept = self.sandboxed(lambda: (os.path.exists, sys.exit, socket.getaddrinfo, builtins.open, torch.save))
        exists, exit_, getaddrinfo, open_, save = kept
        self.assertTrue(exists(os.path.join(self.folder, "data.txt")))
        self.assertFalse(exists(os.path.join(self.folder, "missing.txt")))
        with self.assertRaises(SystemExit):
            exit_(3)
        self.assertTrue(getaddrinfo("localhost", 80))
        saved = os.path.join(self.folder, "saved.pt")
        save({"x": 1}, saved)
        self.assertEqual(torch.load(saved), {"x": 1})
        os.remove(saved)
        # In a later trace it is that trace's sandbox.
        self.sandboxed(lambda: open_("later.txt", "w").close())

    def test_rmtree_then_makedirs_starts_an_empty_folder(self):
        def body():
            if os.path.exists("out"):
                shutil.rmtree("out")
            os.makedirs("out")
            seen = (os.listdir("out"), os.path.exists("out/old.txt"))
            os.remove("data.txt")
            os.rmdir("empty")
            with self.assertRaises(FileNotFoundError):
                open("data.txt")
            return seen, os.path.exists("data.txt"), os.path.isdir("empty"), sorted(os.listdir("."))

        self.assertEqual(self.sandboxed(body), (([], False), False, False, ["data.tar", "out"]))

    def test_touch_and_utime_leave_the_users_files(self):
        def body():
            pathlib.Path("flag").touch()
            pathlib.Path("data.txt").touch()
            os.utime("data.txt", ns=(5, 5))
            os.utime("out", ns=(7, 7))
            return os.path.exists("flag"), os.stat("data.txt").st_mtime_ns, os.stat("out").st_mtime_ns, \
                os.listdir("out")

        self.assertEqual(self.sandboxed(body), (True, 5, 7, ["old.txt"]))

    def test_chmod_truncate_links_and_jit_save_leave_the_users_files(self):
        def body():
            os.chmod("data.txt", 0o600)
            os.truncate("data.txt", 1)
            os.symlink("data.txt", "link.txt")
            os.link("data.txt", "hard.txt")
            with open("hard.txt", "r+") as f:  # the same file as data.txt
                f.write("2")
            os.rename("out/old.txt", "renamed.txt")
            with open("out/new.txt", "w") as f:
                f.write("new")
            os.rename("out", "out2")
            with warnings.catch_warnings():  # torch.jit is deprecated, and still saves
                warnings.simplefilter("ignore", DeprecationWarning)
                torch.jit.save(torch.jit.trace(torch.nn.Linear(2, 2), torch.randn(1, 2)), "model.pt")
            os.symlink("renamed.txt", "latest.txt")
            with open("link.txt") as f:
                return (f.read(), os.readlink("latest.txt"), stat.S_IMODE(os.stat("data.txt").st_mode),
                        os.path.exists("out/old.txt"), os.path.exists("renamed.txt"), os.path.exists("model.pt"),
                        os.listdir("out2"))

        self.assertEqual(self.sandboxed(body), ("2", "renamed.txt", 0o600, False, True, False, ["new.txt"]))

    def test_archives_extract_and_compress_into_the_sandbox(self):
        def body():
            with tarfile.open("data.tar") as archive:
                archive.extractall("extracted")
            with bz2.open("data.txt.bz2", "wt") as f:
                f.write("packed")
            with open("extracted/inner/data.txt") as f, bz2.open("data.txt.bz2", "rt") as g:
                return f.read(), g.read()

        self.assertEqual(self.sandboxed(body), ("1,2,3", "packed"))

    def test_reads_see_what_the_script_wrote(self):
        def body():
            pathlib.Path("runs").mkdir(exist_ok=True)
            pathlib.Path("runs").mkdir(exist_ok=True)
            with open("runs/a.txt", "w") as f:
                f.write("a")
            with open("out/new.txt", "w") as f:
                f.write("b")
            return (os.access("runs/a.txt", os.W_OK), pathlib.Path("runs/a.txt").exists(), os.listdir("runs"),
                    sorted(os.listdir("out")), os.stat("runs/a.txt").st_size, sorted(glob.glob("out/*.txt")),
                    sorted(name for _, _, names in os.walk("out") for name in names))

        self.assertEqual(self.sandboxed(body), (True, True, ["a.txt"], ["new.txt", "old.txt"], 1,
                                                ["out/new.txt", "out/old.txt"], ["new.txt", "old.txt"]))

    def test_a_folder_the_script_made_is_one_to_stat_and_enter(self):
        # datasets' file lock asks statvfs of its cache folder; a script may chdir into one.
        def body():
            os.makedirs("cache/datasets")
            free = os.statvfs("cache/datasets").f_bsize > 0
            limit = os.pathconf("cache/datasets", "PC_NAME_MAX") > 0
            os.chdir("cache")
            with open("note.txt", "w") as f:
                f.write("here")
            inside = os.path.exists(os.path.join(self.folder, "cache", "note.txt"))
            os.chdir(self.folder)
            os.chdir("out")  # the user's folder, entered as itself
            with open("old.txt") as f:
                old = f.read()
            os.chdir(self.folder)
            with open("cache/note.txt") as f:
                return free, limit, inside, old, f.read()

        self.assertEqual(self.sandboxed(body), (True, True, True, "old", "here"))

    @unittest.skipUnless(HAS_PYARROW, "pyarrow is not installed in this Python environment")
    def test_pyarrow_reads_the_file_the_script_wrote(self):
        # A datasets `.map` writes its cache file through Python and memory-maps it in C++.
        def body():
            import pyarrow as pa

            table = pa.table({"x": [1, 2, 3]})
            with open("out/cache.arrow", "wb") as f, pa.ipc.new_stream(f, table.schema) as writer:
                writer.write_table(table)
            with pa.memory_map("out/cache.arrow") as mapped:
                first = pa.ipc.open_stream(mapped).read_all()["x"].to_pylist()
            with pa.input_stream("out/cache.arrow") as stream:
                second = pa.ipc.open_stream(stream).read_all().num_rows
            return first, second

        self.assertEqual(self.sandboxed(body), ([1, 2, 3], 3))

    def test_update_and_append_start_from_the_users_file(self):
        def body():
            with open("data.txt", "r+") as f:
                first = f.read()
                f.write(",4")
            with open("out/old.txt", "a") as f:
                f.write("er")
            with open("data.txt") as f, open("out/old.txt") as g:
                return first, f.read(), g.read()

        self.assertEqual(self.sandboxed(body), ("1,2,3", "1,2,3,4", "older"))


class StandIns(ScriptCase):
    @unittest.skipIf(importlib.util.find_spec("mlflow") is not None, "mlflow is installed: the test needs its "
                     "stand-in to be the only mlflow this process has seen")
    def test_a_module_under_a_stubbed_logger_is_a_stand_in_too(self):
        stubbed = []
        sandbox = Sandbox(_Project(self.folder), lambda: ("train.py", 3), lambda call, *site: stubbed.append(call))
        with sandbox.active():
            import mlflow.pytorch
            from mlflow.tracking import MlflowClient
            mlflow.pytorch.log_model(torch.nn.Linear(2, 2), "model")
            MlflowClient()
        self.assertEqual(stubbed, ["mlflow.pytorch.log_model", "mlflow.tracking.MlflowClient"])
        self.assertEqual([name for name in sys.modules if name.startswith("mlflow")], [])


class SandboxRestored(ScriptCase):
    PATCHED = ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "listdir"), (os, "mkdir"),
               (os, "remove"), (os.path, "exists"), (shutil, "rmtree"), (sys, "exit"), (socket, "getaddrinfo"),
               (torch, "save"), (tarfile, "bltn_open"))

    def state(self):
        return ([getattr(owner, name) for owner, name in self.PATCHED], list(sys.meta_path),
                {name: sys.modules.get(name) for name in ("wandb", "mlflow", "tensorboardX")})

    def test_a_failing_patch_leaves_nothing_patched(self):
        before = self.state()
        sandbox = Sandbox(_Project(self.folder), lambda: (None, 0), lambda *args: None)
        # Only this entry is put back by hand: restoring all of sys.modules would hide a leak.
        saved = sys.modules.get("safetensors.torch", self)
        sys.modules["safetensors.torch"] = None  # its import fails
        try:
            with sandbox.active():
                import safetensors.torch  # noqa: F401
        except ImportError:
            pass
        finally:
            if saved is self:
                del sys.modules["safetensors.torch"]
            else:
                sys.modules["safetensors.torch"] = saved
        self.assertEqual(self.state(), before)

    def test_a_replacement_that_fails_sets_back_those_made_before_it(self):
        class ReadOnly(types.ModuleType):
            def __setattr__(self, name, value):
                raise AttributeError(f"{name} is read-only")

        kept_open = ReadOnly("tarfile")  # a module that keeps the open it imported, replaced last
        kept_open.__dict__["bltn_open"] = builtins.open
        before = self.state()
        sandbox = Sandbox(_Project(self.folder), lambda: (None, 0), lambda *args: None)
        saved = sys.modules["tarfile"]
        sys.modules["tarfile"] = kept_open
        try:
            with self.assertRaises(AttributeError):
                with sandbox.active():
                    pass
        finally:
            sys.modules["tarfile"] = saved
        self.assertEqual(self.state(), before)
        self.assertIsNone(sandbox.folder)

    def test_a_failing_import_patch_is_undone(self):
        module = types.ModuleType("wavecast_test_module")

        def patch(module, undo):
            module.patched = True
            undo.append(lambda: delattr(module, "patched"))
            raise RuntimeError("this patch fails halfway")

        before = self.state()
        with mock.patch.dict(sys.modules, {module.__name__: module}):
            with self.assertRaises(RuntimeError):
                with PatchOnImport({module.__name__: patch}).installed():
                    pass
        self.assertFalse(hasattr(module, "patched"))
        self.assertEqual(self.state(), before)

    def test_a_package_patched_on_import_still_reads_its_own_files(self):
        # typeshed_client finds its bundled stubs through importlib.resources, which asks
        # the package's loader.
        package = os.path.join(self.folder, "wavecast_test_package")
        os.makedirs(package)
        open(os.path.join(package, "__init__.py"), "w").close()
        with open(os.path.join(package, "data.txt"), "w") as f:
            f.write("bundled")
        patched = []
        with mock.patch.dict(sys.modules), mock.patch.object(sys, "path", [self.folder, *sys.path]):
            with PatchOnImport({"wavecast_test_package": lambda module, undo: patched.append(module)}).installed():
                import importlib.resources
                import wavecast_test_package

                text = importlib.resources.files(wavecast_test_package).joinpath("data.txt").read_text()
        self.assertEqual((text, patched), ("bundled", [wavecast_test_package]))

    def test_typeshed_client_finds_its_search_path_without_a_subprocess(self):
        # jsonargparse (LightningCLI) reads a model's arguments with typeshed_client, which
        # asks a Python subprocess for sys.path unless given it.
        package = os.path.join(self.folder, "typeshed_client")
        os.makedirs(package)
        with open(os.path.join(package, "__init__.py"), "w") as f:
            f.write("from . import finder\nfrom .finder import get_search_context\n")
        with open(os.path.join(package, "finder.py"), "w") as f:
            f.write(textwrap.dedent("""
                import subprocess, sys


                def get_search_context(*, search_path=None, python_executable=None, allow_py_files=False):
                    if search_path is None:
                        subprocess.check_output([python_executable or sys.executable, "-c", "print()"])
                    return search_path, allow_py_files
                """))
        sandbox = Sandbox(_Project(self.folder), lambda: (None, 0), lambda *args: None)
        with mock.patch.dict(sys.modules), mock.patch.object(sys, "path", [self.folder, *sys.path]):
            with sandbox.active():
                import typeshed_client

                search_path, allow = typeshed_client.get_search_context(allow_py_files=True)
        self.assertEqual(allow, True)
        self.assertIn(pathlib.Path(self.folder), search_path, "this process's sys.path")

    @unittest.skipUnless(HAS_HUB, "huggingface_hub is not installed in this Python environment")
    def test_hub_imported_during_a_trace_is_online_after(self):
        sandbox = Sandbox(_Project(self.folder), lambda: (None, 0), lambda *args: None)
        online = {name: value for name, value in os.environ.items()
                  if name not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        with mock.patch.dict(sys.modules), mock.patch.dict(os.environ, online, clear=True):
            for name in [name for name in sys.modules if name.startswith("huggingface_hub")]:
                del sys.modules[name]
            with sandbox.active():
                import huggingface_hub.constants as constants
                self.assertTrue(constants.HF_HUB_OFFLINE)
            self.assertFalse(constants.HF_HUB_OFFLINE)


class RefusedCalls(ScriptCase):
    def assert_blocked(self, source, text, message):
        path = self.write(source)
        error = self.error(path)
        self.assertEqual((error.kind, error.file, error.line), ("blocked_call", path, self.line(path, text)))
        self.assertIn(message, error.message)
        self.assertTrue(error.hint)
        return error

    def test_sys_exit(self):
        self.assert_blocked("import sys\nsys.exit(3)\n", "sys.exit(3)", "sys.exit(3)")

    def test_raise_system_exit_and_the_builtin_exit(self):
        self.assert_blocked("raise SystemExit(2)\n", "raise SystemExit", "SystemExit(2)")
        self.assert_blocked("print('done')\nexit()\n", "exit()", "SystemExit(None)")

    def test_argparse_error_exits_at_parse_args(self):
        path = self.write("import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', type=float)\n"
                          "p.parse_args()\n")
        error = self.error(path, "--lr", "fast")
        self.assertEqual((error.kind, error.line), ("blocked_call", 4))
        self.assertIn("sys.exit(2)", error.message)
        self.assertIn("invalid float value: 'fast'", error.output)

    def test_input(self):
        self.assert_blocked("answer = input('continue? ')\n", "input(", "input()")

    def test_subprocess(self):
        self.assert_blocked("import subprocess\nsubprocess.run(['true'])\n", "subprocess.run", "a subprocess")
        self.assert_blocked("import os\nos.system('true')\n", "os.system", "a shell command")

    def test_a_subprocess_the_script_does_without_fails_as_a_missing_program(self):
        # torchtitan asks lspci for the GPU's peak; a script asks git for its commit.
        trace = run_trace(self.write(textwrap.dedent("""
            import subprocess
            try:
                commit = subprocess.check_output(["git", "rev-parse", "HEAD"], text=True)
            except (FileNotFoundError, subprocess.CalledProcessError):
                commit = "unknown"
            """) + TRAIN))
        self.assertEqual(trace["batch_size"], 4)

    def test_multiprocessing(self):
        self.assert_blocked("import multiprocessing\n"
                            "multiprocessing.Process(target=print).start()\n", ".start()", "multiprocessing")

    def test_hogwild_shares_its_model_then_its_processes_are_refused(self):
        # pytorch/examples' mnist_hogwild: model.share_memory() on the tracer's shape-only
        # tensors is a no-op (as for CUDA memory), and the processes it starts get the message.
        self.assert_blocked("import torch.multiprocessing as mp\n"
                            "import torch.nn as nn\n"
                            "model = nn.Linear(4, 2)\n"
                            "model.share_memory()\n"
                            "mp.Process(target=print, args=(model,)).start()\n", ".start()", "multiprocessing")

    def test_download(self):
        error = self.assert_blocked("import urllib.request\n"
                                    "urllib.request.urlopen('https://example.com/data.csv')\n",
                                    "urlopen", "example.com")
        self.assertIn("never downloads", error.hint)

    @unittest.skipUnless(HAS_TRANSFORMERS, "transformers is not installed in this Python environment")
    def test_hub_download(self):
        error = self.assert_blocked("from transformers import AutoModel\n"
                                    "AutoModel.from_pretrained('wavecast-tests/no-such-model')\n",
                                    "from_pretrained", "download")
        self.assertIn("HF_HUB_OFFLINE", error.hint)


class Steps(ScriptCase):
    def test_a_script_that_ends_after_one_step_says_so_at_the_step(self):
        path = self.write(TRAIN.replace("range(3)", "range(1)"))
        error = self.error(path)
        self.assertEqual(error.kind, "no_training_step")
        self.assertIn("after 1 optimizer step", error.message)
        self.assertEqual((error.file, error.line), (path, self.line(path, "optimizer.step()")))

    def test_a_script_that_only_evaluates_says_it_never_trained(self):
        # An evaluation run (torchvision's train.py --test-only): the model runs, nothing trains.
        path = self.write("""
            import torch
            model = torch.nn.Linear(8, 8).cuda().eval()
            with torch.inference_mode():
                for batch in range(3):
                    model(torch.randn(4, 8, device="cuda"))
            """)
        error = self.error(path)
        self.assertEqual(error.kind, "no_training_step")
        self.assertIn("ran its model but never trained it", error.message)
        self.assertIn("--test-only", error.hint)
        self.assertEqual((error.file, error.line), (path, self.line(path, "model(torch.randn")))

    def test_time_out_before_the_second_step_names_the_line(self):
        path = self.write(TRAIN.replace("    optimizer.zero_grad()\n",
                                        "    optimizer.zero_grad()\n    while True:\n        pass\n"))

        def interrupt(*_):  # what the worker's SIGUSR1 handler does at the time-out
            raise TraceInterrupted()

        previous = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 20)
        try:
            error = self.error(path)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        self.assertEqual((error.kind, error.line), ("timeout", self.line(path, "while True")))
        self.assertIn("second optimizer step", error.message)
        self.assertIn("1 optimizer step so far", error.message)

    def test_providers_win_over_the_main_block(self):
        path = self.write("""
            import torch
            def wavecast_model():
                return torch.nn.Linear(8, 8)
            def wavecast_input(batch_size=4):
                return (torch.randn(batch_size, 8),)
            def wavecast_iteration(model):
                return lambda x: model(x).sum().backward()
            if __name__ == "__main__":
                raise SystemExit("the main block must not run")
            """)
        trace = run_trace(path)
        self.assertEqual(trace["providers"]["model"], self.line(path, "def wavecast_model"))

    def test_cuda_answers_as_the_target_gpu(self):
        path = self.write(textwrap.dedent("""
            import torch
            properties = torch.cuda.get_device_properties(0)
            assert torch.cuda.is_available()
            assert properties.name == "NVIDIA A100-SXM4-40GB", properties.name
            assert properties.total_memory == 40 * 2**30
            assert torch.cuda.get_device_capability() == (8, 0)
            assert torch.cuda.is_bf16_supported()
            """) + TRAIN)
        device = {"name": "NVIDIA A100-SXM4-40GB", "memory_bytes": 40 * 2 ** 30, "capability": [8, 0],
                  "multiprocessors": 108}
        trace = run_trace(path, device=device)
        self.assertEqual(trace["batch_size"], 4)


if __name__ == "__main__":
    unittest.main()
