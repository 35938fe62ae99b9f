"""The model a new worker of the daemon traces once while it waits for its first request.

A process's first trace pays torch's first-use costs: importing torch._dynamo (which
FakeTensorMode's dispatch needs; 2 s here), registering meta kernels and building the
dispatch caches of common ops. A worker starts before the first save (Profiler::prestart),
so paying them then takes them out of the first save's wait. One small layer of each
common kind, forward, backward and an AdamW step, under bf16 autocast and in fp32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm2d = nn.BatchNorm2d(8)
        self.embed = nn.Embedding(16, 8)
        self.norm = nn.LayerNorm(8)
        self.linear = nn.Linear(8, 16)

    def forward(self, images, ids):
        x = F.max_pool2d(F.relu(self.norm2d(self.conv(images))), 2).mean((2, 3))
        tokens = self.norm(self.embed(ids) + x[:, None])
        q = tokens.view(tokens.shape[0], 2, tokens.shape[1], 4)
        attended = F.scaled_dot_product_attention(q, q, q, is_causal=True).reshape(tokens.shape)
        return F.dropout(F.gelu(self.linear(attended)), 0.1)


def wavecast_model():
    return _Block()


def wavecast_input(batch_size=2):
    return torch.randn(batch_size, 3, 8, 8), torch.randint(0, 16, (batch_size, 4))


def wavecast_iteration(model):
    optimizer = torch.optim.AdamW(model.parameters())

    def iteration(images, ids):
        optimizer.zero_grad()
        for precision in (torch.bfloat16, torch.float32):
            with torch.autocast("cuda", dtype=precision, enabled=precision != torch.float32):
                logits = model(images, ids)
                loss = F.cross_entropy(logits.flatten(0, 1), ids.flatten())
            loss.backward()
        optimizer.step()

    return iteration
