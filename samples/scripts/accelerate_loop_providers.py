"""accelerate_loop.py's model and step with provider functions (bf16 autocast, AdamW)."""

import torch
import torch.nn as nn

from accelerate_loop import mlp


def wavecast_model():
    return mlp().cuda()


def wavecast_input(batch_size=64):
    return torch.randn(batch_size, 512).cuda(), torch.randint(0, 10, (batch_size,)).cuda()


def wavecast_iteration(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()

    def iteration(features, labels):
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(features), labels)
        loss.backward()
        optimizer.step()

    return iteration
