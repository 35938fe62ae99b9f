"""A GPT-2-style decoder-only language model trained with AdamW.

Sizes follow the GPT-2 paper; pick one with WAVECAST_GPT2_SIZE
(small | medium | large | xl, default small). GPT-2 large is 36 layers,
d_model 1280, 20 heads, 1024-token context.
"""

import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "small": dict(layers=12, d_model=768, heads=12),
    "medium": dict(layers=24, d_model=1024, heads=16),
    "large": dict(layers=36, d_model=1280, heads=20),
    "xl": dict(layers=48, d_model=1600, heads=25),
}
VOCAB = 50257
CONTEXT = 1024


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        batch, seq, d_model = x.shape
        q, k, v = self.qkv(x).split(d_model, dim=2)
        q = q.view(batch, seq, self.heads, -1).transpose(1, 2)
        k = k.view(batch, seq, self.heads, -1).transpose(1, 2)
        v = v.view(batch, seq, self.heads, -1).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~self.mask[:seq, :seq], float("-inf"))
        attention = F.dropout(F.softmax(scores, dim=-1), 0.1, self.training)
        out = (attention @ v).transpose(1, 2).reshape(batch, seq, d_model)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attention = CausalSelfAttention(d_model, heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    def __init__(self, layers, d_model, heads):
        super().__init__()
        self.token = nn.Embedding(VOCAB, d_model)
        self.position = nn.Embedding(CONTEXT, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB, bias=False)
        self.head.weight = self.token.weight  # tied, as in GPT-2

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.token(tokens) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def wavecast_model():
    return GPT2(**CONFIGS[os.environ.get("WAVECAST_GPT2_SIZE", "small")])


def wavecast_input(batch_size=8):
    tokens = torch.randint(0, VOCAB, (batch_size, CONTEXT))
    return (tokens,)


def wavecast_iteration(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def iteration(tokens):
        optimizer.zero_grad()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()

    return iteration


if __name__ == "__main__":
    net = GPT2(layers=2, d_model=128, heads=4)
    step = wavecast_iteration(net)
    step(*wavecast_input(batch_size=2))
    print("one training iteration done")
