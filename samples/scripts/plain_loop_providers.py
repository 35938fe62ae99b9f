"""plain_loop.py's model and step with provider functions: the reference its trace as
written is compared with (tests/python/scripts_test_as_written.py)."""

import torch
import torch.nn as nn

from plain_loop import Net, train_step


def wavecast_model():
    return Net().cuda()


def wavecast_input(batch_size=64):
    return torch.randn(batch_size, 3, 32, 32).cuda(), torch.randint(0, 10, (batch_size,)).cuda()


def wavecast_iteration(model):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")

    def iteration(images, labels):
        train_step(model, images, labels, optimizer, scaler, criterion, None)

    return iteration
