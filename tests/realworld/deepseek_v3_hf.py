"""A DeepSeek-V3-style decoder (Hugging Face transformers) trained with AdamW.

Built from a config object (no weights downloaded), with DeepSeek-V3's structure at a small
size: multi-head latent attention (low-rank query and key/value projections, a decoupled
RoPE part), a first dense layer, then mixture-of-experts layers of 16 routed experts
(8 per token, picked within the 2 best of 4 expert groups) beside a shared expert; hidden
1024, 4 layers, vocabulary 32000, 1024-token context. The forward pass under bfloat16
autocast, float32 weights and AdamW state.
"""

import torch
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

SEQ_LEN = 1024
VOCAB = 32000


def config():
    return DeepseekV3Config(
        vocab_size=VOCAB,
        hidden_size=1024,
        intermediate_size=2816,
        moe_intermediate_size=512,
        num_hidden_layers=4,
        first_k_dense_replace=1,
        num_attention_heads=16,
        num_key_value_heads=16,
        n_routed_experts=16,
        n_shared_experts=1,
        num_experts_per_tok=8,
        n_group=4,
        topk_group=2,
        q_lora_rank=384,
        kv_lora_rank=256,
        qk_rope_head_dim=32,
        qk_nope_head_dim=64,
        v_head_dim=64,
        max_position_embeddings=SEQ_LEN,
        attn_implementation="sdpa",
    )


def wavecast_model():
    return DeepseekV3ForCausalLM(config()).cuda()


def wavecast_input(batch_size=2):
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
