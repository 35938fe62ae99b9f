"""Fully sharded data parallelism with FSDP2 (`fully_shard`), written for torchrun.

Run it with `torchrun --nproc-per-node 8 samples/distributed/fsdp2.py`; wavecast traces it
as rank 0 of 8. Each block's parameters are sharded over the ranks: FSDP2 all-gathers
them before the block's forward and again before its backward, and reduce-scatters the
gradients after.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


class Block(nn.Module):
    def __init__(self, dim=256, hidden=1024):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


class Net(nn.Module):
    def __init__(self, features=64, dim=256, depth=2, classes=10):
        super().__init__()
        self.embed = nn.Linear(features, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def local_device():
    return torch.device("cuda", int(os.environ["LOCAL_RANK"]))


def wavecast_model():
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_device())
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    model = Net().to(local_device())
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def wavecast_input(batch_size=32):
    images = torch.randn(batch_size, 64, device=local_device())
    labels = torch.randint(0, 10, (batch_size,), device=local_device())
    return images, labels


def wavecast_iteration(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

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
