"""A small Transformer encoder classifying token sequences, trained with Adam.

Profile it with `wavecast predict samples/small_transformer.py --gpu H100,A100,T4`.
"""

import torch
import torch.nn as nn

VOCAB = 1000
SEQ_LEN = 64
D_MODEL = 128
NUM_CLASSES = 4


class SmallTransformer(nn.Module):
    def __init__(self, layers=2, heads=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.position = nn.Parameter(torch.zeros(1, SEQ_LEN, D_MODEL))
        layer = nn.TransformerEncoderLayer(D_MODEL, heads, dim_feedforward=4 * D_MODEL, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(D_MODEL, NUM_CLASSES)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position
        x = self.encoder(x)
        return self.head(x.mean(dim=1))


def wavecast_model():
    return SmallTransformer()


def wavecast_input(batch_size=32):
    tokens = torch.randint(0, VOCAB, (batch_size, SEQ_LEN))
    labels = torch.randint(0, NUM_CLASSES, (batch_size,))
    return tokens, labels


def wavecast_iteration(model):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def iteration(tokens, labels):
        optimizer.zero_grad()
        loss = loss_fn(model(tokens), labels)
        loss.backward()
        optimizer.step()

    return iteration


if __name__ == "__main__":
    net = wavecast_model()
    step = wavecast_iteration(net)
    step(*wavecast_input(batch_size=4))
    print("one training iteration done")
