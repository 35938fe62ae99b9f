"""A Hugging Face Accelerate training loop: the Accelerator prepares the model, optimizer
and DataLoader, and steps with mixed precision. wavecast traces it as written;
accelerate_loop_providers.py is the same model and step with provider functions."""

import argparse

import torch
import torch.nn as nn
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def mlp(width=512, depth=4, classes=10):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    accelerator = Accelerator(mixed_precision="bf16", log_with="wandb")
    accelerator.init_trackers("accelerate_loop")
    data = TensorDataset(torch.randn(32 * args.batch_size, 512), torch.randint(0, 10, (32 * args.batch_size,)))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=2)
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(5):
        for features, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), labels)
            accelerator.backward(loss)
            optimizer.step()
            accelerator.log({"loss": loss.item()})
        accelerator.save_state("checkpoints")
    accelerator.end_training()


if __name__ == "__main__":
    main()
