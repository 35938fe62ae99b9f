#include "lsp/profiling_analyzer.h"

#include "lsp/files.h"
#include "presentation.h"
#include "script_device.h"
#include "wavecast/predictor/measured_trace.h"
#include "wavecast/predictor/parallel.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace wavecast::lsp {

ProfilingAnalyzer::ProfilingAnalyzer(GpuDatabase database, ProfilingAnalyzerOptions options)
    : database_(std::move(database)), options_(std::move(options)) {
  defaultTargets_ = resolveTargets(options_.defaultTargets);
}

std::vector<std::string>
ProfilingAnalyzer::resolveTargets(const std::vector<std::string>& names) const {
  std::vector<std::string> ids;
  for (const auto& name : names) {
    std::vector<DeviceSpec> specs;
    try {
      specs = database_.resolve({name});
    } catch (const GpuDatabaseError& error) {
      // The database's message; the suggestions again as data, for clients to offer.
      throw UnknownGpuError(error.what(), database_.suggestions(name));
    }
    for (const auto& spec : specs)
      if (std::find(ids.begin(), ids.end(), spec.id) == ids.end())
        ids.push_back(spec.id);
  }
  return ids;
}

std::shared_ptr<Profiler> ProfilingAnalyzer::profilerForLocked(const std::string& pythonEnv) {
  if (!profiler_ || profilerEnv_ != pythonEnv) {
    ProfilerOptions options = options_.profiler;
    options.pythonEnv = pythonEnv;
    options.progress = [this](const std::string& message) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (progress_)
        progress_(message);
    };
    profiler_ = std::make_shared<Profiler>(options);
    profilerEnv_ = pythonEnv;
  }
  return profiler_;
}

void ProfilingAnalyzer::prepare(const std::string& pythonEnv) {
  std::shared_ptr<Profiler> profiler;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    profiler = profilerForLocked(pythonEnv);
  }
  profiler->prestart();
}

std::vector<LayoutTarget> ProfilingAnalyzer::resolveLayouts(
    const std::vector<protocol::ParallelTargetSetting>& targets) const {
  std::vector<LayoutTarget> out;
  for (const auto& setting : targets) {
    const auto parsed = parseParallelTarget(setting.target);
    if (const auto* problem = std::get_if<TargetTextProblem>(&parsed))
      throw UnknownTargetError(targetTextProblemMessage(setting.target, *problem));
    const auto& target = std::get<ParallelTarget>(parsed);
    if (target.gpu.empty())
      throw UnknownTargetError("the target '" + setting.target +
                               "' names no GPU: begin it with the count and the GPU, e.g. "
                               "\"8x H100-SXM, FSDP\"");
    LayoutTarget layout;
    layout.gpu = resolveTargets({target.gpu}).front();
    const auto& systems = options_.predictor.systemDatabase;
    if (!systems)
      throw UnknownTargetError("no systems database (data/systems.json) for the target '" +
                               setting.target + "'");
    if (setting.system.empty()) {
      layout.system = systems->defaultFor(layout.gpu).id;
    } else if (const SystemSpec* system = systems->find(setting.system)) {
      layout.system = system->id;
    } else {
      std::string message = "unknown system '" + setting.system + "'";
      const auto close = systems->suggestions(setting.system);
      for (size_t i = 0; i < close.size(); ++i)
        message += (i ? ", " : "; did you mean ") + close[i];
      throw UnknownTargetError(message + (close.empty() ? "" : "?") +
                               " (data/systems.json lists them; docs/systems.md)");
    }
    layout.config = target.config;
    layout.words = parallelConfigText(target.config);
    out.push_back(std::move(layout));
  }
  return out;
}

AnalysisOutcome ProfilingAnalyzer::analyze(const AnalysisRequest& request,
                                           const ProgressCallback& progress,
                                           const CancelToken& cancel) {
  std::shared_ptr<Profiler> profiler;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    progress_ = progress;
    profiler = profilerForLocked(request.pythonEnv);
  }
  TraceRequest traceRequest;
  traceRequest.file = request.file;
  traceRequest.batchSize = request.batchSize;
  traceRequest.mode = request.mode;
  traceRequest.timeout = options_.timeout;
  traceRequest.worldSize = request.worldSize;
  traceRequest.scriptArgs = request.scriptArgs;
  traceRequest.workingDirectory = request.workingDirectory;
  traceRequest.compile = request.compile;
  if (!request.targets.empty())
    if (const DeviceSpec* first = database_.find(request.targets.front()))
      traceRequest.device = scriptDevice(*first);

  // The entry as it is now: the store's key, and what a new trace is stored under.
  TraceStore* store = options_.traceStore.get();
  const std::string entryText = store ? readFile(request.file).value_or("") : std::string();
  // The environment the worker imports from, the installation's when none is chosen.
  const std::string& environment =
      request.pythonEnv.empty() ? options_.profiler.defaultPythonEnv : request.pythonEnv;
  // The script at `batchSize` (nullopt: its own batch): from the store unless the request
  // asks for a fresh trace, else from the worker unless it asks for stored ones only.
  const auto obtain = [&](std::optional<int64_t> batchSize) -> Obtained {
    TraceRequest at = traceRequest;
    at.batchSize = batchSize ? batchSize : traceRequest.batchSize;
    const std::string key = store ? TraceStore::key(at, environment, entryText) : std::string();
    if (store && request.traceSource != TraceSource::Worker)
      if (auto stored = store->load(key))
        return StoredOrTraced{std::make_shared<const Trace>(std::move(stored->trace)),
                              stored->recorded};
    if (request.traceSource == TraceSource::Store) {
      ProfileError none;
      none.kind = ProfileErrorKind::Cancelled;
      none.message = "no stored trace of " + request.file;
      none.file = request.file;
      return none;
    }
    TraceResult traced = profiler->trace(at, cancel);
    if (auto* error = std::get_if<ProfileError>(&traced))
      return *error;
    auto trace = std::make_shared<const Trace>(std::move(std::get<Trace>(traced)));
    if (store)
      store->saveLater(key, trace, request.file, entryText);
    return StoredOrTraced{std::move(trace), std::nullopt};
  };

  Obtained whole = obtain(std::nullopt);
  if (auto* error = std::get_if<ProfileError>(&whole))
    return *error;
  const auto& [trace, recorded] = std::get<StoredOrTraced>(whole);

  // One microbatch's trace per batch the layouts split into, so that their microbatches are
  // priced at their own shapes as the CLI prices them (predictParallel).
  MicrobatchTraces microbatches;
  for (const auto& layout : request.layouts) {
    const std::optional<int64_t> batch = microbatchBatchSize(*trace, layout.config);
    if (!batch || microbatches.count(*batch))
      continue;
    if (progress)
      progress("tracing one microbatch (batch " + std::to_string(*batch) + ")");
    Obtained part = obtain(*batch);
    if (auto* error = std::get_if<ProfileError>(&part)) {
      if (cancel.cancelled())
        return *error;
      // Priced as shares of the whole batch's ops then (the layout says so); when only
      // stored traces are asked for, one not stored is no failure.
      if (progress && request.traceSource != TraceSource::Store)
        progress("tracing one microbatch (batch " + std::to_string(*batch) +
                 ") failed: " + error->message);
      microbatches[*batch] = nullptr;
      continue;
    }
    microbatches[*batch] = std::get<StoredOrTraced>(part).trace;
  }

  AnalysisOutcome outcome = predict(request, *trace, microbatches, progress);
  if (auto* output = std::get_if<AnalysisOutput>(&outcome))
    output->storedTraceRecorded = recorded;
  return outcome;
}

AnalysisOutcome ProfilingAnalyzer::predict(const AnalysisRequest& request, const Trace& trace,
                                           const MicrobatchTraces& microbatches,
                                           const ProgressCallback& progress) const {
  try {
    if (progress)
      progress("predicting " + std::to_string(trace.ops.size()) + " ops on " +
               std::to_string(request.targets.size()) + " GPUs");
    std::vector<DeviceSpec> devices;
    for (const auto& id : request.targets)
      if (const DeviceSpec* spec = database_.find(id))
        devices.push_back(*spec);
    AnalysisOutput output;
    // A measured trace is the measurements on its own GPU and scaled to the others.
    PredictorOptions predictorOptions = options_.predictor;
    predictorOptions.originGpu = measuredOrigin(trace, database_);
    if (!request.layouts.empty()) {
      const ModelStructure model = analyzeModel(trace);
      for (const auto& layout : request.layouts) {
        const DeviceSpec* gpu = database_.find(layout.gpu);
        const SystemSpec* system = predictorOptions.systemDatabase
                                       ? predictorOptions.systemDatabase->find(layout.system)
                                       : nullptr;
        if (!gpu || !system)
          continue; // resolved against these databases: cannot happen
        const Trace* microbatch = nullptr;
        if (const auto batch = microbatchBatchSize(trace, layout.config))
          if (auto found = microbatches.find(*batch); found != microbatches.end())
            microbatch = found->second.get();
        auto outcome = predictParallel(trace, model, layout.config, *gpu, *system, predictorOptions,
                                       microbatch);
        if (outcome.problem)
          output.refusals.push_back({layout.config, layout.gpu, layout.system, *outcome.problem});
        else
          output.layouts.push_back({layout, std::move(outcome.prediction->summary),
                                    std::move(outcome.prediction->rank.lines)});
      }
    }
    output.prediction = Predictor(std::move(predictorOptions)).predict(trace, devices);
    output.providerLines = trace.providerLines;
    output.entryFile = trace.entryFile.empty() ? request.file : trace.entryFile;
    output.torchVersion = trace.torchVersion;
    output.pythonEnv = trace.pythonEnv;
    output.traceWarnings = trace.warnings;
    output.traceMode = trace.mode;
    output.fallbackOps = trace.fallbackOps;
    output.sourceFiles = traceSourceFiles(trace, output.entryFile);
    return output;
  } catch (const std::exception& error) {
    ProfileError failure;
    failure.kind = ProfileErrorKind::Internal;
    failure.message = std::string("prediction failed: ") + error.what();
    failure.file = request.file;
    failure.hint = "This is a wavecast bug; please report it with the script.";
    return failure;
  }
}

} // namespace wavecast::lsp
