"""Traces a training script as written: no provider functions, run as `python train.py`.

The file runs as `__main__` with the request's arguments in sys.argv, under the same
shape-only machinery as a provider script (tensors are fake; CUDA is mapped to the CPU
and torch.cuda answers as the first target GPU, target_gpu.py), inside a sandbox that
keeps it from touching the user's files and machine (sandbox.py). DataLoaders load for
real, in this process and outside the fake tensor mode: the batches are real CPU tensors
until the script moves them to the GPU.

An iteration is one pass of the loop, with one step of the first optimizer that steps
(`optimizer.step()`, and so `GradScaler.step`, the Hugging Face Trainer's, Accelerate's
and Lightning's steps, which all call it): the first pass warms up (lazy modules,
optimizer state) unrecorded, the one after it is recorded (from fetch to fetch where the
loop draws batches from a DataLoader, else from model call to model call: _Edge), and then
the script is unwound (a private exception): no epochs run. Its ops are credited to the script's lines
as a provider iteration's are. The time the DataLoader takes to produce the recorded
iteration's batch is measured on this CPU and recorded as host work on the line that
asked for it (batches.py).
"""

import ast
import collections
import contextlib
import enum
import importlib
import os

import torch

from . import compat, placement
from .batches import BatchLoading
from .containment import located, script_process_state, stubbed_note
from .distributed import TORCHRUN_VARIABLES
from .errors import ScriptControl, TraceError, TraceInterrupted, ValuesNeeded, error_at
from .loader import PROVIDER_NAMES, load_entry_module, find_providers
from .memory import MemoryTracker
from .patching import PatchOnImport, attributes_set, replace_while_active
from .recorder import OpRecorder
from .rnn import CUDNN_MODES, fuse_recurrent_layers
from .sandbox import Blocked, Sandbox
from .trace_state import TraceState
from .trace_warnings import warning
from .values import Shadows, Zeros, flatten_tensors

_PROVIDER_NAMES = frozenset(name for names in PROVIDER_NAMES.values() for name in names)
_RECORDED_STEP = 2  # the first step ends the warm-up iteration
_BACKWARD_PASSES = "backward passes"  # what bounds iterations without an optimizer
_RECURRENT_OPS = frozenset(f"aten::{kind}" for kind in CUDNN_MODES)


def runs_as_written(path):
    """Whether the file is traced as a script run as written: it defines (or imports) no
    provider function at its top level, and torch has the optimizer step hooks (2.0+;
    torch 1.13 reports the missing providers as before). A file that cannot be read or
    parsed goes the provider way, which reports why."""
    step_hooks = hasattr(importlib.import_module("torch.optim.optimizer"), "register_optimizer_step_post_hook")
    return step_hooks and not _defines_providers(path)


def _defines_providers(path):
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return True
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.asname or alias.name for alias in node.names]
        else:
            continue
        if _PROVIDER_NAMES.intersection(names):
            return True
    return False


class _Finished(ScriptControl):
    """The recorded iteration is done: unwinds the script."""


class _Edge(enum.Enum):
    """What bounds the recorded iteration: one whole pass of the loop from a point after the
    first step to the same point one pass later, so that work the loop does after its first
    step only (`if i % 100 == 0: log(loss.item())`, true at i = 0) stays out of it."""

    FETCH = enum.auto()  # a loop over a DataLoader's batches: the first fetch after the step
    MODEL_CALL = enum.auto()  # another loop: the first call of a module outside any other
    STEP = enum.auto()  # a loop that calls no module (a functional model): the step itself


class _Boundary(enum.Enum):
    """Whether the next edge (_Edge) starts the recorded iteration or ends it."""

    START = enum.auto()
    END = enum.auto()


class _ScriptShadows(Shadows):
    """A script reads values the trace does not compute (`loss.item()` to print it, GradScaler's
    overflow check, `if torch.isnan(loss)`): any such value without a real shadow reads as
    zero (no overflow, no NaN), as a float's already does (an `.all()` reads as true, as in
    every trace: Shadows.follow). An op whose output's shape depends on such values (a mask
    of the losses: hard-example mining) gets no zeros, which would give it another shape: the
    script is traced in cpu mode instead (tracer.run_trace), and so is a script that ends
    before its second step after reading such a value (`made_up`): the value may have
    ended its loop (`if loss.item() < 1e-3: break`)."""

    def __init__(self, site):
        super().__init__(site=site)
        # (file, line, op) where the script first read a value the trace made up; None: none.
        self.made_up = None

    def fallback(self, func, args, kwargs, fake_mode, zeros=Zeros.FLOATS):
        reads_values = not any("Tensor" in str(r.type) for r in func._schema.returns)
        if reads_values and self.made_up is None and any(
                self.real(t) is None for t in flatten_tensors((args, list(kwargs.values())))):
            self.made_up = (*self._site(), compat.op_name(func))
        return super().fallback(func, args, kwargs, fake_mode, Zeros.ALL if reads_values else zeros)

    def read(self, fake):
        if self.made_up is None and self.real(fake) is None:
            self.made_up = (*self._site(), "")
        return super().read(fake)


class _Run:
    """One script run: its step count, recording window and notes."""

    def __init__(self, state, recorder):
        self.state = state
        self.recorder = recorder
        self.lead = None  # the optimizer whose steps bound iterations
        # A backward pass ran with no optimizer made yet: a second one without an optimizer
        # makes backward passes the bound (a one-off pass before training, such as llm.c's
        # export of its gradients, comes before the optimizer is made).
        self.backward_without_optimizer = False
        self.steps = 0
        self.last_step_at = None  # (file, line) of the script line that made the last step
        self.roots = {}  # id -> module called outside any other module (the model, a loss)
        self.first_call_at = None  # (file, line) of the first such call
        self.depth = 0
        self.window = contextlib.ExitStack()  # what the recorded iteration runs under
        self.recording = False
        self.batch_size = None
        # The model call whose batch is not yet known (module_entered).
        self._samples_of = None
        # Samples the recorded iteration trains on, by the DataLoader batches it took and by
        # the batches its first module called outside any other (the model) ran on: more
        # than one batch when it accumulates gradients before the optimizer steps.
        self.loader_samples = 0
        self.model_samples = 0
        self.model = None
        self.batches = BatchLoading(self)
        # True while a DataLoader makes a batch: its transforms (torchvision's are modules)
        # are neither the model nor what the batch size is read from.
        self.loading = False
        # Datasets fetched from before the first step: a loop over their batches is
        # recorded from a fetch to the same point one iteration later (_Edge).
        self.training_data = set()
        self.edge = None
        self.boundary = None
        self.complete = False  # the recorded iteration is whole (it reached its step)
        # project_frames() -> ops run there from the first model call to the recorded iteration.
        self.before_recording = collections.Counter()

    # --- notes ------------------------------------------------------------------------
    def on_stubbed(self, call, file, line):
        self.state.warn_once(stubbed_note(call, file, line))

    # --- module roots ------------------------------------------------------------------
    def module_entered(self, module, inputs):
        if self.loading:
            return
        if self.depth == 0 and self.edge is _Edge.MODEL_CALL and self.boundary is not None:
            if self._at_edge(inputs):
                # The tracer's own module hooks, just registered, are not called for this call.
                self.state.enter_module(module, inputs)
        if self.depth == 0:
            self.roots.setdefault(id(module), module)
            if self.first_call_at is None:
                self.first_call_at = self.state.site()
                self.state.unrecorded_stacks = collections.Counter()
            if self.recording:
                if self.model is None:
                    self.model = id(module)
                self._samples_of = id(module)
        if self._samples_of is not None:
            # The batch is the first tensor the model takes, or, when the model takes its
            # tensors by keyword (`model(input_ids=x, labels=y)`), the first one a module
            # inside it takes (the embedding's ids).
            first = next((t for t in inputs if isinstance(t, torch.Tensor) and t.dim() > 0), None)
            if first is not None:
                if self.batch_size is None:
                    self.batch_size = int(first.shape[0])
                if self._samples_of == self.model:
                    self.model_samples += int(first.shape[0])
                self._samples_of = None
        self.depth += 1

    def module_left(self, module, inputs, output):
        if self.loading:
            return
        self.depth = max(0, self.depth - 1)
        if self.depth == 0:
            self._samples_of = None

    # --- steps ----------------------------------------------------------------------------
    def step_starting(self, optimizer, args, kwargs):
        """Lightning steps with a closure that runs forward and backward inside step():
        its ops are forward and backward ops, not the optimizer's."""
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
        if closure is None or not callable(closure):
            return None
        state = self.state

        def closure_in_forward():
            saved = state.phase
            state.phase = "forward"
            try:
                return closure()
            finally:
                state.phase = saved

        if "closure" in kwargs:
            return args, dict(kwargs, closure=closure_in_forward)
        return (args[0], closure_in_forward, *args[2:]), kwargs

    def step_done(self, optimizer, args, kwargs):
        if self.lead is None:
            self.lead = optimizer
        if optimizer is self.lead:
            self._stepped()

    def backward_done(self):
        """A script without an optimizer updates its parameters itself after each backward
        pass (pytorch/examples' word language model): its backward passes bound the loop's
        passes as steps do, from the second pass that finds no optimizer made."""
        if self.lead is None and not self.state.optimizers:
            if not self.backward_without_optimizer:
                self.backward_without_optimizer = True
                return
            self.lead = _BACKWARD_PASSES
        if self.lead is _BACKWARD_PASSES:
            self._stepped()

    def _stepped(self):
        self.steps += 1
        self.last_step_at = self.state.site()
        if self.recording:
            self.complete = True
            self.boundary = _Boundary.END
            if self.edge is _Edge.STEP:
                self._at_edge()
        elif self.boundary is _Boundary.START or not self.training_data:
            # A loop without a DataLoader, or one that fetched no batch since its last step
            # (it drew them all beforehand).
            self.edge = _Edge.MODEL_CALL if self.roots else _Edge.STEP
            self.boundary = _Boundary.START
            if self.edge is _Edge.STEP:
                self._at_edge()
        else:
            self.edge = _Edge.FETCH
            self.boundary = _Boundary.START

    def _at_edge(self, batch=()):
        """The recorded iteration's edge: it starts (True; `batch`: tensors made before it
        that are in memory in it, a model call's inputs), or it ends and the script is
        unwound."""
        if self.boundary is _Boundary.START:
            self.boundary = None
            self._start_window(flatten_tensors(batch))
            return True
        if self.boundary is _Boundary.END:
            self._end_window()
            raise _Finished()
        return False

    def batch_wanted(self, iterator):
        """Before a DataLoader makes a batch: where the recorded iteration starts or ends."""
        dataset = id(getattr(iterator, "_dataset", None))
        if self.steps == 0:
            self.training_data.add(dataset)
        elif self.edge is _Edge.FETCH and (self.boundary is _Boundary.END or dataset in self.training_data):
            self._at_edge()  # ended by the next training batch, or an evaluation's

    def _start_window(self, batch=()):
        state = self.state
        state.progress("tracing the second iteration")
        self.before_recording = state.unrecorded_stacks or collections.Counter()
        state.unrecorded_stacks = None
        from .tracer import _module_hooks

        for root in self.roots.values():
            state.name_modules(root)
        self.window.enter_context(_module_hooks(state))
        self.window.enter_context(fuse_recurrent_layers(state, compute_values=self.recorder.fake_mode is None))
        state.memory = MemoryTracker()
        state.memory.add_baseline([*(t for root in self.roots.values()
                                     for t in (*root.parameters(), *root.buffers())), *batch])
        self.window.enter_context(state.memory.saved_tensors_hooks())
        self.window.enter_context(state.memory.watching_zero_grad())
        self.window.enter_context(state.memory.watching_storage_resizes())
        self.window.enter_context(state.memory.watching_selective_checkpoints())
        self.recording = True
        self.recorder.recording = True

    def _end_window(self):
        if not self.recording:
            return
        self.recording = False
        self.recorder.recording = False
        self.state.placement.recording = False
        self.window.close()

    @contextlib.contextmanager
    def hooks(self):
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim

        handles = [optim.register_optimizer_step_pre_hook(self.step_starting),
                   optim.register_optimizer_step_post_hook(self.step_done),
                   nn_module.register_module_forward_pre_hook(self.module_entered),
                   nn_module.register_module_forward_hook(self.module_left)]
        self.state.backward_listeners.append(self.backward_done)
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
            self.state.backward_listeners.remove(self.backward_done)
            self._end_window()

    def note_unrepeated_work(self, ops):
        """Work the script did before the recorded iteration, after its first model call, under
        lines the recorded iteration ran nothing under: an evaluation, a checkpoint or a log
        line the loop runs on some steps only (nanoGPT evaluates at step 0, then every
        eval_interval steps), or once before training. Each op counts for the outermost such
        line of its stack (the loop's call of the evaluation, not the model's code it shares
        with training). It is not in the iteration's time; noted at the line with the most
        ops, with the number of such lines."""
        recorded = set()
        for op in ops:
            recorded.add((op["loc"]["file"], op["loc"]["line"]))
            recorded.update((frame["file"], frame["line"]) for frame in op.get("stack", ()))
        unrepeated = collections.Counter()
        for frames, count in self.before_recording.items():
            site = next(((file, line) for file, line, _ in frames if (file, line) not in recorded), None)
            if site is not None:
                unrepeated[site] += count
        if unrepeated:
            file, line = max(unrepeated, key=unrepeated.get)
            self.state.warn_once(warning("unrepeated_work", file, line, count=len(unrepeated)))

    def batch_taken(self, size, full):
        """A DataLoader batch of `size` samples (None: unknown) the recorded iteration took,
        from a loader of batches of `full` (None: unknown)."""
        if self.batch_size is None:
            self.batch_size = size
        self.loader_samples += size or 0
        if full is not None and size is not None and size < full:
            # The loader's last batch: the data ran out in the recorded step.
            self.state.warn_once(warning("partial_batch", *self.state.site(), count=full))

    def read_sequence_first_batch(self, ops):
        """A model called on sequence-first batches (time, batch, ...), as nn.LSTM and
        nn.TransformerEncoder take them by default (pytorch/examples' word language model):
        the batch the first dimension gave is the time steps of its first recurrent layer or
        attention, whose batch is another dimension."""
        if self.loader_samples or self.batch_size is None:
            return  # a DataLoader's batches are stacked batch first
        for op in ops:
            if op["phase"] != "forward":
                continue
            if op["name"] in _RECURRENT_OPS:
                if op["args"]["batch_first"] or op["args"]["packed"]:
                    return
                steps, batch = op["args"]["seq_len"], op["args"]["batch"]
                break
            if "scaled_dot_product" in op["name"] and len(op["inputs"][0]["shape"]) == 4:
                batch, _, steps, _ = op["inputs"][0]["shape"]  # (batch, heads, queries, size)
                break
        else:
            return
        if self.batch_size == steps and batch != steps:
            self.model_samples = self.model_samples // steps * batch
            self.batch_size = batch

def _real_tensors_to_transformers():
    """transformers takes a fake tensor for a graph being compiled (`is_tracing`) and skips
    its value checks: a Trainer's model (no cache) then builds an explicit attention mask
    where the GPU run uses causal flash attention. The trace follows the values those
    checks read (position ids), so they run as on the GPU. A transformers module that
    copies the function meanwhile gets the real one back after the trace."""
    def patch(module, undo):
        replace_while_active(undo.append, module, "is_fake_tensor", lambda tensor: False, imports.active)

    imports = PatchOnImport({"transformers.utils.import_utils": patch})
    return imports.installed()


def _pinning_ignored():
    """`tensor.pin_memory()` needs a GPU: placement.pinned answers it."""
    return attributes_set(torch.Tensor, {"pin_memory": lambda self, *args, **kwargs: placement.pinned(self)})


def trace_script(project, mode, progress, assume_gpu, rank, script_args, device, compile_mode=None,
                 working_directory=None, scratch=None):
    """The trace document of one iteration of the script run as written (tracer.run_trace)."""
    from . import tracer

    if mode not in ("shape", "cpu"):
        raise TraceError("bad_request", f"a script without provider functions traces in shape or cpu mode, "
                                        f"not \"{mode}\"", file=project.entry_file, line=1,
                         hint="Trace it in shape or cpu mode, or define wavecast_model, wavecast_input and "
                              "wavecast_iteration to measure it on a GPU.")
    if not all(isinstance(a, str) for a in script_args):
        raise TraceError("bad_request", "script arguments must be strings",
                         hint="Pass the script's arguments as a list of strings.")
    if working_directory is not None and not os.path.isdir(working_directory):
        raise TraceError("bad_request", f"the working directory {working_directory!r} is not a folder",
                         hint="Run wavecast from the folder the script is run from, or give an existing one.")
    state = TraceState(project, progress)
    state.compile_what_if(compile_mode)
    state.assume_gpu = assume_gpu
    state.distributed = rank
    compat.ensure_meta_kernels()
    shape_only = mode == "shape"
    fake_mode = compat.make_fake_mode() if shape_only else None
    recorder = OpRecorder(state, fake_mode)
    recorder.recording = False
    if shape_only:
        recorder.shadows = _ScriptShadows(site=state.site)
    run = _Run(state, recorder)
    # Which tensors stay on the CPU is followed from the start: Adam's step counters are
    # made in the warm-up iteration, and stay host tensors in the recorded one.
    state.placement.recording = True
    sandbox = Sandbox(project, state.site, run.on_stubbed, scratch)
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(script_process_state(project, script_args, working_directory))
            stack.enter_context(sandbox.active())
            autocast = tracer.enter_tracing_contexts(stack, state, mode, rank,
                                                     fake_mode or contextlib.nullcontext(), steady_state=False,
                                                     device=device)
            stack.enter_context(_pinning_ignored())
            if shape_only:
                stack.enter_context(compat.readable_fake_values(recorder.shadows.read))
                stack.enter_context(recorder.checkpoints_read_for_real())
            stack.enter_context(_real_tensors_to_transformers())
            stack.enter_context(recorder)
            stack.enter_context(run.batches.real())
            stack.enter_context(run.hooks())
            progress("running the script")
            _run_main(project, sandbox, run)
            run.read_sequence_first_batch(state.ops)
            run.note_unrepeated_work(state.ops)
            if not state.cuda_mapped:
                state.warnings.append(warning("cpu_only_script"))
            state.finish()
            precision = tracer.precision(autocast)
            model = torch.nn.ModuleList(run.roots.values())
            memory = tracer._memory(model, state.optimizers)
            memory.update(tracer._tracked_memory(state, model))
    except TraceInterrupted as exc:
        raise _no_step_in_time(exc, project, run) from None

    document = {
        "format": "wavecast-trace",
        "version": tracer.TRACE_FORMAT_VERSION,
        "producer": compat.versions(),
        "entry_file": project.entry_file,
        "project_root": project.root,
        "batch_size": run.batch_size or 0,
        "samples_per_iteration": max(run.batch_size or 0, run.loader_samples or run.model_samples),
        "mode": mode,
        "providers": {},
        "script_args": list(script_args),
        "ops": state.ops,
        "fallback_ops": state.fallback_ops,
        "memory": memory,
        "precision": precision,
        "warnings": tracer._torch_warnings() + state.warnings + run.batches.warnings() + rank.warnings,
    }
    layout = rank.document()
    if layout is not None:
        document["distributed"] = layout
    return document


def _run_main(project, sandbox, run):
    try:
        module = _main_module(project, run)
    except _Finished:
        return
    except Blocked as blocked:
        raise sandbox.refusal_error(None) or located(blocked.error, blocked) from None
    except TraceError as error:
        if error.kind == "user_exception":
            if isinstance(error.__context__, SystemExit):  # `raise SystemExit`, the builtin exit()
                raise sandbox.exit_error(f"SystemExit({error.__context__.code!r})", error.file,
                                         error.line) from None
            refused = sandbox.refusal_error(error.__context__)
            if refused is not None:
                raise located(refused, error) from None
            if isinstance(error.__context__, KeyError) and error.__context__.args[:1] and \
                    error.__context__.args[0] in TORCHRUN_VARIABLES:
                error.hint = ("The script reads the variables torchrun sets: trace it as one rank of its "
                              "launch, with the launch's GPU count (--world-size N; wavecast.worldSize in "
                              "the editor).")
            else:
                made_up = getattr(run.recorder.shadows, "made_up", None)
                if made_up is not None:
                    # The value read may be the cause (the step count of an Adam resumed
                    # from a checkpoint restored to the GPU, read as 0 and divided by).
                    raise ValuesNeeded.read_at(*made_up, f"the script failed ({error.message}) after "
                                               "reading a value shape-only tracing does not compute") from None
        raise
    if run.complete:
        return
    made_up = getattr(run.recorder.shadows, "made_up", None)
    if made_up is not None:
        raise ValuesNeeded.read_at(*made_up, "the script ended before its second step after reading a value "
                                   "shape-only tracing does not compute")
    # The script ended before its second step: a file that is no training script at all
    # gets the provider errors it always had, one that only ran its model (an evaluation)
    # says so where it first did.
    if run.steps == 0:
        if run.first_call_at is None:
            find_providers(module, project)
        raise TraceError(
            "no_training_step",
            "the script ran its model but never trained it: no backward pass or optimizer step ran "
            "with the arguments given", file=run.first_call_at[0], line=run.first_call_at[1],
            hint="wavecast predicts training iterations: give the arguments that make the script train "
                 "(not an evaluation-only run, such as --test-only or --eval), or define wavecast_model, "
                 "wavecast_input and wavecast_iteration.")
    unit = ("backward pass", "backward passes") if run.lead is _BACKWARD_PASSES else ("optimizer step", "optimizer steps")
    file, line = run.last_step_at
    raise TraceError(
        "no_training_step",
        f"the script ended after {run.steps} {unit[run.steps != 1]}; "
        f"tracing needs {max(_RECORDED_STEP, run.steps + 1)} (the first warms up)",
        file=file, line=line,
        hint="Make the script train for at least two steps with the arguments given (e.g. more "
             "than one batch), or define wavecast_model, wavecast_input and wavecast_iteration.")


def _main_module(project, run):
    try:
        return load_entry_module(project, "__main__", "while running the script")
    except (TraceInterrupted, Blocked, TraceError):
        # After the recorded step, before the fetch that would end the iteration: the loop
        # broke off and the script went on (a final evaluation, a save) until it failed or
        # ran out of time. The recorded iteration was whole at its step.
        if run.complete:
            raise _Finished() from None
        raise


def _no_step_in_time(exc, project, run):
    located = error_at("timeout", "", exc, project, "")
    steps = f"{run.steps} optimizer step{'s' if run.steps != 1 else ''}"
    return TraceError(
        "timeout",
        f"the script did not reach its second optimizer step before the time-out ({steps} so far); "
        f"it was running the line shown",
        file=located.file, line=located.line,
        hint="Make the script reach its training loop sooner (a smaller dataset or fewer set-up "
             "steps), or raise the time-out.",
        traceback=located.traceback,
    )
