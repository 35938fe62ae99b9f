#include "wavecast/predictor/predictor.h"

#include "wavecast/predictor/prediction_stages.h"

#include <algorithm>

namespace wavecast {

std::optional<SystemSpec> PredictorOptions::systemFor(const DeviceSpec& gpu) const {
  if (const auto it = systems.find(gpu.id); it != systems.end())
    return it->second;
  if (systemDatabase)
    return systemDatabase->defaultFor(gpu.id);
  return std::nullopt;
}

Predictor::Predictor(PredictorOptions options) : options_(std::move(options)) {}

Prediction Predictor::predict(const Trace& trace, const std::vector<DeviceSpec>& gpus) const {
  using namespace stages;
  Prediction prediction;
  prediction.batchSize = trace.batchSize;
  prediction.samplesPerIteration = trace.samples();
  for (const auto& gpu : gpus)
    prediction.gpus.push_back(gpu.id);

  CostedOps costed = costOps(trace, effectivePrecision(trace, options_));
  prediction.opInfo = std::move(costed.info);
  prediction.precisions = familyPrecisions(costed.costs);
  prediction.routedExperts = routedExperts(costed.costs);
  const MeasuredKernels kernels = useMeasuredKernels(trace, gpus, options_, costed.costs);
  const auto learned = askLearnedModel(trace, costed.costs, gpus, kernels, options_);
  OpTimes times = timeOps(trace, costed.costs, gpus, kernels, learned, options_);
  const HostTimelines host = playIterations(trace, costed.costs, gpus, options_, times);
  for (size_t i = 0; i < prediction.opInfo.size(); ++i)
    prediction.opInfo[i].hostMs = host.hostMs[i];
  prediction.ops = std::move(times.ops);
  for (const GpuMethods& methods : times.methods)
    if (methods.uses(PredictionMethod::Learned))
      prediction.learnedModel = options_.opTimeModel->name();

  // Advisories about the whole prediction first, then those per GPU (summarize).
  prediction.advisories = kernels.advisories;
  for (Advisory& advisory : times.advisories)
    prediction.advisories.push_back(std::move(advisory));
  for (Advisory& advisory : attentionSubstitutions(costed.costs, gpus))
    prediction.advisories.push_back(std::move(advisory));
  for (advisory::ApproximateOp& op : costed.approximate)
    prediction.advisories.push_back({std::move(op)});

  aggregate(trace, costed.costs, prediction);
  summarize(trace, costed.costs, gpus, host, times.methods, options_, prediction);
  if (options_.compareCompiledWithEager &&
      std::any_of(trace.ops.begin(), trace.ops.end(),
                  [](const OpRecord& op) { return op.compiled.has_value(); })) {
    // What compiling changes: the same ops, unmarked, predicted eagerly.
    Trace eager = trace;
    for (OpRecord& op : eager.ops)
      op.compiled.reset();
    const Prediction asEager = predict(eager, gpus);
    for (size_t g = 0; g < std::min(prediction.summaries.size(), asEager.summaries.size()); ++g) {
      const GpuSummary& compiled = prediction.summaries[g];
      const GpuSummary& uncompiled = asEager.summaries[g];
      prediction.advisories.push_back({advisory::CompiledAgainstEager{
          compiled.gpuId, compiled.iterationMs, uncompiled.iterationMs,
          compiled.memory.allocatedPeakBytes(), uncompiled.memory.allocatedPeakBytes()}});
    }
  }
  std::sort(prediction.lines.begin(), prediction.lines.end(),
            [](const LineBreakdown& a, const LineBreakdown& b) {
              return a.loc.file != b.loc.file ? a.loc.file < b.loc.file : a.loc.line < b.loc.line;
            });
  std::sort(prediction.modules.begin(), prediction.modules.end(),
            [](const ModuleBreakdown& a, const ModuleBreakdown& b) { return a.module < b.module; });
  return prediction;
}

} // namespace wavecast
