// Steps several subcommands share: loading the GPU database, tracing a script.
#pragma once

#include "cli/command_line.h"
#include "cli/terminal.h"
#include "install_layout.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/predictor.h"
#include "wavecast/profiler/profiler.h"
#include "wavecast/trace.h"

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace wavecast::cli {

// --python-env, which trace, predict and serve share.
OptionSpec pythonEnvOption();
// --world-size: the launch a torch.distributed script is traced as rank 0 of.
OptionSpec worldSizeOption();
// --compile MODE: the iteration's modules as if passed through torch.compile.
OptionSpec compileOption();
// --verbose for trace and predict: torch's own log messages and a failed trace's
// Python traceback (serve's shows torch's messages in its log).
OptionSpec verboseOption();

// data/gpus.json plus the user's file (--gpu-file, else the layout's default if present).
GpuDatabase loadGpuDatabase(const InstallLayout& layout, const CommandLine& args);

// --calibration FILE (repeatable) and --no-calibration, which predict and serve share.
OptionSpec calibrationOption();
OptionSpec noCalibrationOption();

// The calibration files predictions use, by the GPU id each is for (resolved through
// `database` from the GPU name torch wrote): --calibration files first, then the user's
// folder, then <data>/calibration; the first file for a GPU is the one used. A file for a
// GPU the database does not know is skipped with a note on stderr. Throws CommandError
// naming the file and field of a malformed one.
std::map<std::string, std::shared_ptr<const CalibrationTable>>
loadCalibrations(const InstallLayout& layout, const CommandLine& args, const GpuDatabase& database);

// --tf32, --tf32-matmul and --tf32-conv: overrides of the script's precision.
std::vector<OptionSpec> precisionOptions();

// The predictor's options from the precision options and --roofline: the learned models of
// <data>/weights answer the ops they cover unless --roofline is given; the calibration
// files (loadCalibrations) time the ops they measured. Throws CommandError when the
// weights or a calibration file cannot be read.
PredictorOptions predictorOptions(const InstallLayout& layout, const CommandLine& args,
                                  const GpuDatabase& database);

// Where the profiler finds its worker, the tracer and the default Python environment,
// and whether torch's log messages are shown (--verbose).
ProfilerOptions profilerOptions(const InstallLayout& layout, const CommandLine& args);

// Traces FILE.py in a worker, or reads a saved trace when `path` ends in .json.
// Throws CommandError with "file:line: message (hint)" for a script the worker
// could not trace.
// `firstTarget`: the GPU a script run as written sees through torch.cuda (nullptr: the
// worker's default); the words after "--" are its arguments. One worker serves every
// trace of a ScriptTracer, so a second trace (another batch) imports torch no second time.
class ScriptTracer {
public:
  ScriptTracer(const InstallLayout& layout, const CommandLine& args)
      : layout_(layout), args_(args) {}
  ScriptTracer(const ScriptTracer&) = delete; // the worker's progress callback holds `this`
  ScriptTracer& operator=(const ScriptTracer&) = delete;
  Trace trace(const std::string& path, std::optional<int64_t> batchSize,
              const DeviceSpec* firstTarget = nullptr);

private:
  const InstallLayout& layout_;
  const CommandLine& args_;
  ProgressLine progress_;
  std::unique_ptr<Profiler> profiler_; // started by the first script traced
};

// One trace with a ScriptTracer of its own.
Trace obtainTrace(const InstallLayout& layout, const std::string& path,
                  std::optional<int64_t> batchSize, const CommandLine& args,
                  const DeviceSpec* firstTarget = nullptr);

} // namespace wavecast::cli
