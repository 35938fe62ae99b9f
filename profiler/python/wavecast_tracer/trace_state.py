"""What one traced iteration recorded (TraceState): its ops, their phases and source lines,
and the attribution of backward ops to the forward ops they differentiate."""

import contextlib
import functools
import sys
import weakref

import torch

from . import compat
from .compiled import compile_mode, compile_site, what_if
from .dataflow import Dataflow
from .placement import DEVICE_TO_HOST_OP, HOST_TO_DEVICE_OP, PINNED, SYNCHRONIZE_OP, Placement, staging_ms
from .distributed import local_tensor
from .op_description import METADATA_OPS, describe_call, tensor_meta
from .project import enters_user_code, forwards_its_arguments
from .target_gpu import Streams
from .trace_warnings import warning
from .values import flatten_tensors, written_tensors

# Dispatches after which an output without grad_fn is taken to need no gradient.
_GRAD_FN_CHECKS = 16

# Set on the parameters' gradients once a backward pass made them, and on what ops compute
# from them outside backward, until the step: that work (clipping, a GradScaler's unscale
# and its check) is the optimizer's, though it runs before the step. The value is the
# TraceState's gradient epoch, so marks from an earlier step (a GradScaler's scale, written
# by its update) mark nothing in the next forward.
GRADIENT = "_wavecast_gradient"


class TraceState:
    """Everything recorded during one iteration, plus the attribution bookkeeping."""

    def __init__(self, project, progress):
        self.project = project
        self.progress = progress
        self.ops = []
        self.phase = "forward"
        self.module_names = {}
        self.module_stack = []
        self.fallback_ops = []
        self.fallback_hit = False
        self.warnings = []
        self.optimizers = []
        # Bumped by each backward pass and each optimizer step (GRADIENT); the gradients are
        # live from a backward pass to the step.
        self._gradient_epoch = 0
        self._gradients_live = False
        # The first op recorded since the gradients were made.
        self._gradients_since = 0
        # The parameters the backward pass under way accumulates gradients into.
        self._leaves = []
        # Forward outputs whose autograd node is set only after dispatch returns.
        self._pending_outputs = []
        # id(autograd node) -> (node, forward op index); the node is held so ids stay unique.
        self._node_records = {}
        # Backward ops recorded since the last autograd node finished.
        self._unattributed = []
        self._regions = []
        self._backward_site = None
        self._modules_at_backward = 0
        # > 1 while a backward runs inside a backward (reentrant torch.utils.checkpoint).
        self._backward_depth = 0
        # Ops that ran for real or read a value on invented values only (values.py): their
        # shapes and values follow from the shapes alone, so a model call may be replayed.
        self.invented_reads = set()
        self._stack_json = {}
        # > 0 while a fused op (e.g. a whole LSTM) runs its parts, which are not recorded.
        self.suppressed = 0
        self.cuda_mapped = False
        # Which tensors would be on the CPU on a GPU (placement.Placement); its mixes are warned
        # about when the script uses CUDA, or when `assume_gpu` (the caller moves the model
        # and batch to a GPU, as the truth harness does for the samples).
        self.placement = Placement(self.ops, self.project_frames, self.copied_to_gpu, self.copied_to_host,
                                   self.on_host_side)
        # True while the iteration is recorded (OpRecorder.recording).
        self.recording = False
        # project_frames() -> ops a script run as written ran there between its first model
        # call and the recorded iteration, while they are counted (script_runner._Run).
        self.unrecorded_stacks = None
        # The stream the script issues work on (target_gpu.Streams).
        self.streams = Streams(self.synchronized)
        self.assume_gpu = False
        # A memory.MemoryTracker in shape and cpu mode: storages live and saved for backward.
        self.memory = None
        # A distributed.OneRank: the script's process group and its collectives.
        self.distributed = None
        # With a kept model: the optimizer state its optimizers built in an earlier trace,
        # for this trace's optimizers to adopt (tracer.KeptOptimizerStates), else None.
        self.kept_optimizer_states = None
        # Called after each outermost backward pass (replay.ModelCalls reads the gradients).
        self.backward_listeners = []
        # compiled.CompiledRegions: the compiled functions running now (set by the tracer).
        self.compiled_functions = None
        # (module stack depth, mode, torch.compile's (file, line)) of each compiled module
        # running now, and the torch.compile lines whose code the iteration ran.
        self._compiled_modules = []
        self._compile_sites_warned = set()
        # A dataflow.Dataflow once a compiled op ran: every later op says who wrote its inputs.
        self.dataflow = None
        # The torch.compile mode the request runs the iteration's own module calls in.
        self.compile_requested = None

    def records(self, name):
        """Whether an op of this name is recorded now: not a view or allocation, and not
        inside a suppressed region (a warm-up optimizer step, a fused RNN's inner ops)."""
        return name not in METADATA_OPS and not self.suppressed

    def in_plain_forward(self):
        """Whether the iteration runs forward code now: not a backward pass (a reentrant
        checkpoint's recompute included), an optimizer step or a suppressed region."""
        return self.phase == "forward" and not self.suppressed and not self._backward_depth and not self._regions

    @contextlib.contextmanager
    def untracked_memory(self):
        """While active, the memory tracker does not follow new outputs."""
        with self.memory.paused() if self.memory is not None else contextlib.nullcontext():
            yield

    def live_before_iteration(self, tensors):
        """Counts `tensors` as memory live since before the iteration (optimizer state; of
        a DTensor, the part this rank holds)."""
        if self.memory is not None:
            self.memory.add_live_before(local_tensor(t) for t in tensors)

    @contextlib.contextmanager
    def suppressing(self):
        self.suppressed += 1
        try:
            yield
        finally:
            self.suppressed -= 1

    @contextlib.contextmanager
    def on_host_side(self):
        """The tracer's work for the host's side of a copy from the GPU: not the GPU's ops,
        not its memory."""
        with self.suppressing(), self.untracked_memory():
            yield

    # --- source locations -------------------------------------------------
    def project_frames(self):
        """The project's frames running now, outermost first, less wrappers that forward
        their arguments (project.forwards_its_arguments) where any other is left."""
        frames = []
        wrappers = []
        f = sys._getframe(1)
        contains = self.project.contains
        while f is not None and not enters_user_code(f.f_code):
            code = f.f_code
            if contains(code.co_filename):
                (wrappers if forwards_its_arguments(f) else frames).append((code.co_filename, f.f_lineno, code.co_name))
            f = f.f_back
        if not frames:
            frames = wrappers
        frames.reverse()
        return tuple(frames)

    def stack_json(self, frames):
        cached = self._stack_json.get(frames)
        if cached is None:
            cached = [{"file": f, "line": l, "function": n} for f, l, n in frames]
            self._stack_json[frames] = cached
        return cached

    @staticmethod
    def loc_json(frames):
        if not frames:
            return {"file": "", "line": 0, "function": ""}
        f, l, n = frames[-1]
        return {"file": f, "line": l, "function": n}

    # --- modules ----------------------------------------------------------
    def name_modules(self, model):
        for name, module in model.named_modules():
            self.module_names.setdefault(id(module), name)

    def enter_module(self, module, _inputs):
        self.module_stack.append(self.module_names.get(id(module), type(module).__name__))
        mode, site = compile_mode(module), compile_site(module)
        if mode is None and len(self.module_stack) == 1:
            mode = what_if(module, self.compile_requested)
        if mode is not None:
            self._compiled_modules.append((len(self.module_stack), mode, site))

    def exit_module(self, _module, _inputs, _output):
        if self.module_stack:
            self.module_stack.pop()
        self._leave_compiled_modules()

    def _leave_compiled_modules(self):
        while self._compiled_modules and self._compiled_modules[-1][0] > len(self.module_stack):
            self._compiled_modules.pop()

    def compile_what_if(self, mode):
        """Runs the modules the iteration calls itself as if compiled with `mode` (None: as
        the script says), with a warning saying so."""
        self.compile_requested = mode
        if mode is not None:
            self.warn_once(warning("torch_compile"))

    def compile_mode(self):
        """The torch.compile mode of the code running now, else None. Backward ops take
        their forward op's (_credit_backward)."""
        return self._compiled_now()[0]

    def _compiled_now(self):
        """(mode, (file, line) of its torch.compile or None) of the compiled code running
        now, else (None, None)."""
        if self.phase == "backward":
            return None, None
        function = self.compiled_functions.innermost() if self.compiled_functions is not None else None
        if function is not None:
            return function
        if self._compiled_modules:
            return self._compiled_modules[-1][1:]
        return None, None

    # --- optimizer regions (via torch.autograd.profiler.record_function) --
    def record_function_factory(self):
        state = self

        class OptimizerRegion(contextlib.ContextDecorator):
            def __init__(self, name, args=None):
                self.name = name

            def __enter__(self):
                state.enter_region(self.name)
                return self

            def __exit__(self, *exc):
                state.exit_region()
                return False

        return OptimizerRegion

    def enter_region(self, name):
        if name.startswith("Optimizer."):
            frames = self.project_frames()
            self._regions.append((self.phase, frames, name.startswith("Optimizer.step")))
            self.phase = "optimizer"
            if name.startswith("Optimizer.step"):
                self.progress("tracing optimizer")
        else:
            self._regions.append(None)

    def exit_region(self):
        region = self._regions.pop() if self._regions else None
        if region is not None:
            self.phase = region[0]
            if region[2]:  # a step: the gradients are spent
                self._gradient_epoch += 1
                self._gradients_live = False

    # --- backward attribution ---------------------------------------------
    def resolve_pending_outputs(self):
        """Maps the autograd nodes of recent forward outputs to their ops.

        Autograd sets grad_fn only after the op's dispatch returned (and after
        some bookkeeping dispatches of its own), so each output is checked on
        later dispatches until its node appears; the first node seen is the
        op's own, before any later in-place op replaces it.

        An op in place on a view (`h[:, :8] += 1`) computes its gradient in the node autograd
        puts on the view's base (CopySlices), which the op is credited with too (the view's
        own node only selects from it, and a view made for the op alone dies with it).
        """
        still_pending = []
        for index, tensors, checks_left in self._pending_outputs:
            unresolved = []
            for ref in tensors:
                t = ref()
                if t is None:
                    continue
                node = t.grad_fn
                if node is None:
                    unresolved.append(ref)
                elif id(node) not in self._node_records:
                    self._node_records[id(node)] = (node, index)
            if unresolved and checks_left > 1:
                still_pending.append((index, unresolved, checks_left - 1))
        self._pending_outputs = still_pending

    def expect_grad_fn(self, index, tensors, in_place=False):
        """The autograd node `tensors` get (after the op returned) belongs to op `index`;
        `in_place`: the op modified them, and so also the node of any view's base."""
        if in_place:
            tensors = list(tensors) + [t._base for t in tensors if t._is_view()]
        if tensors:
            # Weakly: an output the iteration drops dies then, not some dispatches later.
            self._pending_outputs.append((index, [weakref.ref(t) for t in tensors], _GRAD_FN_CHECKS))

    def begin_backward(self, roots):
        self._backward_depth += 1
        if self._backward_depth > 1:
            # A reentrant checkpoint recomputes its forward and runs its backward inside its
            # own autograd node: those ops stay unattributed until that node finishes, so
            # they are credited to the checkpointed call's line.
            return
        self.resolve_pending_outputs()
        if self.memory is not None:
            self.memory.backward_started()
        self._backward_site = self.project_frames()
        self._modules_at_backward = len(self.module_stack)
        seen = set()
        todo = []
        for root in roots:
            node = getattr(root, "grad_fn", None)
            if node is not None:
                todo.append((node, None))
        while todo:
            node, inherited = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            leaf = getattr(node, "variable", None)  # an AccumulateGrad node's leaf
            if isinstance(leaf, torch.nn.Parameter):  # not an input's (an adversarial step's)
                self._leaves.append(leaf)
            known = self._node_records.get(id(node))
            index = known[1] if known else inherited
            if not known:
                self._node_records[id(node)] = (node, index)
            node.register_hook(functools.partial(self._node_finished, index))
            for child, _ in node.next_functions:
                if child is not None and id(child) not in seen:
                    todo.append((child, index))
        self.phase = "backward"
        self.progress("tracing backward")

    def _node_finished(self, forward_index, _grad_inputs, _grad_outputs):
        # The engine runs a node's kernels, then its post hooks: the ops seen
        # since the previous node finished belong to this node.
        for index in self._unattributed:
            self._credit_backward(self.ops[index], forward_index)
        self._unattributed.clear()

    def end_backward(self):
        self._backward_depth -= 1
        if self._backward_depth > 0:
            return
        for index in self._unattributed:
            self._credit_backward(self.ops[index], None)
        self._unattributed.clear()
        # A non-reentrant checkpoint stops its recompute once it has what backward needs,
        # before the recomputed modules' forward hooks return: their names are not left
        # on the stack for the ops after backward.
        del self.module_stack[self._modules_at_backward:]
        self._leave_compiled_modules()
        self.phase = "forward"
        self._mark_gradients()
        for listener in self.backward_listeners:
            listener()

    def _mark_gradients(self):
        """The gradients of the parameters backward reached, and of the optimizers' (a
        script that updates its parameters by hand has none)."""
        self._gradient_epoch += 1
        self._gradients_since = len(self.ops)
        parameters = self._leaves + [p for optimizer in self.optimizers for group in optimizer.param_groups
                                     for p in group["params"]]
        self._leaves = []
        for parameter in parameters:
            gradient = parameter.grad
            if gradient is not None:
                setattr(gradient, GRADIENT, self._gradient_epoch)
                setattr(local_tensor(gradient), GRADIENT, self._gradient_epoch)  # a DTensor's shard
                self._gradients_live = True

    def works_on_gradients(self, func, args, kwargs, out):
        """Whether an op outside backward and the optimizer's step takes a gradient, or what
        was computed from one; its outputs and the tensors it writes are then marked too.
        Such work is the step's (docs/trace-format.md, "phase")."""
        if not self._gradients_live or self.phase != "forward":
            return False
        epoch = self._gradient_epoch
        if not any(getattr(t, GRADIENT, None) == epoch for t in flatten_tensors((args, list(kwargs.values())))):
            return False
        for t in flatten_tensors(out) + written_tensors(func, args, kwargs):
            # A parameter updated from its gradient by hand (SAM's ascent step, SGD written
            # out) is still what the next forward takes.
            if not isinstance(t, torch.nn.Parameter):
                setattr(t, GRADIENT, epoch)
        return True

    def _credit_backward(self, op, forward_index):
        if forward_index is None:
            frames = self._backward_site or ()
            op["loc"] = self.loc_json(frames)
            op["stack"] = self.stack_json(frames)
            return
        forward = self.ops[forward_index]
        op["loc"] = forward["loc"]
        op["stack"] = forward["stack"]
        op["module"] = forward["module"]
        op["forward_id"] = forward["id"]
        if "compiled" in forward:  # AOTAutograd compiles the backward of a compiled forward
            op["compiled"] = forward["compiled"]

    def on_cuda_mapped(self):
        if not self.cuda_mapped:
            self.cuda_mapped = True
            self.warnings.append(warning("cuda_traced_on_cpu"))

    def on_unmodelled_autocast(self, kind, **facts):
        self.warn_once(warning(kind, *self.site(), **facts))

    def site(self):
        """(file, line) of the innermost project frame running now; ("", 0) outside."""
        return self.project.site()

    def warn_once(self, record):
        if record not in self.warnings:
            self.warnings.append(record)

    def on_fallback(self, _func):
        self.fallback_hit = True

    def finish(self):
        """Called after the iteration returned."""
        self.resolve_pending_outputs()
        self._node_records.clear()
        if self.cuda_mapped or self.assume_gpu:
            self.warnings.extend(self.placement.warnings())

    # --- recording ----------------------------------------------------------
    def copied_to_gpu(self, t, non_blocking):
        """A host tensor the iteration copies to the GPU: the copy engine's transfer over the
        host link, from page-locked memory or, staged on the CPU first, from pageable memory
        (the staging timed on this CPU). docs/trace-format.md, "Operation record"."""
        self._copied(HOST_TO_DEVICE_OP, t, bool(getattr(t, PINNED, False)), bool(non_blocking))

    def copied_to_host(self, t, non_blocking):
        """A GPU tensor the iteration copies to host memory: the copy engine's transfer over
        the host link once the stream reaches it, into pageable memory (staged by the CPU as
        it arrives) or, with non_blocking, into page-locked memory PyTorch allocates for it.
        docs/trace-format.md, "Copies between the host and the GPU"."""
        self._copied(DEVICE_TO_HOST_OP, t, bool(non_blocking), bool(non_blocking))

    def _copied(self, name, t, pinned, non_blocking):
        """The op of a copy of `t` over the host link (HOST_TO_DEVICE_OP, DEVICE_TO_HOST_OP)."""
        if not self.recording or self.suppressed:
            return
        meta = tensor_meta(t)
        nbytes = t.numel() * t.element_size()
        args = {"bytes": nbytes, "pinned": pinned, "non_blocking": non_blocking}
        staged = None if pinned else staging_ms(nbytes)
        if staged is not None:
            args["staging_ms"] = round(staged, 4)
        if self.streams.on_side_stream():
            args["side_stream"] = True
        self.fallback_hit = False  # set by the last op dispatched, not this one
        index = self.append_op(name, [meta], [], args)
        self.ops[index]["outputs"] = [meta]

    def synchronized(self):
        """The script waits for the GPU (torch.cuda.synchronize(), an event's or a stream's
        synchronize()): an op of no work that the host model makes the CPU wait at."""
        if self.recording and not self.suppressed:
            self.fallback_hit = False
            self.append_op(SYNCHRONIZE_OP, [], [], {})

    def append_replayed(self, op):
        """Appends an op record a replayed model call made complete (replay.py): its id,
        location and forward op are set, and it needs no attribution."""
        if op["fallback"] and op["name"] not in self.fallback_ops:
            self.fallback_ops.append(op["name"])
        self.ops.append(op)

    def record(self, func, name, args, kwargs, out, on_gradients=False):
        tensors = []
        inputs, op_args = describe_call(func, name, args, kwargs, tensors)
        index = self.append_op(name, inputs, flatten_tensors(out), op_args, in_place=compat.writes_an_input(func),
                               input_tensors=tensors, phase="optimizer" if on_gradients else None)
        if on_gradients:
            # The call that works on the gradients (unscale_, clip_grad_norm_) is the step's
            # work as a whole: the ops it ran just before on its own state (the inverse scale)
            # too, back to an op of another line or phase (one credited so already) or made
            # before the gradients.
            loc = self.ops[index]["loc"]
            self.ops[index]["gradient_work"] = True
            for op in reversed(self.ops[self._gradients_since:index]):
                if op["loc"] != loc or op["phase"] != "forward":
                    break
                op["phase"] = "optimizer"
                op["gradient_work"] = True
                op.pop("forward_id", None)

    def append_op(self, name, inputs, out_tensors, op_args, in_place=False, input_tensors=None, phase=None):
        """Appends one op record; `inputs` are tensor metadata (or None), returns its index.
        `in_place`: the op modifies its output, an input (resolve_pending_outputs).
        `input_tensors`: the inputs' tensors, parallel to `inputs`, for the dataflow.
        `phase`: the op's, where it is not the phase running now (work on gradients)."""
        index = len(self.ops)
        mode, compiled_at = self._compiled_now()
        if compiled_at is not None and compiled_at not in self._compile_sites_warned:
            self._compile_sites_warned.add(compiled_at)
            self.warn_once(warning("torch_compile", *compiled_at))
        if mode is not None and self.dataflow is None:
            self.dataflow = Dataflow()
            if self.memory is not None:
                self.memory.release_listeners.append(self.dataflow.forget)
        if self.dataflow is not None:
            tensors = input_tensors if input_tensors is not None else []
            self.dataflow.annotate(inputs, tensors)
            self.dataflow.wrote(index, tensors, out_tensors, in_place)
        op = {
            "id": index,
            "name": name,
            "phase": phase or self.phase,
            "inputs": inputs,
            "outputs": [tensor_meta(t) for t in out_tensors],
            "args": op_args,
            "module": self.module_stack[-1] if self.module_stack else "",
            "fallback": self.fallback_hit,
        }
        if mode is not None:
            op["compiled"] = mode
        if self.fallback_hit and name not in self.fallback_ops:
            self.fallback_ops.append(name)
        if self.phase == "backward":
            op["loc"] = {"file": "", "line": 0, "function": ""}
            op["stack"] = []
            self._unattributed.append(index)
        else:
            frames = self.project_frames()
            if op["phase"] == "optimizer":
                in_step = self.phase == "optimizer" and self._regions and self._regions[-1]
                op["loc"] = self.loc_json(self._regions[-1][1] if in_step else frames)
            else:
                op["loc"] = self.loc_json(frames)
                op["forward_id"] = index
                # Also under no_grad: a custom autograd Function (torch.utils.checkpoint) runs its
                # forward without grad and then makes its backward node the grad_fn of the output.
                self.expect_grad_fn(index, out_tensors, in_place)
            op["stack"] = self.stack_json(frames)
        self.ops.append(op)
        return index
