"""The script's own data on the host (recorder.OpRecorder._host_data_inputs): tensors read from
bytes or NumPy, and what is computed from them alone, are real in shape mode, as on the host
of a GPU machine; their copies to the GPU are shape-only."""

import os
import textwrap
from unittest import mock

import torch

from script_folder import ScriptFolderCase
from wavecast_tracer import recorder
from wavecast_tracer.tracer import run_trace

# MNIST's files as torchvision reads them: the bytes through torch.frombuffer, viewed and
# converted with torch, and each sample's label read with int() in __getitem__.
DIGITS = """
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

rng = np.random.default_rng(0)
labels = rng.integers(0, 10, 512, dtype=np.uint8)
with open("labels.bin", "wb") as f:
    f.write(labels.tobytes())
with open("images.bin", "wb") as f:
    f.write(rng.integers(0, 255, 512 * 784, dtype=np.uint8).tobytes())


def read(path):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)


class Digits(Dataset):
    def __init__(self):
        self.data = read("images.bin").view(-1, 28, 28)
        self.targets = read("labels.bin").long()

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        image, target = self.data[index], int(self.targets[index])
        return torch.from_numpy(image.numpy().astype(np.float32) / 255).unsqueeze(0), target


digits = Digits()
assert int(digits.targets.sum()) == int(labels.sum()), "the labels' values are the file's"
model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 26 * 26, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(digits, batch_size=64, shuffle=True):
    x, y = x.cuda(), y.cuda()
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


class HostDataTest(ScriptFolderCase):
    def test_a_dataset_read_from_bytes_keeps_its_values(self):
        trace = run_trace(self.write(DIGITS))
        self.assertEqual(trace["mode"], "shape")
        self.assertNotIn("traced_in_cpu_mode", [w["kind"] for w in trace["warnings"]])
        self.assertEqual(trace["batch_size"], 64)
        self.assertEqual(sum(op["name"] == "aten::convolution" for op in trace["ops"]), 1)

    def test_past_the_budget_host_data_is_shape_only(self):
        # A checkpoint's weights converted on the host would take this machine's memory:
        # past the budget the ops on host data are shape-only, and values read from them
        # need cpu mode.
        with mock.patch.object(recorder, "_HOST_DATA_BYTES", 0):
            trace = run_trace(self.write(DIGITS))
        self.assertEqual(trace["mode"], "cpu")
        self.assertIn("traced_in_cpu_mode", [w["kind"] for w in trace["warnings"]])

    def test_host_data_copied_to_the_gpu_is_shape_only(self):
        # Before the iteration (a table the model keeps) and in it (the batch): the copy is
        # the GPU's, so what is computed from it is shape-only, while the host tensor stays
        # host data.
        path = self.write(textwrap.dedent("""
            import numpy as np
            import torch
            import torch.nn as nn
            from torch._subclasses.fake_tensor import is_fake

            table = torch.from_numpy(np.ones((8, 32), dtype=np.float32))
            on_gpu = table.cuda()
            assert on_gpu is not table and is_fake(on_gpu * 2) and not is_fake(table * 2)
            assert is_fake(table.to("cuda") * 2) and is_fake(torch.as_tensor(table, device="cuda") * 2)
            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                x = torch.from_numpy(np.ones((8, 32), dtype=np.float32))
                doubled = x * 2  # host work
                assert not is_fake(doubled) and float(doubled.sum()) == 512.0
                x = doubled.to("cuda")
                assert is_fake(x + 1)
                loss = model(x + on_gpu).square().mean()  # on the GPU
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """))
        trace = run_trace(path)
        self.assertEqual(trace["mode"], "shape")
        with open(path) as f:
            lines = {marker: n for n, text in enumerate(f, 1) for marker in ("# host work", "# on the GPU")
                     if marker in text}
        devices = {(op["loc"]["line"], op["name"]): op.get("device", "gpu") for op in trace["ops"]
                   if op["phase"] == "forward"}
        self.assertEqual(devices[(lines["# host work"], "aten::mul")], "cpu")
        self.assertEqual(devices[(lines["# on the GPU"], "aten::add")], "gpu")

    def test_a_loaded_weight_given_a_shape_only_value_keeps_its_new_shape(self):
        # transformers' resize_token_embeddings: a checkpoint's weight (real, on the host)
        # gets the `.data` of a new, larger embedding (shape-only); the head tied to it
        # follows.
        path = self.write("""
            import numpy as np
            import torch
            import torch.nn as nn

            class LanguageModel(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(100, 16)
                    self.head = nn.Linear(16, 100, bias=False)

                def forward(self, ids):
                    return self.head(self.embed(ids))

            model = LanguageModel()
            model.embed.weight = nn.Parameter(torch.from_numpy(np.ones((100, 16), dtype=np.float32)))
            model.head.weight = model.embed.weight
            resized = nn.Embedding(120, 16)
            resized.weight.data[:100] = model.embed.weight.data
            model.embed.weight.data = resized.weight.data
            assert model.head.weight is model.embed.weight and model.embed.weight.shape == (120, 16)
            model = model.cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                ids = torch.randint(0, 120, (4, 8), device="cuda")
                loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        self.assertEqual(trace["mode"], "shape")
        [embedding] = [op for op in trace["ops"] if op["name"] == "aten::embedding"]
        self.assertEqual(embedding["inputs"][0]["shape"], [120, 16])
        self.assertEqual(trace["memory"]["parameters_bytes"], 120 * 16 * 4, "tied: counted once")

    def test_a_run_resumed_from_a_checkpoint_traces_in_shape_mode(self):
        # A checkpoint on the host is read as without a tracer: the script reads its values
        # (Adam's step counts, in its bias correction; BatchNorm's num_batches_tracked).
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
        optimizer = torch.optim.Adam(model.parameters())
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
        checkpoint = os.path.join(self.directory.name, "checkpoint.pt")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}, checkpoint)
        trace = run_trace(self.write("""
            import torch
            import torch.nn as nn

            model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)).cuda()
            optimizer = torch.optim.Adam(model.parameters())
            state = torch.load("checkpoint.pt", map_location="cpu")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            for epoch in range(state["epoch"] + 1, 10):
                loss = model(torch.randn(64, 8, device="cuda")).square().mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """))
        self.assertEqual(trace["mode"], "shape")
        self.assertNotIn("traced_in_cpu_mode", [w["kind"] for w in trace["warnings"]])
        self.assertEqual(trace["batch_size"], 64)
        self.assertEqual(sum(op["name"] == "aten::addmm" for op in trace["ops"] if op["phase"] == "forward"), 1)

    def test_a_checkpoint_saved_on_the_gpu_loads_shape_only_where_it_was_saved(self):
        # Restored to the GPU: shape-only, its values unknown (a 0-dim integer's too).
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
        with mock.patch("torch.serialization.location_tag", lambda storage: "cuda:0"):
            torch.save(model.state_dict(), os.path.join(self.directory.name, "checkpoint.pt"))
        trace = run_trace(self.write("""
            import torch
            import torch.nn as nn
            from torch._subclasses.fake_tensor import is_fake

            model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)).cuda()
            state = torch.load("checkpoint.pt")
            assert is_fake(state["0.weight"]) and is_fake(state["1.num_batches_tracked"])
            model.load_state_dict(state)
            optimizer = torch.optim.Adam(model.parameters())
            for epoch in range(10):
                loss = model(torch.randn(64, 8, device="cuda")).square().mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """))
        self.assertEqual(trace["mode"], "shape")
