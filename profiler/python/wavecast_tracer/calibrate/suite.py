"""Runs the calibration cases within a time budget and writes the calibration file
(docs/calibration.md).

Each (case, precision) is built, warmed up unrecorded, then run `repeats` times under
`OpTimingMode`, which records every ATen op as the tracer does (`describe_call`: the
same name, input metadata and arguments a trace has) and times it with the backend.
An op's entry is the median over the repeats; identical ops (same name, phase, inputs
and arguments) from several iterations or cases pool their samples.
"""

import json
import os
import statistics
import sys
import time

import torch

from .. import compat, rnn
from ..op_description import METADATA_OPS, describe_call, tensor_meta
from ..values import flatten_tensors
from . import cases as case_defs
from .timing import utc_now

FORMAT = "wavecast-calibration"
VERSION = 1
BUDGET_S = {"quick": 120.0, "full": 600.0}
REPEATS = {"quick": 5, "full": 10}
WARMUP = 2
# Whatever the budget, stop starting cases this close to it: one case rarely takes longer.
RESERVE_S = 5.0


class OpTimingMode(compat.TorchDispatchMode):
    """Times and describes every op that launches work, in dispatch order."""

    def __init__(self, timer):
        super().__init__()
        self.timer = timer
        self.phase = "forward"
        self.calls = []  # op descriptions, in order
        self.tokens = []
        self.transient = []  # bytes each op held only while it ran (workspaces)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = compat.op_name(func)
        if name in METADATA_OPS or _is_view(func):
            return func(*args, **kwargs)
        mark = self.timer.memory_mark()
        token = self.timer.start()
        out = func(*args, **kwargs)
        # Stopped before the op is described: the description is the suite's CPU work, and
        # a GPU that waits for it must not count the wait as the op's.
        token = self.timer.stop(token)
        self.transient.append(self.timer.transient_bytes(mark))
        layer = rnn.as_traced_layer(name, args, out)
        if layer is not None:
            name, inputs, outputs, op_args = layer
        else:
            traced_func, traced_args, traced_kwargs, outputs = as_shape_traced(func, args, kwargs, out)
            name = compat.op_name(traced_func)
            inputs, op_args = describe_call(traced_func, name, traced_args, traced_kwargs)
        call = {"name": name, "phase": self.phase, "inputs": inputs,
                "outputs": [tensor_meta(t) for t in flatten_tensors(outputs)], "args": op_args}
        self.tokens.append(token)
        self.calls.append(call)
        return out


def as_shape_traced(func, args, kwargs, out):
    """The op as a shape-mode trace records it: (func, args, kwargs, outputs). Shape mode
    runs CUDA code on the CPU, where a composite that picks a backend at run time picks the
    generic kernel; on the GPU the same call reaches cuDNN's. Entries take the traced name,
    or a prediction would never find them. (The dispatcher passes every argument that is
    not keyword-only positionally.)"""
    aten = torch.ops.aten
    if func is aten.cudnn_batch_norm.default:
        # (input, weight, bias, running_mean, running_var, training, factor, epsilon):
        # native_batch_norm's order; cuDNN's fourth output is its reserve space.
        return aten.native_batch_norm.default, args, kwargs, out[:3]
    if func is aten.cudnn_batch_norm_backward.default:
        x, grad, weight, running_mean, running_var, save_mean, save_var, epsilon = args[:8]
        mask = [True, weight is not None, weight is not None]
        return (aten.native_batch_norm_backward.default,
                (grad, x, weight, running_mean, running_var, save_mean, save_var, True, epsilon,
                 mask), {}, out)
    return func, args, kwargs, out


def _is_view(func):
    """Whether the op returns a view of an input (t, view, expand): no work to time."""
    returns = func._schema.returns
    return bool(returns) and all(
        getattr(r, "alias_info", None) is not None and not r.alias_info.is_write for r in returns)


def _key(call):
    return json.dumps([call["name"], call["phase"], call["inputs"], call["args"]], sort_keys=True)


def _quartiles(samples):
    if len(samples) < 2:
        return 0.0
    q = statistics.quantiles(samples, n=4, method="inclusive")
    return q[2] - q[0]


class Suite:
    def __init__(self, timer, quick, budget_s=None, repeats=None, progress=None, cases=None,
                 clock=time.monotonic):
        self.timer = timer
        self.tier = "quick" if quick else "full"
        self.budget_s = budget_s if budget_s is not None else BUDGET_S[self.tier]
        self.repeats = repeats or REPEATS[self.tier]
        self.progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        all_cases = cases if cases is not None else case_defs.load_cases()
        self.cases = [c for c in all_cases if c.get("quick") or not quick]
        self.clock = clock
        self.samples = {}  # key -> (entry without timings, [ms, ...])
        self.skipped = []
        self.runs = 0
        self.complete = False
        self.started = None

    def work(self):
        return [(case, precision) for case in self.cases for precision in case["precisions"]]

    def run(self):
        """Runs cases until done or out of budget; KeyboardInterrupt propagates, the samples
        so far kept (write() then marks the file incomplete)."""
        self.started = self.clock()
        work = self.work()
        for number, (case, precision) in enumerate(work, 1):
            elapsed = self.clock() - self.started
            if elapsed > self.budget_s - RESERVE_S:
                self.progress(f"time budget of {self.budget_s:.0f} s spent: "
                              f"{number - 1} of {len(work)} cases measured")
                return
            label = f"[{number}/{len(work)}] {case['name']} {precision}"
            try:
                ops, total_ms = self._run_case(case, precision)
            except case_defs.CaseError as exc:
                self.skipped.append({"case": case["name"], "precision": precision, "reason": str(exc)})
                self.progress(f"{label}: skipped ({exc})")
                continue
            except Exception as exc:  # noqa: B902 - a case torch cannot run here is skipped
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self.skipped.append({"case": case["name"], "precision": precision, "reason": reason})
                self.progress(f"{label}: skipped ({reason})")
                continue
            self.runs += 1
            self.progress(f"{label}: {ops} ops, {total_ms:.3f} ms "
                          f"({self.clock() - self.started:.0f} of {self.budget_s:.0f} s)")
        self.complete = True

    def _run_case(self, case, precision):
        workload = case_defs.build(case, precision, self.timer.device)
        with workload.context():
            for _ in range(WARMUP):
                for _, step in workload.steps:
                    step()
            names = None
            per_index = []
            transient = []
            calls = None
            for _ in range(self.repeats):
                mode = OpTimingMode(self.timer)
                self.timer.begin()
                with mode:
                    for phase, step in workload.steps:
                        mode.phase = phase
                        step()
                times = self.timer.finish(mode.tokens, mode.calls)
                current = [c["name"] for c in mode.calls]
                if names is None:
                    names, calls = current, mode.calls
                    per_index = [[] for _ in calls]
                    transient = [0] * len(calls)
                elif current != names:
                    continue  # another op sequence (an algorithm switch): not pooled
                for index, ms in enumerate(times):
                    per_index[index].append(ms)
                transient = [max(a, b) for a, b in zip(transient, mode.transient)]
        label = {"precision": precision, "tf32": precision == "tf32", "case": case["name"]}
        total = 0.0
        for call, samples, held in zip(calls, per_index, transient):
            total += statistics.median(samples)
            key = _key(call) + label["precision"]
            entry, pooled = self.samples.setdefault(key, (dict(call, **label), []))
            pooled.extend(samples)
            if held:
                entry["transient_bytes"] = max(entry.get("transient_bytes", 0), held)
        return len(calls), total

    def document(self, gpu, versions, host):
        entries = []
        for entry, samples in self.samples.values():
            entries.append(dict(entry, median_ms=round(statistics.median(samples), 6),
                                spread_ms=round(_quartiles(samples), 6), repeats=len(samples)))
        return {
            "format": FORMAT,
            "version": VERSION,
            "complete": self.complete,
            "date": utc_now(),
            "gpu": gpu,
            **versions,
            "timer": self.timer.name,
            "tier": self.tier,
            "budget_s": self.budget_s,
            "elapsed_s": round(self.clock() - self.started, 1) if self.started is not None else 0.0,
            "host": host,
            "entries": entries,
            "skipped": self.skipped,
        }


def default_file_name(gpu_name):
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3.json'."""
    words = "".join(ch.lower() if ch.isalnum() else " " for ch in gpu_name).split()
    return "-".join(words or ["gpu"]) + ".json"


def write(document, path):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary = path + ".partial"
    with open(temporary, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")
    os.replace(temporary, path)  # a reader never sees half a file
    return path
