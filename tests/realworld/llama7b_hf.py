"""A Llama-2-7B-shaped decoder (Hugging Face transformers) at batch 8 with AdamW.

Built from a config object (no weights downloaded) with Llama-2-7B's shapes:
hidden 4096, 32 layers, 32 heads, SwiGLU feed-forward 11008, vocabulary 32000,
2048-token sequences. In float32 the parameters alone are 27 GB, gradients
another 27 and AdamW's state 54: far more than the machine that traces it has.
Shape tracing computes no values and allocates no real memory, so it traces
anyway and predicts the memory a GPU would need.
"""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

SEQ_LEN = 2048
VOCAB = 32000


def config():
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=4096,
        attn_implementation="sdpa",
    )


def wavecast_model():
    model = LlamaForCausalLM(config())
    return model.cuda()


def wavecast_input(batch_size=8):
    input_ids = torch.randint(0, VOCAB, (batch_size, SEQ_LEN), device="cuda")
    return (input_ids,)


def wavecast_iteration(model):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)

    def iteration(input_ids):
        optimizer.zero_grad(set_to_none=True)
        outputs = model(input_ids=input_ids, labels=input_ids)
        loss = outputs.loss
        loss.backward()
        optimizer.step()

    return iteration
