// What the language server needs from the profiler and predictor, behind an
// interface so the server's logic is testable without a Python worker.
#pragma once

#include "wavecast/predictor/device_spec.h"
#include "wavecast/predictor/parallel_config.h"
#include "wavecast/predictor/prediction.h"
#include "wavecast/profiler/trace_job.h"
#include "wavecast/protocol/wavecast.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace wavecast::lsp {

// A multi-GPU target of the settings (`parallelTargets`), resolved: its GPU, node and layout.
struct LayoutTarget {
  std::string gpu;    // canonical GPU id
  std::string system; // data/systems.json's id
  ParallelConfig config;
  std::string words; // the layout's canonical words: with gpu and system, its identity
  bool operator==(const LayoutTarget& other) const {
    return gpu == other.gpu && system == other.system && words == other.words;
  }
  bool operator!=(const LayoutTarget& other) const { return !(*this == other); }
};

// A layout predicted for the script: its figures and one rank's lines (the first stage's),
// which hover shows beside the GPUs' (docs/parallel.md).
struct LayoutOutput {
  LayoutTarget target;
  ParallelSummary summary;
  std::vector<LineBreakdown> lines;
};

// Where an analysis may take its trace from.
enum class TraceSource {
  Worker,        // trace the script now
  StoreOrWorker, // a trace stored by an earlier run of the daemon, when one is still valid
  Store,         // only a stored trace: without one the analysis fails (Cancelled), quietly
};

struct AnalysisRequest {
  std::string file; // absolute path of the script defining the providers
  std::optional<int64_t> batchSize;
  std::vector<std::string> targets; // canonical GPU ids
  std::string pythonEnv;
  TraceMode mode = TraceMode::Shape;     // Cuda: measured on this machine's GPU
  std::vector<std::string> scriptArgs{}; // sys.argv[1:] of a script run as written
  std::string workingDirectory{};        // where it runs from; empty: the script's folder
  std::vector<LayoutTarget> layouts{};   // multi-GPU targets, predicted beside the GPUs
  std::optional<int> worldSize{};        // a torch.distributed script's launch (default 8)
  std::optional<CompileMode> compile{};  // traced as if compiled in this mode; else as written
  TraceSource traceSource = TraceSource::Worker;
};

struct AnalysisOutput {
  Prediction prediction;
  TraceMode traceMode = TraceMode::Shape;
  std::vector<std::string> fallbackOps;  // ops the trace ran without a meta kernel
  std::map<Provider, int> providerLines; // 1-based line of each provider's def
  std::string entryFile;
  std::string torchVersion;             // the torch that traced it
  std::string pythonEnv;                // its venv, or "system"
  std::vector<std::string> sourceFiles; // project files the iteration ran code from
  // The trace's warnings; those about a line (e.g. a CPU tensor mixed with GPU tensors)
  // become diagnostics on that line.
  std::vector<TraceWarning> traceWarnings;
  std::vector<LayoutOutput> layouts;     // the request's layouts the model can run
  std::vector<ParallelRefusal> refusals; // and those it cannot
  // Set when the trace came from the store: when the worker traced it, in an earlier run.
  std::optional<std::chrono::system_clock::time_point> storedTraceRecorded;
};

using AnalysisOutcome = std::variant<AnalysisOutput, ProfileError>;
using ProgressCallback = std::function<void(const std::string& message)>;

// A multi-GPU target the settings cannot name: its words, GPU or system are unknown.
class UnknownTargetError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A GPU name the database does not know; `suggestions` are close known ids.
class UnknownGpuError : public std::runtime_error {
public:
  UnknownGpuError(const std::string& message, std::vector<std::string> suggestions)
      : std::runtime_error(message), suggestions_(std::move(suggestions)) {}
  const std::vector<std::string>& suggestions() const { return suggestions_; }

private:
  std::vector<std::string> suggestions_;
};

class Analyzer {
public:
  virtual ~Analyzer() = default;
  // Blocks the calling (analysis) thread; `progress` may be called from it.
  // Once `cancel` is cancelled, from any thread and even before this call
  // begins, it returns a "cancelled" error soon.
  virtual AnalysisOutcome analyze(const AnalysisRequest& request, const ProgressCallback& progress,
                                  const CancelToken& cancel) = 0;
  virtual const std::vector<DeviceSpec>& gpus() const = 0;
  // Canonical ids for user-given names; throws UnknownGpuError.
  virtual std::vector<std::string> resolveTargets(const std::vector<std::string>& names) const = 0;
  virtual std::vector<std::string> defaultTargets() const = 0;
  // Called when the settings are known or change: gets ready for analyses with this
  // Python environment (the real analyzer starts its worker) without blocking.
  virtual void prepare(const std::string& pythonEnv) { (void)pythonEnv; }
  // Whether it keeps traces between runs (TraceSource::Store can find one).
  virtual bool storesTraces() const { return false; }

  // The settings' multi-GPU targets through the one layout parser and the GPU and system
  // databases; throws UnknownTargetError or UnknownGpuError naming the first it cannot read.
  virtual std::vector<LayoutTarget>
  resolveLayouts(const std::vector<protocol::ParallelTargetSetting>& targets) const = 0;
};

} // namespace wavecast::lsp
