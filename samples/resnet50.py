"""ResNet-50 (torchvision) on 224x224 ImageNet-sized images, SGD with momentum.

One of the five models of the Habitat paper.
"""

import torch
import torch.nn as nn
import torchvision


def wavecast_model():
    return torchvision.models.resnet50()


def wavecast_input(batch_size=32):
    images = torch.randn(batch_size, 3, 224, 224)
    labels = torch.randint(0, 1000, (batch_size,))
    return images, labels


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()

    def iteration(images, labels):
        optimizer.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()

    return iteration


if __name__ == "__main__":
    net = wavecast_model()
    step = wavecast_iteration(net)
    step(*wavecast_input(batch_size=2))
    print("one training iteration done")
