"""How a script run as written is read (script_runner.py): what torch.cuda answers for
the target GPU, and where the batch size comes from."""

import os
import tempfile
import textwrap
import unittest

from wavecast_tracer.tracer import run_trace

TRAIN = """
import torch
model = torch.nn.Linear(8, 8).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    model(torch.randn(4, 8, device="cuda")).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
"""


class ScriptRunnerTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.directory.cleanup()

    def write(self, text):
        path = os.path.join(self.directory.name, "train.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def test_a_gpu_before_ampere_does_not_support_bf16(self):
        path = self.write(textwrap.dedent("""
            import torch
            assert torch.cuda.get_device_capability() == (7, 5)
            assert not torch.cuda.is_bf16_supported(), "a T4 has no bf16"
            """) + TRAIN)
        device = {"name": "Tesla T4", "memory_bytes": 16 * 2 ** 30, "capability": [7, 5],
                  "multiprocessors": 40}
        self.assertEqual(run_trace(path, device=device)["batch_size"], 4)

    def test_the_batch_size_is_the_batchs_not_a_transforms(self):
        # torchvision's transforms are modules that run on each image, inside the DataLoader.
        path = self.write("""
            import torch
            import torch.nn as nn
            from torch.utils.data import DataLoader, Dataset

            class Scale(nn.Module):
                def forward(self, image):
                    return image * 2

            class Images(Dataset):
                def __init__(self):
                    self.transform = Scale()
                def __len__(self):
                    return 64
                def __getitem__(self, index):
                    return self.transform(torch.randn(3, 8, 8)), index % 10

            model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for images, labels in DataLoader(Images(), batch_size=16, num_workers=2):
                loss = nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        self.assertEqual(trace["batch_size"], 16)
        modules = {op.get("module") for op in trace["ops"] if op["phase"] == "forward"}
        self.assertNotIn("transform", " ".join(m for m in modules if m))


if __name__ == "__main__":
    unittest.main()
