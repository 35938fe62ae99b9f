"""torch.compile while tracing: the eager ops are traced, marked as compiled.

TorchDynamo would trace the module itself (with fake tensors of its own) and Inductor
would fuse its ops into generated kernels that have no op-level record. The tracer keeps
the eager modules and functions instead, so the trace holds every op the compiled code
computes, unfused; each op run inside a compiled module or function carries the compile
mode, and the ops of such an iteration say which op wrote each of their inputs, so the
predictor can fuse them as Inductor does (docs/trace-format.md, `compiled`).
"""

import contextlib
import functools

import torch

# What a compiled module carries: its torch.compile mode. The module hooks of the trace
# running it (TraceState.enter_module) read it, so a model kept from an earlier trace stays
# compiled in the next one.
MODE_ATTRIBUTE = "_wavecast_compile_mode"


# The entry module's attribute listing the (file, line) of each torch.compile its loading
# ran, warned about by every trace of it (a kept module is not loaded again).
COMPILED_AT_LOAD = "__wavecast_compiled_at_load__"


# torch.compile's modes (torch._inductor.list_mode_options).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def what_if(module, mode):
    """The mode a module the iteration calls itself runs in when the trace asks for
    torch.compile as a what-if (`mode`), as after `model = torch.compile(model)`: a loss
    module, which scripts rarely compile, stays eager."""
    if mode is None or isinstance(module, torch.nn.modules.loss._Loss):
        return None
    return mode


def _mode(options):
    """The compile mode of torch.compile(**options), or None when nothing is compiled."""
    if options.get("disable") or options.get("backend", "inductor") != "inductor":
        return None
    return options.get("mode") or "default"


def compile_mode(module):
    """The torch.compile mode `module` was compiled with, else None."""
    return getattr(module, MODE_ATTRIBUTE, None)


class CompiledRegions:
    """Which compiled functions run now (modules are followed by the module hooks)."""

    def __init__(self, on_compile):
        self.on_compile = on_compile
        self.modes = []

    def compile(self, model=None, **options):
        self.on_compile()
        mode = _mode(options)
        if model is None:  # @torch.compile(mode=...) used as a decorator factory
            return lambda target: self._mark(target, mode)
        return self._mark(model, mode)

    def _mark(self, target, mode):
        if mode is None:
            return target
        if isinstance(target, torch.nn.Module):
            setattr(target, MODE_ATTRIBUTE, mode)
            return target
        return self._wrap(target, mode)

    def _wrap(self, fn, mode):
        regions = self

        @functools.wraps(fn)
        def compiled(*args, **kwargs):
            # The regions of the trace running now: a function compiled in an earlier trace
            # of a kept module looks them up through torch.compile.
            current = getattr(torch.compile, "wavecast_regions", regions)
            with current.region(mode):
                return fn(*args, **kwargs)

        return compiled

    @contextlib.contextmanager
    def region(self, mode):
        self.modes.append(mode)
        try:
            yield
        finally:
            self.modes.pop()

    def mode(self):
        """The compile mode of the innermost compiled function running, else None."""
        return self.modes[-1] if self.modes else None


@contextlib.contextmanager
def eager_compile(on_compile):
    """While active, torch.compile(...) and Module.compile() call on_compile(), mark what
    they compile and change nothing else; yields the CompiledRegions."""
    original = getattr(torch, "compile", None)
    module_compile = getattr(torch.nn.Module, "compile", None)
    regions = CompiledRegions(on_compile)
    if original is None:  # torch 1.13
        yield regions
        return
    @functools.wraps(original)
    def compile_function(*args, **kwargs):
        return regions.compile(*args, **kwargs)

    compile_function.wavecast_regions = regions
    torch.compile = compile_function

    def compile_module(module, *args, **kwargs):  # Module.compile(**options) returns None
        regions.compile(module, **kwargs)

    if module_compile is not None:
        torch.nn.Module.compile = compile_module
    try:
        yield regions
    finally:
        torch.compile = original
        if module_compile is not None:
            torch.nn.Module.compile = module_compile
