"""A Llama-style decoder (Hugging Face transformers) trained for next-token prediction with AdamW.

Built from a config object (no weights downloaded) with TinyLlama-1.1B's shapes:
hidden 2048, 32 query heads sharing 4 key/value heads (grouped-query attention),
SwiGLU feed-forward 5632, vocabulary 32000, RoPE, RMSNorm, 22 layers, 2048-token
context (WAVECAST_LLAMA_LAYERS changes the depth). Mixed precision as such models
are trained: float32 weights and AdamW state, the forward pass under bfloat16
autocast (so attention can run as flash attention). The loss is computed in the
script, shifted by one token.
"""

import os

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

SEQ_LEN = 2048
VOCAB = 32000
DEVICE = torch.device("cuda")


def config():
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=int(os.environ.get("WAVECAST_LLAMA_LAYERS", "22")),
        num_attention_heads=32,
        num_key_value_heads=4,
        max_position_embeddings=SEQ_LEN,
        attn_implementation="sdpa",
    )


def wavecast_model():
    return LlamaForCausalLM(config()).to(DEVICE)


def wavecast_input(batch_size=4):
    tokens = torch.randint(0, VOCAB, (batch_size, SEQ_LEN + 1), device=DEVICE)
    return (tokens,)


def wavecast_iteration(model):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)

    def iteration(tokens):
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            logits = model(input_ids=inputs).logits
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return iteration
