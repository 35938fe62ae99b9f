"""ConvNeXt-Tiny (timm) trained for ImageNet classification with AdamW, in channels_last.

Built by name with pretrained=False (no weights downloaded): the full model
(depths 3-3-9-3, widths 96-768) on 224x224 images, moved to the GPU in the
channels_last memory format as timm's train.py --channels-last does.
"""

import timm
import torch
import torch.nn as nn

DEVICE = "cuda"


def wavecast_model():
    model = timm.create_model("convnext_tiny", pretrained=False, num_classes=1000, drop_path_rate=0.1)
    return model.to(device=DEVICE, memory_format=torch.channels_last)


def wavecast_input(batch_size=32):
    images = torch.randn(batch_size, 3, 224, 224, device=DEVICE).contiguous(memory_format=torch.channels_last)
    targets = torch.randint(0, 1000, (batch_size,), device=DEVICE)
    return images, targets


def wavecast_iteration(model):
    model.train()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.05)

    def iteration(images, targets):
        optimizer.zero_grad(set_to_none=True)
        outputs = model(images)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()

    return iteration
