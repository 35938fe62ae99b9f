"""hf_trainer.py's model and training step with provider functions (the step the
Trainer runs with bf16=True: autocast, backward, gradient clipping at 1.0, fused AdamW,
the learning-rate schedule, zero_grad)."""

import torch

from hf_trainer import small_gpt2


def wavecast_model():
    return small_gpt2().cuda()


def wavecast_input(batch_size=8):
    ids = torch.randint(0, 1000, (batch_size, 64)).cuda()
    return ids, ids


def wavecast_iteration(model):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.0, total_iters=48)

    def iteration(input_ids, labels):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        model.zero_grad()

    return iteration
