"""A GNMT-style translation model: stacked LSTM encoder (first layer
bidirectional), LSTM decoder with additive attention, Adam.

One of the five models of the Habitat paper (scaled: 4 encoder and 4
decoder layers of 1024 units, as in the MLPerf GNMT reference).
"""

import torch
import torch.nn as nn

VOCAB = 32000
SEQ_LEN = 50
HIDDEN = 1024


class Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.query = nn.Linear(hidden, hidden, bias=False)
        self.key = nn.Linear(hidden, hidden, bias=False)
        self.score = nn.Linear(hidden, 1, bias=False)

    def forward(self, decoder_states, encoder_states):
        energy = torch.tanh(self.query(decoder_states).unsqueeze(2) + self.key(encoder_states).unsqueeze(1))
        weights = torch.softmax(self.score(energy).squeeze(-1), dim=-1)
        return torch.bmm(weights, encoder_states)


class GNMT(nn.Module):
    def __init__(self, layers=4, dropout=0.2):
        super().__init__()
        self.embed_source = nn.Embedding(VOCAB, HIDDEN)
        self.embed_target = nn.Embedding(VOCAB, HIDDEN)
        self.encoder_bidirectional = nn.LSTM(HIDDEN, HIDDEN // 2, batch_first=True, bidirectional=True)
        self.encoder = nn.LSTM(HIDDEN, HIDDEN, num_layers=layers - 1, batch_first=True, dropout=dropout)
        self.decoder_first = nn.LSTM(HIDDEN, HIDDEN, batch_first=True)
        self.attention = Attention(HIDDEN)
        self.decoder = nn.LSTM(2 * HIDDEN, HIDDEN, num_layers=layers - 1, batch_first=True, dropout=dropout)
        self.classifier = nn.Linear(HIDDEN, VOCAB)

    def forward(self, source, target):
        encoded, _ = self.encoder_bidirectional(self.embed_source(source))
        encoded, _ = self.encoder(encoded)
        decoded, _ = self.decoder_first(self.embed_target(target))
        context = self.attention(decoded, encoded)
        decoded, _ = self.decoder(torch.cat([decoded, context], dim=-1))
        return self.classifier(decoded)


def wavecast_model():
    return GNMT()


def wavecast_input(batch_size=64):
    source = torch.randint(0, VOCAB, (batch_size, SEQ_LEN))
    target = torch.randint(0, VOCAB, (batch_size, SEQ_LEN))
    return source, target


def wavecast_iteration(model):
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
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
