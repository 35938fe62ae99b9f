"""ResNet-50 (timm) trained for ImageNet classification with AdamW.

Built by name with pretrained=False (no weights downloaded): the full model on
224x224 images.
"""

import timm
import torch
import torch.nn as nn
import torch.nn.functional as F

DEVICE = torch.device("cuda")


def wavecast_model():
    model = timm.create_model("resnet50", pretrained=False, num_classes=1000)
    model.cuda()
    return model


def wavecast_input(batch_size=64):
    images = torch.randn(batch_size, 3, 224, 224).to(DEVICE)
    targets = torch.randint(0, 1000, (batch_size,)).to(DEVICE)
    return images, targets


def wavecast_iteration(model):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def iteration(images, targets):
        optimizer.zero_grad()
        logits = model(images)
        loss = F.cross_entropy(logits, targets)
        loss.backward()
        optimizer.step()

    return iteration
