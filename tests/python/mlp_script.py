"""A small MLP script with providers, traced with a given optimizer (and model change), for
tests of the optimizer step and of torch.compile."""

import textwrap

from source_lines import script_file
from wavecast_tracer.tracer import run_trace

# Linear(32, 64) -> ReLU -> Linear(64, 10): 4 parameters, 2762 floats.
MLP = """
import torch
import torch.nn as nn


def wavecast_model():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()
    {model}
    return model


def wavecast_input(batch_size=16):
    return (torch.randn(batch_size, 32, device="cuda"),)


def wavecast_iteration(model):
    optimizer = {optimizer}

    def iteration(x):
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()

    return iteration
"""
PARAMETERS = 64 * 32 + 64 + 10 * 64 + 10


def trace_mlp(optimizer, model=""):
    with script_file(textwrap.dedent(MLP).format(optimizer=optimizer, model=model), "mlp.py") as path:
        return run_trace(path, batch_size=16)
