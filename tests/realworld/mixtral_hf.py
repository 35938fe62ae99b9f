"""A Mixtral-style mixture-of-experts decoder (Hugging Face transformers) trained with AdamW.

Built from a config object (no weights downloaded): hidden 1024, 16 query heads sharing 4
key/value heads, 8 SwiGLU experts of 2048 per layer with 2 picked per token by a router,
vocabulary 32000, 4 layers, 1024-token context. Mixed precision as such models are
trained: float32 weights and AdamW state, the forward pass under bfloat16 autocast.
transformers runs the experts as grouped GEMMs (torch._grouped_mm), which autocast does
not cast: they get the weights' float32, and CUDA runs them as one mm per expert.
"""

import torch
from transformers import MixtralConfig, MixtralForCausalLM

SEQ_LEN = 1024
VOCAB = 32000


def config():
    return MixtralConfig(
        vocab_size=VOCAB,
        hidden_size=1024,
        intermediate_size=2048,
        num_hidden_layers=4,
        num_attention_heads=16,
        num_key_value_heads=4,
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=SEQ_LEN,
        attn_implementation="sdpa",
    )


def wavecast_model():
    return MixtralForCausalLM(config()).cuda()


def wavecast_input(batch_size=4):
    return (torch.randint(0, VOCAB, (batch_size, SEQ_LEN), device="cuda"),)


def wavecast_iteration(model):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def iteration(input_ids):
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            outputs = model(input_ids=input_ids, labels=input_ids)
        outputs.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return iteration
