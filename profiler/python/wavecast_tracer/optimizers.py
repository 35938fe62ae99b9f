"""Optimizers pick the implementation CUDA would run.

torch 2.x steps with the multi-tensor (`_foreach_*`) kernels when every
parameter is a plain CUDA tensor, and with `_fused_adam(w)_` when asked
(`fused=True`) (torch/optim/optimizer.py, `_default_to_fused_or_foreach`).
The tracer's parameters are (fake) CPU tensors, so torch would take the
per-parameter loop; here the default is answered as on a GPU. A script's own
`foreach=` / `fused=` is honoured: torch only asks when both are None.
torch 1.13 has no such default (its optimizers loop per parameter unless told
`foreach=True`), so nothing changes there.
"""

import contextlib
import sys

import torch


def _as_on_cuda(params, differentiable, use_fused=False):
    if torch.jit.is_scripting() or differentiable:
        return False, False
    fused = bool(use_fused) and all(p is None or torch.is_floating_point(p) for p in params)
    return fused, not fused


@contextlib.contextmanager
def cuda_optimizer_defaults():
    """While active, torch.optim's foreach/fused default is CUDA's."""
    name = "_default_to_fused_or_foreach"
    modules = [m for key, m in list(sys.modules.items())
               if key.startswith("torch.optim") and m is not None and hasattr(m, name)]
    saved = [(m, getattr(m, name)) for m in modules]
    for module in modules:
        setattr(module, name, _as_on_cuda)
    try:
        yield
    finally:
        for module, original in saved:
            setattr(module, name, original)
