"""Megatron-style tensor parallelism with DTensor (`parallelize_module`), written for torchrun.

Run it with `torchrun --nproc-per-node 8 samples/distributed/tensor_parallel.py`; wavecast
traces it as rank 0 of 8. In each block the first Linear is split by columns and the
second by rows over the "tp" mesh dimension: the block's output is all-reduced in
forward, and the gradient of its input in backward.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class Block(nn.Module):
    def __init__(self, dim=256, hidden=1024):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


class Net(nn.Module):
    def __init__(self, dim=256, depth=2):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def local_device():
    return torch.device("cuda", int(os.environ["LOCAL_RANK"]))


def wavecast_model():
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_device())
    mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),), mesh_dim_names=("tp",))
    model = Net().to(local_device())
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    return model


def wavecast_input(batch_size=8, sequence=128):
    # Every tensor-parallel rank gets the same batch.
    tokens = torch.randn(batch_size, sequence, 256, device=local_device())
    target = torch.randn(batch_size, sequence, 256, device=local_device())
    return tokens, target


def wavecast_iteration(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def iteration(tokens, target):
        optimizer.zero_grad()
        loss = F.mse_loss(model(tokens), target)
        loss.backward()
        optimizer.step()

    return iteration


if __name__ == "__main__":
    model = wavecast_model()
    step = wavecast_iteration(model)
    for _ in range(10):
        step(*wavecast_input())
    dist.destroy_process_group()
