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

# What a compiled module carries: its torch.compile mode, and the (file, line) of the
# torch.compile call. The module hooks of the trace running it (TraceState.enter_module)
# read them, so a model kept from an earlier trace stays compiled in the next one.
MODE_ATTRIBUTE = "_wavecast_compile_mode"
SITE_ATTRIBUTE = "_wavecast_compile_site"


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


def compile_site(module):
    """The (file, line) of the torch.compile that compiled `module`, else None."""
    return getattr(module, SITE_ATTRIBUTE, None)


class CompiledRegions:
    """Which compiled functions run now (modules are followed by the module hooks). `site()`
    is the (file, line) of the script's line running now: a compiled target keeps its
    torch.compile's, warned about when the target runs in the iteration, not where it is
    compiled (a function a library compiles at import and the script never calls)."""

    def __init__(self, site):
        self._site = site
        self._running = []  # (mode, site) of each compiled function running, innermost last

    def compile(self, model=None, **options):
        mode = _mode(options)
        site = self._site()
        if model is None:  # @torch.compile(mode=...) used as a decorator factory
            return lambda target: self._mark(target, mode, site)
        return self._mark(model, mode, site)

    def _mark(self, target, mode, site):
        if mode is None:
            return target
        if isinstance(target, torch.nn.Module):
            setattr(target, MODE_ATTRIBUTE, mode)
            setattr(target, SITE_ATTRIBUTE, site)
            return target
        return self._wrap(target, mode, site)

    def _wrap(self, fn, mode, site):
        regions = self

        @functools.wraps(fn)
        def compiled(*args, **kwargs):
            # The regions of the trace running now: a function compiled in an earlier trace
            # of a kept module looks them up through torch.compile.
            current = getattr(torch.compile, "wavecast_regions", regions)
            with current.region(mode, site):
                return fn(*args, **kwargs)

        return compiled

    @contextlib.contextmanager
    def region(self, mode, site):
        self._running.append((mode, site))
        try:
            yield
        finally:
            self._running.pop()

    def innermost(self):
        """(mode, site) of the innermost compiled function running, else None."""
        return self._running[-1] if self._running else None


@contextlib.contextmanager
def eager_compile(site):
    """While active, torch.compile(...) and Module.compile() mark what they compile, with
    the mode and `site()`, and change nothing else; yields the CompiledRegions."""
    original = getattr(torch, "compile", None)
    module_compile = getattr(torch.nn.Module, "compile", None)
    regions = CompiledRegions(site)
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
