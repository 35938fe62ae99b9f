"""BERT (Hugging Face transformers) pre-trained with masked language modelling and AdamW.

Built from a config object (no weights downloaded): BERT-base (12 layers, width
768, 12 heads, feed-forward 3072, vocabulary 30522) on 512-token sequences.
WAVECAST_BERT_LAYERS changes the depth. 15% of the tokens are chosen for the
loss, the others get -100.
"""

import os

import torch
from transformers import BertConfig, BertForMaskedLM

SEQ_LEN = 512
DEVICE = "cuda"


def config():
    return BertConfig(
        vocab_size=30522,
        hidden_size=768,
        num_hidden_layers=int(os.environ.get("WAVECAST_BERT_LAYERS", "12")),
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
        attn_implementation="sdpa",
    )


def wavecast_model():
    return BertForMaskedLM(config()).cuda()


def wavecast_input(batch_size=16):
    input_ids = torch.randint(0, 30522, (batch_size, SEQ_LEN), device=DEVICE)
    attention_mask = torch.ones(batch_size, SEQ_LEN, dtype=torch.long, device=DEVICE)
    chosen = torch.rand(batch_size, SEQ_LEN, device=DEVICE) < 0.15
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    return input_ids, attention_mask, labels


def wavecast_iteration(model):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

    def iteration(input_ids, attention_mask, labels):
        optimizer.zero_grad()
        outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        outputs.loss.backward()
        optimizer.step()

    return iteration
