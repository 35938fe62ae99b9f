"""samples/distributed/llama3_fsdp.py's model and training step on one GPU, as a script
written without torch.distributed: the step under bf16 autocast instead of FSDP2's mixed
precision, no sharding, no checkpointing. bench/parallel/two_ways.py predicts it under what-if flags
(--fsdp --param-dtype bf16 --reduce-dtype fp32 --recompute-ops) beside the FSDP2 script
traced as one rank. LLAMA3_LAYERS and LLAMA3_NORM apply as in the sample."""

import importlib.util
import os

import torch

_SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples",
                       "distributed", "llama3_fsdp.py")
_spec = importlib.util.spec_from_file_location("llama3_fsdp", _SAMPLE)
llama3 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llama3)


def wavecast_model():
    model = llama3.Transformer().cuda()
    llama3.init_weights(model)
    return model


def wavecast_input(batch_size=2):
    tokens = torch.randint(0, llama3.VOCABULARY, (batch_size, llama3.SEQUENCE), device="cuda")
    labels = torch.randint(0, llama3.VOCABULARY, (batch_size, llama3.SEQUENCE), device="cuda")
    return tokens, labels


def wavecast_iteration(model):
    step = llama3.wavecast_iteration(model)

    def iteration(tokens, labels):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            step(tokens, labels)

    return iteration
