"""The Transformer (base) for translation: 6+6 layers, d_model 512, Adam.

One of the five models of the Habitat paper. Source and target are token
sequences of SEQ_LEN tokens over a shared vocabulary.
"""

import math

import torch
import torch.nn as nn

VOCAB = 32000
SEQ_LEN = 50
D_MODEL = 512


class TranslationTransformer(nn.Module):
    def __init__(self, layers=6, heads=8, feedforward=2048, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.transformer = nn.Transformer(
            D_MODEL, heads, layers, layers, feedforward, dropout, batch_first=True
        )
        self.generator = nn.Linear(D_MODEL, VOCAB)
        self.register_buffer("positions", self._sinusoids(SEQ_LEN), persistent=False)

    @staticmethod
    def _sinusoids(length):
        position = torch.arange(length).unsqueeze(1)
        scale = torch.exp(torch.arange(0, D_MODEL, 2) * (-math.log(10000.0) / D_MODEL))
        table = torch.zeros(length, D_MODEL)
        table[:, 0::2] = torch.sin(position * scale)
        table[:, 1::2] = torch.cos(position * scale)
        return table

    def forward(self, source, target):
        src = self.embed(source) * math.sqrt(D_MODEL) + self.positions
        tgt = self.embed(target) * math.sqrt(D_MODEL) + self.positions
        causal = self.transformer.generate_square_subsequent_mask(target.shape[1]).to(target.device)
        out = self.transformer(src, tgt, tgt_mask=causal)
        return self.generator(out)


def wavecast_model():
    return TranslationTransformer()


def wavecast_input(batch_size=64):
    source = torch.randint(0, VOCAB, (batch_size, SEQ_LEN))
    target = torch.randint(0, VOCAB, (batch_size, SEQ_LEN))
    return source, target


def wavecast_iteration(model):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss()

    def iteration(source, target):
        optimizer.zero_grad()
        logits = model(source, target)
        loss = loss_fn(logits.reshape(-1, VOCAB), target.reshape(-1))
        loss.backward()
        optimizer.step()

    return iteration


if __name__ == "__main__":
    net = wavecast_model()
    step = wavecast_iteration(net)
    step(*wavecast_input(batch_size=2))
    print("one training iteration done")
