"""A PyTorch Lightning script: a LightningModule, a DataModule-free DataLoader, a Trainer
with mixed precision, a checkpoint callback and the default logger. wavecast traces it as
written; lightning_module_providers.py is the same model and step with provider functions."""

import argparse

import lightning as L
import torch
import torch.nn as nn
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, Dataset


class Sequences(Dataset):
    def __init__(self, size, length=32, features=64):
        self.size, self.length, self.features = size, length, features

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        return torch.randn(self.length, self.features, generator=generator), index % 4


class Classifier(L.LightningModule):
    def __init__(self, features=64, width=256, classes=4, lr=1e-3):
        super().__init__()
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, batch_first=True), num_layers=2)
        self.embed = nn.Linear(features, width)
        self.head = nn.Linear(width, classes)
        self.lr = lr

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    loader = DataLoader(Sequences(16 * args.batch_size), batch_size=args.batch_size, num_workers=4)
    trainer = L.Trainer(max_epochs=3, accelerator="gpu", devices=1, precision="16-mixed",
                        callbacks=[ModelCheckpoint(dirpath="checkpoints", every_n_train_steps=1)])
    trainer.fit(Classifier(), loader)


if __name__ == "__main__":
    main()
