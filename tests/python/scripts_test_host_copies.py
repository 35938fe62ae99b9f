"""Copies between host memory and the GPU in a script run as written (placement.py,
trace_state.py): which tensors are host tensors, how each copy is recorded, and the script's
own waits for the GPU."""

import textwrap

from script_folder import REAL_SAMPLES, ScriptFolderCase
from wavecast_tracer.tracer import run_trace


class HostCopiesTest(ScriptFolderCase):
    def test_a_batch_copied_to_the_gpu_crosses_the_host_link(self):
        # Each host tensor the iteration copies over is an op at its line: from pageable
        # memory (staged on this CPU first, timed) or from a pinning loader's page-locked
        # memory; non_blocking as given.
        path = self.write(REAL_SAMPLES + textwrap.dedent("""
            import torch.nn as nn

            pageable = DataLoader(Samples(), batch_size=16)
            pinned = DataLoader(Samples(), batch_size=16, pin_memory=True)
            assert pinned.pin_memory, "reads back what the script asked for"
            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for (x, y), (x2, _) in zip(pageable, pinned):
                x, y = x.to("cuda"), y.cuda()  # the copies
                x2 = x2.to(torch.device("cuda"), non_blocking=True)
                loss = nn.functional.cross_entropy(model(x) + model(x2), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """))
        trace = run_trace(path)
        copies = [op for op in trace["ops"] if op["name"] == "wavecast::host_to_device"]
        self.assertEqual([(op["inputs"][0]["shape"], op["args"]["bytes"], op["args"]["pinned"],
                           op["args"]["non_blocking"]) for op in copies],
                         [([16, 32], 2048, False, False), ([16], 128, False, False), ([16, 32], 2048, True, True)])
        self.assertTrue(all(op["args"]["staging_ms"] > 0 for op in copies[:2]), copies)
        self.assertNotIn("staging_ms", copies[2]["args"], "page-locked memory is not staged")
        with open(path) as f:
            line = next(i for i, text in enumerate(f, 1) if "# the copies" in text)
        self.assertEqual({op["loc"]["line"] for op in copies[:2]}, {line})
        self.assertFalse(any(op["fallback"] for op in copies))

    def test_a_copy_on_a_stream_of_the_scripts_own_says_so(self):
        # timm's prefetcher: the next batch is copied on a stream the loader made, the
        # consumer's stream waiting for it; the labels here on the current stream.
        path = self.write(REAL_SAMPLES + textwrap.dedent("""
            import torch.nn as nn

            loader = DataLoader(Samples(), batch_size=16, pin_memory=True)
            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            stream = torch.cuda.Stream()
            for x, y in loader:
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    x = x.cuda(non_blocking=True)
                    assert torch.cuda.current_stream() is stream
                torch.cuda.current_stream().wait_stream(stream)
                y = y.cuda(non_blocking=True)
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """))
        trace = run_trace(path)
        copies = [op["args"] for op in trace["ops"] if op["name"] == "wavecast::host_to_device"]
        self.assertEqual([args.get("side_stream", False) for args in copies], [True, False], copies)

    def test_data_made_on_the_gpu_from_host_values_is_copied(self):
        # torch.tensor(list, device=...) and torch.as_tensor(array, device=...) copy the data
        # from host memory, without non_blocking; a GPU tensor's as_tensor copies nothing.
        path = self.write("""
            import numpy as np
            import torch
            import torch.nn as nn

            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                x = torch.as_tensor(np.ones((16, 32), dtype=np.float32), device="cuda")
                y = torch.tensor([i % 10 for i in range(16)], device="cuda")
                x = torch.as_tensor(x, device="cuda")
                nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        copies = [op for op in trace["ops"] if op["name"] == "wavecast::host_to_device"]
        self.assertEqual([(op["inputs"][0]["shape"], op["args"]["bytes"], op["args"]["non_blocking"])
                          for op in copies], [([16, 32], 2048, False), ([16], 128, False)])

    def test_only_host_tensors_are_copied(self):
        # A dataset the script keeps on the GPU yields GPU batches; one it keeps on the CPU,
        # host batches; a tensor made on the GPU or already moved is not copied again.
        path = self.write("""
            import torch
            import torch.nn as nn
            from torch.utils.data import DataLoader, TensorDataset

            on_gpu = TensorDataset(torch.randn(64, 32, device="cuda"), torch.randint(0, 10, (64,)).cuda())
            on_cpu = TensorDataset(torch.randn(64, 32), torch.randint(0, 10, (64,)))
            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for (x, y), (hx, _) in zip(DataLoader(on_gpu, batch_size=16), DataLoader(on_cpu, batch_size=16)):
                x, hx = x.to("cuda"), hx.to("cuda")
                noise = torch.randn(16, 32, device="cuda").to("cuda")
                loss = nn.functional.cross_entropy(model(x + hx.cuda() + noise), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        copies = [op for op in trace["ops"] if op["name"] == "wavecast::host_to_device"]
        self.assertEqual([op["inputs"][0]["shape"] for op in copies], [[16, 32]], copies)

    def test_a_batch_stacked_from_numpy_is_made_on_the_host(self):
        # nanoGPT's get_batch: views of a NumPy array stacked on the CPU, then copied over.
        path = self.write("""
            import numpy as np
            import torch
            import torch.nn as nn

            data = np.arange(4096, dtype=np.int64) % 64
            model = nn.Embedding(64, 16).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                x = torch.stack([torch.from_numpy(data[i:i + 32]) for i in range(0, 256, 32)])
                x = x.pin_memory().to("cuda", non_blocking=True)
                model(x).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        devices = {op["name"]: op.get("device") for op in trace["ops"]}
        self.assertEqual(devices["aten::stack"], "cpu")
        self.assertIsNone(devices["aten::embedding"])
        self.assertNotIn("host_tensor_with_gpu", [w["kind"] for w in trace["warnings"]])
        copies = [op["args"] for op in trace["ops"] if op["name"] == "wavecast::host_to_device"]
        self.assertEqual(copies, [{"bytes": 8 * 32 * 8, "pinned": True, "non_blocking": True}])

    def test_a_result_read_back_is_copied_to_the_host(self):
        # Metrics read on the host: `.cpu()`, `.to("cpu")`, `.tolist()` of GPU tensors are one
        # copy each over the host link, whose results are host tensors (their ops run on the
        # CPU); `.to("cpu", non_blocking=True)` lands in page-locked memory, unstaged. A host
        # tensor's `.cpu()` copies nothing.
        path = self.write("""
            import torch
            import torch.nn as nn

            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                labels = torch.arange(64) % 10
                out = model(torch.randn(64, 32, device="cuda"))
                nn.functional.cross_entropy(out, labels.cuda()).backward()
                optimizer.step()
                optimizer.zero_grad()
                preds = out.argmax(1).cpu()  # read back
                hits = (preds == (torch.arange(64) % 10).cpu()).sum()
                scores = out.detach().to("cpu", non_blocking=True)
                firsts = out[:, 0].tolist()
                torch.cuda.synchronize()
            """)
        trace = run_trace(path)
        copies = [op for op in trace["ops"] if op["name"] == "wavecast::device_to_host"]
        self.assertEqual([(op["inputs"][0]["shape"], op["args"]["bytes"], op["args"]["pinned"],
                           op["args"]["non_blocking"]) for op in copies],
                         [([64], 512, False, False), ([64, 10], 2560, True, True), ([64], 256, False, False)])
        self.assertTrue(all(op["args"]["staging_ms"] > 0 for op in (copies[0], copies[2])), copies)
        self.assertNotIn("staging_ms", copies[1]["args"])
        with open(path) as f:
            line = next(i for i, text in enumerate(f, 1) if "# read back" in text)
        self.assertEqual(copies[0]["loc"]["line"], line)
        on_hits_line = {op["name"]: op.get("device") for op in trace["ops"] if op["loc"]["line"] == line + 1}
        self.assertEqual(on_hits_line, {"aten::arange": "cpu", "aten::remainder": "cpu", "aten::eq": "cpu",
                                        "aten::sum": "cpu"})
        self.assertNotIn("aten::_local_scalar_dense", [op["name"] for op in trace["ops"]],
                         "tolist() reads the copy, not each element")
        self.assertNotIn("host_tensor_with_gpu", [w["kind"] for w in trace["warnings"]])
        waits = [op for op in trace["ops"] if op["name"] == "wavecast::synchronize"]
        self.assertEqual([(op["loc"]["line"], op["inputs"]) for op in waits], [(line + 4, [])])

    def test_a_batch_read_on_the_host_then_moved_is_a_gpu_tensor(self):
        # torchtitan counts the valid labels on the CPU, then moves them: the shape-only copy
        # of the batch made for the count is the GPU tensor's after the move, too.
        path = self.write(REAL_SAMPLES + textwrap.dedent("""
            import torch.nn as nn

            loader = DataLoader(Samples(), batch_size=16)
            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                valid = (y != -100).sum()
                x, y = x.to("cuda"), y.to("cuda")
                nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
            """))
        trace = run_trace(path)
        self.assertNotIn("host_tensor_with_gpu", [w["kind"] for w in trace["warnings"]], trace["warnings"])
        loss = next(op for op in trace["ops"] if op["name"] == "aten::nll_loss_forward")
        self.assertIsNone(loss.get("device"))

    def test_a_host_tensor_moved_on_every_pass_is_copied_on_every_pass(self):
        # Class weights made once on the CPU and moved in the loop: `.cuda()` returns a copy
        # and the CPU tensor stays one, so the recorded pass copies it again.
        path = self.write("""
            import torch
            import torch.nn as nn

            weights = torch.ones(10)
            model = nn.Linear(32, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                out = model(torch.randn(16, 32, device="cuda"))
                labels = torch.randint(0, 10, (16,), device="cuda")
                nn.functional.cross_entropy(out, labels, weight=weights.cuda()).backward()  # moved
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        with open(path) as f:
            line = next(i for i, text in enumerate(f, 1) if "# moved" in text)
        copies = [op for op in trace["ops"] if op["name"] == "wavecast::host_to_device"]
        self.assertEqual([(op["loc"]["line"], op["args"]["bytes"]) for op in copies], [(line, 40)])
        self.assertNotIn("host_tensor_with_gpu", [w["kind"] for w in trace["warnings"]])

    def test_a_batch_that_is_a_mapping_is_counted_and_copied(self):
        # Hugging Face collators return a BatchEncoding, a UserDict rather than a dict, and
        # the model takes it as keywords: `model(**batch)`.
        path = self.write("""
            from collections import UserDict

            import torch
            import torch.nn as nn
            from torch.utils.data import DataLoader, Dataset


            class Encoding(UserDict):
                def to(self, device):
                    return Encoding({key: value.to(device) for key, value in self.data.items()})


            class Texts(Dataset):
                def __len__(self):
                    return 64

                def __getitem__(self, index):
                    return torch.randint(0, 100, (16,)), index % 2


            def collate(items):
                return Encoding({"input_ids": torch.stack([ids for ids, _ in items]),
                                 "labels": torch.tensor([label for _, label in items])})


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embedding = nn.Embedding(100, 32)
                    self.head = nn.Linear(32, 2)

                def forward(self, input_ids, labels):
                    return nn.functional.cross_entropy(self.head(self.embedding(input_ids).mean(1)), labels)


            model = Model().cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            for batch in DataLoader(Texts(), batch_size=8, collate_fn=collate):
                batch = batch.to("cuda")
                model(**batch).backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        self.assertEqual((trace["batch_size"], trace["samples_per_iteration"]), (8, 8))
        copies = [op["args"]["bytes"] for op in trace["ops"] if op["name"] == "wavecast::host_to_device"]
        self.assertEqual(copies, [8 * 16 * 8, 8 * 8])

    def test_a_loaders_own_tensors_made_on_its_samples_device_are_no_copies(self):
        # torchvision's Normalize makes its mean with `torch.as_tensor(mean, device=x.device)`
        # for every sample: on the CPU, where the loader runs; the batch's own copy is the one.
        path = self.write("""
            import torch
            import torch.nn as nn
            from torch.utils.data import DataLoader, Dataset


            class Normalized(Dataset):
                def __len__(self):
                    return 64

                def __getitem__(self, index):
                    x = torch.rand(3, 8, 8)
                    mean = torch.as_tensor([0.5, 0.5, 0.5], device=x.device)
                    return (x - mean[:, None, None]).flatten(), index % 10


            model = nn.Linear(192, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in DataLoader(Normalized(), batch_size=16):
                nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        copies = [op["args"]["bytes"] for op in trace["ops"] if op["name"] == "wavecast::host_to_device"]
        self.assertEqual(copies, [16 * 192 * 4, 16 * 8])
