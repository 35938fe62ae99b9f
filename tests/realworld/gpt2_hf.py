"""GPT-2 (Hugging Face transformers) fine-tuned as a causal language model with AdamW.

Built from a config object (no weights downloaded): GPT-2 small (124M parameters:
12 layers, width 768, 12 heads, vocabulary 50257, 1024-token context).
WAVECAST_GPT2_LAYERS changes the depth.
"""

import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel

SEQ_LEN = 1024
DEVICE = "cuda"


def config():
    return GPT2Config(
        n_layer=int(os.environ.get("WAVECAST_GPT2_LAYERS", "12")),
        n_embd=768,
        n_head=12,
        n_positions=1024,
        vocab_size=50257,
        attn_implementation="sdpa",
    )


def wavecast_model():
    model = GPT2LMHeadModel(config())
    return model.to(DEVICE)


def wavecast_input(batch_size=8):
    input_ids = torch.randint(0, 50257, (batch_size, SEQ_LEN), device=DEVICE)
    return (input_ids,)


def wavecast_iteration(model):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def iteration(input_ids):
        outputs = model(input_ids=input_ids, labels=input_ids)
        outputs.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return iteration
