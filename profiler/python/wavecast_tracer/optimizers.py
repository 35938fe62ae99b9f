"""Optimizers and gradient clipping pick the implementation CUDA would run.

torch 2.x steps with the multi-tensor (`_foreach_*`) kernels when every
parameter is a plain CUDA tensor, and with `_fused_adam(w)_` when asked
(`fused=True`) (torch/optim/optimizer.py, `_default_to_fused_or_foreach`);
`clip_grad_norm_` takes the norms with `_foreach_norm` and scales with
`_foreach_mul_` when every gradient is a plain tensor
(torch/utils/_foreach_utils.py, `_has_foreach_support`), and AveragedModel
averages with `_foreach_*` ops on devices with those kernels. The tracer's
parameters are (fake) CPU tensors, so torch would take the per-parameter loop;
here the defaults are answered as on a GPU. A script's own `foreach=` /
`fused=` is honoured: torch only asks when they are None. torch 1.13 has no
such defaults (its optimizers and clipping loop per parameter unless told
`foreach=True`), so nothing changes there.

A training run spends its iterations in the steady state: Adam's moments and
SGD's momentum buffers already exist. The first `step()` of a fresh optimizer
builds them instead (one `zeros_like` or `clone` per parameter, hundreds of
ops that never run again), so the traced step is preceded by one unrecorded
step that builds the state (`steady_state_steps`; torch >= 2.0, which has
optimizer step hooks). A worker that keeps the model between traces keeps that
state too (reuse.OptimizerStates): the next trace's optimizer adopts it instead
of building it again.
"""

import contextlib
import importlib
import sys
from typing import List, Optional, Tuple

import torch


# Each answer has its torch function's signature, and under TorchScript its scripted answer:
# torch.distributed.optim scripts functional optimizers that call them when it is imported
# (the branch TorchScript does not compile calls the Python one).
def _as_on_cuda(params: List[torch.Tensor], differentiable: bool, use_fused: bool = False) -> Tuple[bool, bool]:
    if torch.jit.is_scripting():
        return False, False
    else:
        return _as_on_cuda_in_python(params, differentiable, use_fused)


def _as_on_cuda_in_python(params, differentiable, use_fused):
    if differentiable:
        return False, False
    fused = bool(use_fused) and all(p is None or torch.is_floating_point(p) for p in params)
    return fused, not fused


def _foreach_supported_as_on_cuda(tensors: List[Optional[torch.Tensor]], device: torch.device) -> bool:
    if torch.jit.is_scripting():
        return False
    else:
        return all(t is None or isinstance(t, torch.Tensor) for t in tensors)


def _foreach_devices_as_on_cuda() -> List[str]:
    return ["cuda", "cpu"]  # the tracer's tensors are (fake) CPU ones


# Torch's functions that choose the multi-tensor kernels: the modules that call them, the
# name they import them under, and what each answers on a GPU.
_CUDA_ANSWERS = (
    (("torch.optim",), "_default_to_fused_or_foreach", _as_on_cuda),
    (("torch.nn.utils",), "_has_foreach_support", _foreach_supported_as_on_cuda),  # clipping
    (("torch.optim.swa_utils",), "_get_foreach_kernels_supported_devices", _foreach_devices_as_on_cuda),
)


@contextlib.contextmanager
def cuda_multi_tensor_defaults():
    """While active, torch.optim's foreach/fused default, gradient clipping's and
    AveragedModel's foreach defaults are CUDA's."""
    saved = []
    for key, module in list(sys.modules.items()):
        if module is None:
            continue
        for prefixes, name, answer in _CUDA_ANSWERS:
            if key.startswith(prefixes) and hasattr(module, name):
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, answer)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


@contextlib.contextmanager
def steady_state_steps(state):
    """While active, the first step() of each optimizer that has no state yet runs once
    unrecorded (state.suppressing()) before the recorded one: the recorded step is the
    one every later iteration runs. The state it builds is the optimizer state the
    trace's memory counts as persistent anyway."""
    try:
        register = importlib.import_module("torch.optim.optimizer").register_optimizer_step_pre_hook
    except (ImportError, AttributeError):
        register = None
    if register is None:  # torch 1.13: the first step is traced as it is
        yield
        return
    warmed = set()
    busy = []

    def pre_hook(optimizer, args, kwargs):
        if busy or id(optimizer) in warmed:
            return None
        warmed.add(id(optimizer))
        if not _builds_state(optimizer):
            return None
        kept = state.kept_optimizer_states
        signature = kept.signature(optimizer) if kept is not None else None
        if signature is not None and kept.adopt(signature, optimizer):
            return None
        unhooked = getattr(type(optimizer).step, "__wrapped__", None)
        if unhooked is None:
            return None
        busy.append(optimizer)
        try:
            # Neither its ops nor its temporaries are the iteration's; the state it builds
            # is memory from before the iteration, as an adopted one is.
            with state.suppressing(), state.untracked_memory():
                unhooked(*args, **kwargs)
        finally:
            busy.pop()
        state.live_before_iteration(state_tensors(optimizer))
        if signature is not None:
            kept.keep(signature, optimizer)
        return None

    handle = register(pre_hook)
    try:
        yield
    finally:
        handle.remove()


def state_tensors(optimizer):
    """The tensors of an optimizer's per-parameter state."""
    for per_param in optimizer.state.values():
        for value in per_param.values():
            if isinstance(value, torch.Tensor):
                yield value


def _builds_state(optimizer):
    """Whether this step would create per-parameter state: a parameter with a gradient
    and no state yet."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None and not optimizer.state.get(p):
                return True
    return False
