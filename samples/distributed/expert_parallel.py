"""A mixture of experts spread over the ranks (expert parallelism), written for torchrun.

Run it with `torchrun --nproc-per-node 8 samples/distributed/expert_parallel.py`; wavecast
traces it as rank 0 of 8. Each rank holds 2 of the 16 experts. The router picks 2 experts
per token; as torchtitan's token dispatch does, the ranks first exchange how many tokens
each sends to each expert (an all-to-all of counts, read on the host as split sizes),
then the tokens themselves (an all-to-all), run their experts as grouped GEMMs, and send
the results back (an all-to-all, and two more for the gradients in backward).

Which tokens the router sends where depends on values shape-only tracing does not compute:
wavecast spreads them evenly over the experts and takes every rank to send what this one
sends, so each all-to-all moves as many tokens as a balanced router's.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed._functional_collectives import all_to_all_single, all_to_all_single_autograd

DIM, HIDDEN, EXPERTS, TOP_K = 512, 2048, 16, 2


def local_device():
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


class ExpertParallelMoE(nn.Module):
    def __init__(self, group):
        super().__init__()
        self.group = group
        self.ranks = dist.get_world_size(group)
        self.local = EXPERTS // self.ranks
        self.router = nn.Linear(DIM, EXPERTS, bias=False)
        self.up = nn.Parameter(torch.randn(self.local, DIM, HIDDEN) * DIM ** -0.5)
        self.down = nn.Parameter(torch.randn(self.local, HIDDEN, DIM) * HIDDEN ** -0.5)

    def forward(self, x):
        tokens = x.reshape(-1, DIM)
        weights, chosen = F.softmax(self.router(tokens), dim=-1).topk(TOP_K, dim=-1)
        flat = chosen.reshape(-1)
        order = flat.argsort(stable=True)
        per_expert = torch.histc(flat.float(), bins=EXPERTS, min=0, max=EXPERTS)
        per_expert_here = all_to_all_single(per_expert, None, None, group=self.group)
        send = per_expert.view(self.ranks, -1).sum(dim=1).int().tolist()
        receive = per_expert_here.view(self.ranks, -1).sum(dim=1).int().tolist()
        routed = all_to_all_single_autograd(tokens[order // TOP_K], receive, send, self.group)
        offsets = torch.cumsum(per_expert_here.view(self.ranks, self.local).sum(0), 0).int()
        hidden = F.silu(torch._grouped_mm(routed.bfloat16(), self.up.bfloat16(), offs=offsets))
        out = torch._grouped_mm(hidden, self.down.bfloat16(), offs=offsets).float()
        back = all_to_all_single_autograd(out, send, receive, self.group)
        weighted = back * weights.reshape(-1)[order, None]
        return x + torch.zeros_like(tokens).index_add_(0, order // TOP_K, weighted).reshape(x.shape)


class Net(nn.Module):
    def __init__(self, group, depth=2):
        super().__init__()
        self.blocks = nn.ModuleList(ExpertParallelMoE(group) for _ in range(depth))
        self.head = nn.Linear(DIM, 10)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def wavecast_model():
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_device())
    return Net(dist.group.WORLD).to(local_device())


def wavecast_input(batch_size=8, sequence=256):
    x = torch.randn(batch_size, sequence, DIM, device=local_device())
    return x, torch.randint(0, 10, (batch_size, sequence), device=local_device())


def wavecast_iteration(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def iteration(x, labels):
        loss = F.cross_entropy(model(x).flatten(0, 1), labels.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return iteration
