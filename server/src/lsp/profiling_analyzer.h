// The real Analyzer: traces the script in a worker (Profiler), then predicts
// it on the target GPUs (Predictor).
#pragma once

#include "lsp/analyzer.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/predictor.h"
#include "wavecast/profiler/profiler.h"
#include "wavecast/profiler/trace_store.h"

#include <map>
#include <memory>
#include <mutex>

namespace wavecast::lsp {

struct ProfilingAnalyzerOptions {
  ProfilerOptions profiler; // its `progress` and `pythonEnv` are set per analysis
  PredictorOptions predictor;
  std::vector<std::string> defaultTargets; // names; resolved against the database
  std::chrono::milliseconds timeout{120000};
  // Where traces are kept between runs (trace_store.h); nullptr keeps none.
  std::shared_ptr<TraceStore> traceStore;
};

class ProfilingAnalyzer : public Analyzer {
public:
  ProfilingAnalyzer(GpuDatabase database, ProfilingAnalyzerOptions options);

  AnalysisOutcome analyze(const AnalysisRequest& request, const ProgressCallback& progress,
                          const CancelToken& cancel) override;
  const std::vector<DeviceSpec>& gpus() const override { return database_.all(); }
  std::vector<std::string> resolveTargets(const std::vector<std::string>& names) const override;
  std::vector<std::string> defaultTargets() const override { return defaultTargets_; }
  // Starts the worker for `pythonEnv` now, so the first save finds torch imported.
  void prepare(const std::string& pythonEnv) override;
  bool storesTraces() const override { return options_.traceStore != nullptr; }
  std::vector<LayoutTarget>
  resolveLayouts(const std::vector<protocol::ParallelTargetSetting>& targets) const override;

private:
  // A trace and, when it came from the store, when the worker recorded it.
  struct StoredOrTraced {
    std::shared_ptr<const Trace> trace;
    std::optional<std::chrono::system_clock::time_point> recorded;
  };
  using Obtained = std::variant<StoredOrTraced, ProfileError>;
  // The script traced at one microbatch's batch, by that batch (null where it failed).
  using MicrobatchTraces = std::map<int64_t, std::shared_ptr<const Trace>>;

  // The prediction of `trace` for `request` (what analyze returns once it has its traces).
  AnalysisOutcome predict(const AnalysisRequest& request, const Trace& trace,
                          const MicrobatchTraces& microbatches,
                          const ProgressCallback& progress) const;
  // The profiler for `pythonEnv`, replacing one for another environment; holds mutex_.
  std::shared_ptr<Profiler> profilerForLocked(const std::string& pythonEnv);

  GpuDatabase database_;
  ProfilingAnalyzerOptions options_;
  std::vector<std::string> defaultTargets_;
  std::mutex
      mutex_; // guards profiler_ (replaced when the Python environment changes) and progress_
  std::shared_ptr<Profiler> profiler_;
  std::string profilerEnv_;
  ProgressCallback progress_;
};

} // namespace wavecast::lsp
