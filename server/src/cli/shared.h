// Steps several subcommands share: loading the GPU database, tracing a script.
#pragma once

#include "cli/command_line.h"
#include "install_layout.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/predictor.h"
#include "wavecast/profiler/profiler.h"
#include "wavecast/trace.h"

#include <optional>
#include <string>

namespace wavecast::cli {

// --python-env, which trace, predict and serve share.
OptionSpec pythonEnvOption();
// --verbose for trace and predict: torch's own log messages and a failed trace's
// Python traceback (serve's shows torch's messages in its log).
OptionSpec verboseOption();

// data/gpus.json plus the user's file (--gpu-file, else the layout's default if present).
GpuDatabase loadGpuDatabase(const InstallLayout& layout, const CommandLine& args);

// --tf32, --tf32-matmul and --tf32-conv: overrides of the script's precision.
std::vector<OptionSpec> precisionOptions();

// The predictor's options from the precision options and --roofline: the learned models of
// <data>/weights answer the ops they cover unless --roofline is given. Throws
// CommandError when the weights cannot be read.
PredictorOptions predictorOptions(const InstallLayout& layout, const CommandLine& args);

// Where the profiler finds its worker, the tracer and the default Python environment,
// and whether torch's log messages are shown (--verbose).
ProfilerOptions profilerOptions(const InstallLayout& layout, const CommandLine& args);

// Traces FILE.py in a worker, or reads a saved trace when `path` ends in .json.
// Throws CommandError with "file:line: message (hint)" for a script the worker
// could not trace.
Trace obtainTrace(const InstallLayout& layout, const std::string& path,
                  std::optional<int64_t> batchSize, const CommandLine& args);

} // namespace wavecast::cli
