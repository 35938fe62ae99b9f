"""torch.compile while tracing: the eager graph is traced, with a warning.

TorchDynamo would trace the module itself (with fake tensors of its own) and
Inductor would fuse its ops into generated kernels that have no op-level
record. The tracer keeps the eager modules and functions instead, so the trace
holds every op the compiled code computes, unfused.
"""

import contextlib
import functools

import torch


def _eager(on_compile):
    def compile(model=None, **_options):
        on_compile()
        if model is None:  # @torch.compile(mode=...) used as a decorator factory
            return lambda fn: fn
        return model

    return compile


@contextlib.contextmanager
def eager_compile(on_compile):
    """While active, torch.compile(...) and Module.compile() call on_compile() and change nothing."""
    original = getattr(torch, "compile", None)
    module_compile = getattr(torch.nn.Module, "compile", None)
    if original is None:  # torch 1.13
        yield
        return
    torch.compile = functools.wraps(original)(_eager(on_compile))
    if module_compile is not None:
        torch.nn.Module.compile = lambda self, *args, **kwargs: on_compile()
    try:
        yield
    finally:
        torch.compile = original
        if module_compile is not None:
            torch.nn.Module.compile = module_compile
