"""A training script in the style of timm's train.py: create_model, create_optimizer_v2,
a cosine schedule stepped per update, Mixup, NativeScaler (autocast + GradScaler), a model
EMA and a CheckpointSaver. wavecast traces it as written; timm_style_providers.py is the
same model and step with provider functions."""

import argparse
import time

import torch
import torch.nn as nn
import torchvision.transforms as T
from timm import create_model
from timm.data import Mixup
from timm.loss import SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler
from timm.utils import AverageMeter, CheckpointSaver, ModelEmaV3, NativeScaler
from torchvision.datasets import FakeData


def parse_args():
    parser = argparse.ArgumentParser(description="timm-style training")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-size", "-b", type=int, default=32)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--opt", default="sgd")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--output", default="output/train")
    return parser.parse_args()


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, loss_scaler, mixup, ema, scheduler, device):
    losses = AverageMeter()
    model.train()
    updates = epoch * len(loader)
    for batch_idx, (images, target) in enumerate(loader):
        started = time.time()
        images, target = images.to(device), target.to(device)
        images, target = mixup(images, target)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(images), target)
        optimizer.zero_grad()
        loss_scaler(loss, optimizer, clip_grad=None, parameters=model.parameters())
        ema.update(model, step=updates)
        updates += 1
        scheduler.step_update(num_updates=updates)
        losses.update(loss.item(), images.size(0))
        torch.cuda.synchronize()
        print(f"epoch {epoch} step {batch_idx} loss {losses.avg:.3f} {time.time() - started:.3f}s")


def main():
    args = parse_args()
    device = torch.device("cuda")
    model = create_model(args.model, num_classes=10).to(device)
    model = model.to(memory_format=torch.channels_last)
    optimizer = create_optimizer_v2(model, opt=args.opt, lr=args.lr, weight_decay=5e-5, momentum=0.9)
    loss_scaler = NativeScaler()
    ema = ModelEmaV3(model, decay=0.9998)
    transform = T.Compose([T.RandomResizedCrop(args.img_size), T.RandomHorizontalFlip(), T.ToTensor()])
    dataset = FakeData(size=8 * args.batch_size, image_size=(3, args.img_size, args.img_size), num_classes=10,
                       transform=transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=8,
                                         pin_memory=True, drop_last=True)
    mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=0.0, label_smoothing=0.1, num_classes=10)
    scheduler = CosineLRScheduler(optimizer, t_initial=args.epochs * len(loader), warmup_t=5)
    saver = CheckpointSaver(model, optimizer, args=args, model_ema=ema, amp_scaler=loss_scaler,
                            checkpoint_dir=args.output, recovery_dir=args.output)
    loss_fn = SoftTargetCrossEntropy().to(device)
    for epoch in range(args.epochs):
        train_one_epoch(epoch, model, loader, optimizer, loss_fn, loss_scaler, mixup, ema, scheduler, device)
        saver.save_checkpoint(epoch, metric=0.0)


if __name__ == "__main__":
    main()
