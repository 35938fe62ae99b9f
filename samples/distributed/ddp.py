"""Data-parallel training with DistributedDataParallel, written for torchrun.

Run it with `torchrun --nproc-per-node 8 samples/distributed/ddp.py`; wavecast traces it
as rank 0 of 8 (`wavecast predict samples/distributed/ddp.py --gpu H100`). DDP all-reduces
the gradients in buckets during backward.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class MLP(nn.Module):
    def __init__(self, features=512, width=1024, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(features, width)
        self.fc2 = nn.Linear(width, width)
        self.fc3 = nn.Linear(width, width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        return self.head(x)


def local_device():
    return torch.device("cuda", int(os.environ["LOCAL_RANK"]))


def wavecast_model():
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_device())
    model = MLP().to(local_device())
    return DDP(model, device_ids=[local_device().index])


def wavecast_input(batch_size=32):
    images = torch.randn(batch_size, 512, device=local_device())
    labels = torch.randint(0, 10, (batch_size,), device=local_device())
    return images, labels


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def iteration(images, labels):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()

    return iteration


if __name__ == "__main__":
    model = wavecast_model()
    step = wavecast_iteration(model)
    for _ in range(10):
        step(*wavecast_input())
    dist.destroy_process_group()
