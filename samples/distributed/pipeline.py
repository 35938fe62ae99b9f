"""Pipeline parallelism with torch.distributed.pipelining, written for torchrun.

Run it with `torchrun --nproc-per-node 4 samples/distributed/pipeline.py`; wavecast traces
it as rank 0, the first stage. The model's blocks are split evenly over the ranks, and a
GPipe schedule runs 4 microbatches through them: the first stage sends each
microbatch's activations to the next stage and receives their gradients back.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

DEPTH = 8
MICROBATCHES = 4


class Block(nn.Module):
    def __init__(self, dim=256, hidden=1024):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


def local_device():
    return torch.device("cuda", int(os.environ["LOCAL_RANK"]))


def wavecast_model():
    """This rank's stage: its share of the blocks."""
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_device())
    rank, stages = dist.get_rank(), dist.get_world_size()
    per_stage = max(DEPTH // stages, 1)
    return nn.Sequential(*(Block() for _ in range(per_stage))).to(local_device())


def wavecast_input(batch_size=32):
    tokens = torch.randn(batch_size, 256, device=local_device())
    target = torch.randn(batch_size, 256, device=local_device())
    return tokens, target


def wavecast_iteration(model):
    rank, stages = dist.get_rank(), dist.get_world_size()
    stage = PipelineStage(model, rank, stages, local_device())
    schedule = ScheduleGPipe(stage, n_microbatches=MICROBATCHES, loss_fn=F.mse_loss)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def iteration(tokens, target):
        optimizer.zero_grad()
        if rank == 0:
            schedule.step(tokens)
        elif rank == stages - 1:
            schedule.step(target=target)
        else:
            schedule.step()
        optimizer.step()

    return iteration


if __name__ == "__main__":
    model = wavecast_model()
    step = wavecast_iteration(model)
    for _ in range(10):
        step(*wavecast_input())
    dist.destroy_process_group()
