#!/usr/bin/env python3
"""Records, on a GPU, the memory each op holds only while it runs: the caching allocator's
peak during the op above what is allocated once it has returned (its outputs kept). For a
convolution that is cuDNN's workspace, for a GEMM cuBLAS's (first call only: cached after),
for a composite op its temporaries. torch.cuda.max_memory_allocated() counts all of it
and shape tracing sees none of it, so the peak memory of convolution-heavy runs (DCGAN, the
small CNN) is under-predicted by what this measures.

For each SAMPLE:BATCH[,BATCH...] and precision (FP32 as written, bf16 autocast) it runs the
sample's iteration on the GPU (record.py's way), warms it up, then runs one iteration under
a dispatch mode that reads the allocator's statistics around every op, and writes every op
that held memory transiently (name, phase, inputs as a trace records them, bytes), with the
iteration's peak allocated bytes.

    python3 bench/truth/workspace.py OUT.json samples/dcgan.py:32,128 samples/small_cnn.py:64
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402 - the truth's way of running a sample

WARMUP = 2


def transient_ops(step, inputs, autocast):
    """One iteration, every op whose transient memory is above zero."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from wavecast_tracer import compat
    from wavecast_tracer.calibrate.timing import CudaMemory
    from wavecast_tracer.op_description import describe_call

    seen = []
    memory = CudaMemory()  # what `wavecast calibrate` reads around each op

    class Transient(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            before = memory.memory_mark()
            out = func(*args, **kwargs)
            held = memory.transient_bytes(before)
            if held:
                name = compat.op_name(func)
                described, op_args = describe_call(func, name, args, kwargs)
                seen.append({"name": name, "backward": torch._C._current_graph_task_id() != -1,
                             "inputs": described, "args": op_args, "transient_bytes": held,
                             "output_bytes": max(0, torch.cuda.memory_allocated() - before)})
            return out

    run = record.in_precision(step, autocast)
    for _ in range(WARMUP):
        run(*inputs)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    with Transient():
        run(*inputs)
    torch.cuda.synchronize()
    return seen


def record_run(path, batch):
    import torch

    run = {"batch_size": batch}
    for key, autocast in (("fp32_default", False), ("bf16_autocast", True)):
        record.release_memory()
        try:
            model, inputs, step = record.prepare(path, batch)
            run[key] = {"ops": transient_ops(step, inputs, autocast)}
            del model, inputs, step
        except Exception as error:  # noqa: B902 - BCELoss refuses autocast: recorded, not fatal
            run[key] = {"error": f"{type(error).__name__}: {error}"}
    torch.cuda.empty_cache()
    return run


def main(argv=None):
    options = record.gpu_tool_options(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                                      argv)
    out = dict(record.versions(), samples={})
    for key, path, batch in record.each_run(options.runs, options.root):
        started = time.perf_counter()
        out["samples"][key] = record_run(path, batch)
        print(f"workspace.py: {key} ({time.perf_counter() - started:.1f} s)", file=sys.stderr)
        record.write_whole(out, options.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
