"""lightning_module.py's model and step with provider functions (float16 autocast with a
GradScaler, Adam), as Lightning's "16-mixed" precision runs it."""

import torch
import torch.nn as nn

from lightning_module import Classifier


def wavecast_model():
    return Classifier().cuda()


def wavecast_input(batch_size=32):
    return torch.randn(batch_size, 32, 64).cuda(), torch.randint(0, 4, (batch_size,)).cuda()


def wavecast_iteration(model):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")

    def iteration(x, y):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()

    return iteration
