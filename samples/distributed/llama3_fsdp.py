"""Llama 3 8B pre-training as torchtitan runs it, written for torchrun.

Run it with `torchrun --nproc-per-node 8 samples/distributed/llama3_fsdp.py`; wavecast traces
it as rank 0 (`wavecast predict samples/distributed/llama3_fsdp.py --gpu H100`, `--world-size
64` for 64 ranks). The model is torchtitan's Llama 3 (torchtitan/models/llama3: RMSNorm,
grouped-query attention with rotary embeddings, a SwiGLU MLP, a 128,256-token vocabulary,
8,192-token sequences) and the training is its default 8B job: FSDP2 over every rank with
bf16 parameters and fp32 gradient reduction (MixedPrecisionPolicy), each block resharded
after forward but the last, per-op selective activation checkpointing, fused AdamW and
gradient clipping. One difference: the weights are initialised with plain normal draws. LLAMA3_LAYERS makes a shallower model for quick runs;
LLAMA3_NORM=python uses the RMSNorm torchtitan had in 2024 (Python ops in fp32) instead of
nn.RMSNorm, which torch >= 2.8 runs as one fused kernel.
"""

import functools
import math
import os
from collections import defaultdict

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

# torchtitan's llama3 "8B" ModelArgs.
DIM = 4096
LAYERS = int(os.environ.get("LLAMA3_LAYERS", "32"))
HEADS = 32
KV_HEADS = 8
VOCABULARY = 128256
MULTIPLE_OF = 1024
FFN_DIM_MULTIPLIER = 1.3
NORM_EPS = 1e-5
ROPE_THETA = 500000.0
SEQUENCE = 8192


def feed_forward_width(dim=DIM):
    hidden = int(2 * 4 * dim / 3)
    hidden = int(FFN_DIM_MULTIPLIER * hidden)
    return MULTIPLE_OF * ((hidden + MULTIPLE_OF - 1) // MULTIPLE_OF)  # 14,336 for 8B


def precompute_freqs_cis(head_dim, length):
    """torchtitan's rotary table: one unit complex number per position and frequency."""
    frequencies = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(length), frequencies).float()
    return torch.polar(torch.ones_like(angles), angles)  # complex64


def apply_rotary_emb(xq, xk, freqs_cis):
    # [B, L, H, D] as D/2 complex numbers, rotated in complex64 and cast back.
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis[: xq_.shape[1]].view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class PythonRMSNorm(nn.Module):
    """torchtitan's 2024 RMSNorm (torchtitan/models/norms.py): normalised in fp32, cast back."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.type_as(x) * self.weight


def rms_norm(dim=DIM):
    if os.environ.get("LLAMA3_NORM", "fused") == "python":
        return PythonRMSNorm(dim, NORM_EPS)
    return nn.RMSNorm(dim, eps=NORM_EPS)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = DIM // HEADS
        self.wq = nn.Linear(DIM, HEADS * self.head_dim, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.wo = nn.Linear(HEADS * self.head_dim, DIM, bias=False)

    def forward(self, x, freqs_cis):
        b, length, _ = x.shape
        q = self.wq(x).view(b, length, HEADS, self.head_dim)
        k = self.wk(x).view(b, length, KV_HEADS, self.head_dim)
        v = self.wv(x).view(b, length, KV_HEADS, self.head_dim)
        q, k = apply_rotary_emb(q, k, freqs_cis)
        repeats = HEADS // KV_HEADS  # torchtitan's repeat_kv
        k = k[:, :, :, None, :].expand(b, length, KV_HEADS, repeats, self.head_dim)
        v = v[:, :, :, None, :].expand(b, length, KV_HEADS, repeats, self.head_dim)
        k = k.reshape(b, length, HEADS, self.head_dim)
        v = v.reshape(b, length, HEADS, self.head_dim)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return self.wo(y.transpose(1, 2).contiguous().view(b, length, -1))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        hidden = feed_forward_width()
        self.w1 = nn.Linear(DIM, hidden, bias=False)
        self.w2 = nn.Linear(hidden, DIM, bias=False)
        self.w3 = nn.Linear(DIM, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = rms_norm()
        self.attention = Attention()
        self.ffn_norm = rms_norm()
        self.feed_forward = FeedForward()

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


# torchtitan/models/llama3/infra/parallelize.py, `_save_list`: the outputs per-op selective
# checkpointing keeps (every other mm); the rest of a block is recomputed in backward.
_SAVE = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
    torch.ops.aten.max.default,
}


def _policy(meta, ctx, func, *args, **kwargs):
    key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
    if func == torch.ops.aten.mm.default:
        meta[key] += 1
    save = func in _SAVE and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
    return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE


def _selective_context():
    return create_selective_checkpoint_contexts(functools.partial(_policy, defaultdict(int)))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCABULARY, DIM)
        self.layers = nn.ModuleList(TransformerBlock() for _ in range(LAYERS))
        self.norm = rms_norm()
        self.output = nn.Linear(DIM, VOCABULARY, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(DIM // HEADS, 2 * SEQUENCE))

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.freqs_cis)
        return self.output(self.norm(h))


def init_weights(model):
    std = 0.02
    for name, parameter in model.named_parameters():
        if parameter.dim() == 2:
            # torchtitan scales the output projections by depth.
            scale = std / math.sqrt(2 * LAYERS) if name.endswith(("wo.weight", "w2.weight")) else std
            nn.init.normal_(parameter, std=scale)


def local_device():
    return torch.device("cuda", int(os.environ["LOCAL_RANK"]))


def wavecast_model():
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_device())
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    model = Transformer().to(local_device())
    init_weights(model)
    # As torchtitan does: checkpointing wraps each block first, then FSDP shards the wrapper,
    # so a block is recomputed with its parameters gathered.
    for index, layer in enumerate(model.layers):
        model.layers[index] = checkpoint_wrapper(
            layer, context_fn=_selective_context, preserve_rng_state=False
        )
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for index, layer in enumerate(model.layers):
        # The last block's parameters are gathered again right away for backward.
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=index < LAYERS - 1)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=True)
    return model


def wavecast_input(batch_size=2):
    tokens = torch.randint(0, VOCABULARY, (batch_size, SEQUENCE), device=local_device())
    labels = torch.randint(0, VOCABULARY, (batch_size, SEQUENCE), device=local_device())
    return tokens, labels


def wavecast_iteration(model):
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True
    )

    def iteration(tokens, labels):
        optimizer.zero_grad()
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, foreach=True)
        optimizer.step()

    return iteration


if __name__ == "__main__":
    model = wavecast_model()
    step = wavecast_iteration(model)
    for _ in range(10):
        step(*wavecast_input())
    dist.destroy_process_group()
