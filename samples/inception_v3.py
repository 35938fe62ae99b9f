"""Inception v3 (torchvision) on 299x299 images with its auxiliary classifier, SGD.

One of the five models of the Habitat paper.
"""

import torch
import torch.nn as nn
import torchvision


def wavecast_model():
    return torchvision.models.inception_v3(aux_logits=True, init_weights=False)


def wavecast_input(batch_size=32):
    images = torch.randn(batch_size, 3, 299, 299)
    labels = torch.randint(0, 1000, (batch_size,))
    return images, labels


def wavecast_iteration(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.045, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def iteration(images, labels):
        optimizer.zero_grad()
        logits, aux_logits = model(images)
        loss = loss_fn(logits, labels) + 0.4 * loss_fn(aux_logits, labels)
        loss.backward()
        optimizer.step()

    return iteration


if __name__ == "__main__":
    net = wavecast_model()
    step = wavecast_iteration(net)
    step(*wavecast_input(batch_size=2))
    print("one training iteration done")
