"""ViT-B/16 (timm) trained for ImageNet classification with AdamW and label smoothing.

Built by name with pretrained=False (no weights downloaded): the full model
(86.6M parameters: 224x224 images in 16x16 patches, 12 blocks, width 768, 12
heads; WAVECAST_VIT_DEPTH changes the depth). timm's attention calls
F.scaled_dot_product_attention.
"""

import os

import timm
import torch
import torch.nn as nn

DEVICE = "cuda"
DEPTH = int(os.environ.get("WAVECAST_VIT_DEPTH", "12"))


def wavecast_model():
    model = timm.create_model(
        "vit_base_patch16_224", pretrained=False, num_classes=1000,
        depth=DEPTH, drop_path_rate=0.1,
    )
    return model.to(DEVICE)


def wavecast_input(batch_size=32):
    images = torch.randn(batch_size, 3, 224, 224, device=DEVICE)
    targets = torch.randint(0, 1000, (batch_size,), device=DEVICE)
    return images, targets


def wavecast_iteration(model):
    model.train()
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)

    def iteration(images, targets):
        outputs = model(images)
        loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return iteration
