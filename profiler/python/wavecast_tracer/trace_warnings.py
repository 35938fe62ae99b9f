"""The trace's warnings as records (docs/trace-format.md "warnings"): a kind, a severity,
the line it is about and the facts involved. wavecast writes the sentences people read;
the tracer only states facts."""

# Every kind the tracer writes and its severity; wavecast's TraceWarningKind lists the same
# kinds (tests/trace/kind_tables_test.cpp checks both tables agree).
SEVERITY = {
    "old_torch": "warning",  # traced with torch `version`, older than the 2.x figures are checked on
    "cuda_traced_on_cpu": "info",  # shape and cpu mode ran the script's CUDA tensors on the CPU
    "torch_compile": "warning",  # compiled code: eager ops traced, priced as Inductor runs them
    "autocast_cpu_only": "warning",  # autocast("cpu") around GPU work: entered disabled
    "autocast_unsupported_dtype": "warning",  # CUDA autocast to a dtype torch refuses: `dtype`
    "autocast_other_device": "warning",  # autocast("xpu"...) casts no CUDA tensor: `device`
    "host_tensor_with_gpu": "warning",  # a CPU tensor meets GPU tensors; `origin`: where made
    "cupti_dropped": "warning",  # `count` activity records lost
    "kernels_outside_ops": "info",  # `count` kernels, `ms` per iteration, outside any op
    "repeat_skipped": "warning",  # measured repeat `repeat` (1-based) ran other ops
    "unsupported_distributed": "warning",  # torch.distributed `call` cannot run as one rank: skipped
    "call_stubbed": "info",  # a script run as written: `call` (torch.save, a logger) did nothing
    "unrepeated_work": "info",  # a script run as written: `count` lines worked before the recorded iteration only
    "cpu_only_script": "warning",  # a script run as written never asked for CUDA: it trains on the CPU
    "host_time_measured": "info",  # a script run as written: `ms` of data loading, on this CPU; `count`: its workers
    "traced_in_cpu_mode": "info",  # shape mode met an op needing values (`call`, `origin`): traced in cpu mode
    "partial_batch": "warning",  # a script run as written: the recorded step took a batch short of its loader's `count`
    "even_routing": "info",  # shapes from indices picked among `count` choices, spread evenly; `origin`: the pick
}


def warning(kind, file="", line=0, **facts):
    """One warning record; `facts` are the kind's documented fields."""
    record = {"kind": kind, "severity": SEVERITY[kind]}  # a misspelt kind fails here
    if file:
        record["file"] = file
        record["line"] = line
    record.update(facts)
    return record


def location(file, line):
    return {"file": file, "line": line}
