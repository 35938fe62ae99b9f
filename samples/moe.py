"""A small mixture-of-experts Transformer language model, trained with AdamW.

Each block's feed-forward is 8 experts, 2 of which a router picks for each token (as
Mixtral's reference implementation writes it: a loop over the experts, each taking the
tokens routed to it). Which tokens an expert gets depends on the router's values, which
shape-only tracing does not compute: wavecast spreads them evenly over the experts, as
a load-balancing loss aims for, and says so at the line where the shapes depend on them.

Profile it with `wavecast predict samples/moe.py --gpu H100,A100`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 8192
SEQ_LEN = 256
D_MODEL = 512
EXPERTS = 8
TOP_K = 2


class Experts(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(D_MODEL, EXPERTS, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL))
            for _ in range(EXPERTS))

    def forward(self, x):
        tokens = x.reshape(-1, D_MODEL)
        weights, chosen = F.softmax(self.router(tokens), dim=-1).topk(TOP_K, dim=-1)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            out.index_add_(0, token, weights[token, slot, None] * expert(tokens[token]))
        return out.reshape(x.shape)


class Block(nn.Module):
    def __init__(self, heads=8):
        super().__init__()
        self.norm1 = nn.LayerNorm(D_MODEL)
        self.attention = nn.MultiheadAttention(D_MODEL, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(D_MODEL)
        self.moe = Experts()

    def forward(self, x, mask):
        h = self.norm1(x)
        x = x + self.attention(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.moe(self.norm2(x))


class MoeLanguageModel(nn.Module):
    def __init__(self, layers=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.position = nn.Parameter(torch.zeros(1, SEQ_LEN, D_MODEL))
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        self.norm = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, tokens):
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.position
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


def wavecast_model():
    return MoeLanguageModel()


def wavecast_input(batch_size=16):
    tokens = torch.randint(0, VOCAB, (batch_size, SEQ_LEN + 1))
    return tokens[:, :-1], tokens[:, 1:]


def wavecast_iteration(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def iteration(tokens, targets):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(tokens).reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        optimizer.step()

    return iteration


if __name__ == "__main__":
    net = wavecast_model()
    step = wavecast_iteration(net)
    step(*wavecast_input(batch_size=2))
    print("one training iteration done")
