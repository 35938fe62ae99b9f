"""A plain PyTorch training script: argparse, a Dataset and DataLoader, autocast and a
GradScaler, a checkpoint and a TensorBoard log per epoch. wavecast traces it as written
(`wavecast predict plain_loop.py --gpu H100 -- --batch-size 64`); plain_loop_providers.py
is the same model with provider functions."""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Net(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(64 * 8 * 8, 256)
        self.fc2 = nn.Linear(256, classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


class RandomImages(Dataset):
    """Images made with numpy, as a dataset that decodes files would hand them over."""

    def __init__(self, size, seed=0):
        rng = np.random.default_rng(seed)
        self.images = rng.standard_normal((size, 3, 32, 32), dtype=np.float32)
        self.labels = rng.integers(0, 10, size)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return torch.from_numpy(self.images[index]), int(self.labels[index])


def train_step(model, images, labels, optimizer, scaler, criterion, device):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        loss = criterion(model(images), labels)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss


def main():
    from torch.utils.tensorboard import SummaryWriter  # here: the provider twin needs no TensorBoard

    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--out", default="runs/plain_loop")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(RandomImages(8 * args.batch_size), batch_size=args.batch_size, shuffle=True,
                        num_workers=4, pin_memory=True)
    model = Net().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    os.makedirs(args.out, exist_ok=True)
    writer = SummaryWriter(args.out)
    for epoch in range(args.epochs):
        for step, (images, labels) in enumerate(loader):
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = train_step(model, images, labels, optimizer, scaler, criterion, device)
            writer.add_scalar("loss", loss.item(), step)
        torch.save(model.state_dict(), os.path.join(args.out, f"epoch{epoch}.pt"))
    writer.close()


if __name__ == "__main__":
    main()
