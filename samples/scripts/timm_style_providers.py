"""timm_style.py's model and update with provider functions: Mixup, float16 autocast,
NativeScaler, SGD with momentum, the EMA update and the per-update schedule step."""

import torch
from timm import create_model
from timm.data import Mixup
from timm.loss import SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler
from timm.utils import ModelEmaV3, NativeScaler


def wavecast_model():
    return create_model("resnet18", num_classes=10).cuda().to(memory_format=torch.channels_last)


def wavecast_input(batch_size=32):
    return torch.randn(batch_size, 3, 64, 64).cuda(), torch.randint(0, 10, (batch_size,)).cuda()


def wavecast_iteration(model):
    optimizer = create_optimizer_v2(model, opt="sgd", lr=0.1, weight_decay=5e-5, momentum=0.9)
    loss_scaler = NativeScaler()
    ema = ModelEmaV3(model, decay=0.9998)
    mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=0.0, label_smoothing=0.1, num_classes=10)
    scheduler = CosineLRScheduler(optimizer, t_initial=800, warmup_t=5)
    loss_fn = SoftTargetCrossEntropy()
    updates = [0]

    def iteration(images, target):
        images, target = mixup(images, target)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(images), target)
        optimizer.zero_grad()
        loss_scaler(loss, optimizer, clip_grad=None, parameters=model.parameters())
        ema.update(model, step=updates[0])
        updates[0] += 1
        scheduler.step_update(num_updates=updates[0])

    return iteration
