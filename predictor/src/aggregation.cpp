#include "memory_estimate.h"
#include "wavecast/predictor/host_model.h"
#include "wavecast/predictor/prediction_stages.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace wavecast::stages {
namespace {

bool isHostBound(double gpuIdleMs, double wallMs, const HostOptions& options) {
  return wallMs > 0 && gpuIdleMs > options.hostBoundIdleShare * wallMs;
}

// The copies of host tensors to the GPU that hold the CPU until they are done, and what
// they add to the iteration on one GPU (not copies to the host: reading a result back has
// no page-locked, non-blocking fix).
advisory::HeldByCopies heldByCopies(const Trace& trace, const std::vector<OpCost>& costs,
                                    const IterationTimeline& timeline) {
  advisory::HeldByCopies copies;
  for (size_t i = 0; i < std::min({trace.ops.size(), costs.size(), timeline.ops.size()}); ++i) {
    const OpCost& cost = costs[i];
    if (cost.family != CostFamily::HostTransfer || cost.metadataOnly() ||
        cost.transfer.direction != TransferDirection::ToDevice ||
        !(cost.transfer.pageable || cost.transfer.blocking))
      continue;
    copies.copyMs += timeline.ops[i].wallMs;
    copies.bytes += static_cast<int64_t>(cost.bytes);
    copies.pageable = copies.pageable || cost.transfer.pageable;
    ++copies.count;
  }
  return copies;
}

// The mode of the iteration's compiled code, one with CUDA graphs first; nullopt when none
// is compiled.
std::optional<CompileMode> compiledMode(const Trace& trace) {
  std::optional<CompileMode> mode;
  for (const OpRecord& op : trace.ops)
    if (op.compiled && (!mode || usesCudaGraphs(*op.compiled)))
      mode = op.compiled;
  return mode;
}

void finishSpan(LineTimes& times, double iterationMs, const HostOptions& options) {
  times.shareOfIteration = iterationMs > 0 ? times.totalMs() / iterationMs : 0;
  times.hostBound = isHostBound(times.gpuIdleMs, times.totalMs(), options);
}

struct LineKey {
  std::string file;
  int line = 0;
  bool operator<(const LineKey& other) const {
    return file != other.file ? file < other.file : line < other.line;
  }
};

// `input`: the op is the loop taking a batch (loadsBatch), before the forward pass and no
// part of it.
void addTime(LineTimes& times, Phase phase, bool input, const OpPrediction& op,
             const OpCost& cost) {
  if (op.family == CostFamily::Collective) {
    times.commMs += op.timeMs;
    times.commHiddenMs += op.commHiddenMs;
    auto part = std::find_if(times.communication.begin(), times.communication.end(),
                             [&](const CommunicationPart& p) {
                               return p.kind == cost.collective.kind && p.phase == phase;
                             });
    if (part == times.communication.end())
      part = times.communication.insert(times.communication.end(),
                                        CommunicationPart{cost.collective.kind, phase, 0, 0});
    part->ms += op.timeMs;
    part->hiddenMs += op.commHiddenMs;
  } else {
    times.gpuMs += op.timeMs;
  }
  times.gpuIdleMs += op.gpuIdleMs;
  const double ms = op.wallMs;
  if (input) {
    times.inputMs += ms;
    return;
  }
  switch (phase) {
  case Phase::Forward:
    times.forwardMs += ms;
    break;
  case Phase::Backward:
    times.backwardMs += ms;
    break;
  case Phase::Optimizer:
    times.optimizerMs += ms;
    break;
  }
}

} // namespace

void aggregate(const Trace& trace, const std::vector<OpCost>& costs, Prediction& prediction) {
  const size_t opCount = trace.ops.size();
  const size_t gpuCount = prediction.gpus.size();
  const bool traced = trace.memory.peakLiveBytes.has_value();
  const bool training = hasBackward(trace);
  std::map<LineKey, size_t> lineIndex;
  std::unordered_map<std::string, size_t> moduleIndex;
  std::vector<std::vector<std::string>> otherOpNames; // per line: backward/optimizer op names
  for (size_t i = 0; i < opCount; ++i) {
    const OpRecord& op = trace.ops[i];
    const bool work = !costs[i].metadataOnly();
    const LineKey key{op.loc.valid() ? op.loc.file : std::string(),
                      op.loc.valid() ? op.loc.line : 0};
    auto [lineIt, newLine] = lineIndex.emplace(key, prediction.lines.size());
    if (newLine) {
      LineBreakdown line;
      line.loc = op.loc.valid() ? op.loc : SourceLocation{};
      line.perGpu.resize(gpuCount);
      prediction.lines.push_back(std::move(line));
    }
    LineBreakdown& line = prediction.lines[lineIt->second];
    if (newLine)
      otherOpNames.emplace_back();
    line.activationBytes +=
        traced ? op.savedBytes.value_or(0) : (training ? upperBoundKeptBytes(op, costs[i]) : 0);
    if (work) {
      ++line.opCount;
      auto& names = op.phase == Phase::Forward ? line.opNames : otherOpNames[lineIt->second];
      if (std::find(names.begin(), names.end(), op.name) == names.end())
        names.push_back(op.name);
    }
    auto [moduleIt, newModule] = moduleIndex.emplace(op.module, prediction.modules.size());
    if (newModule) {
      ModuleBreakdown module;
      module.module = op.module;
      module.perGpu.resize(gpuCount);
      prediction.modules.push_back(std::move(module));
    }
    ModuleBreakdown& module = prediction.modules[moduleIt->second];
    if (work)
      ++module.opCount;
    const bool input = loadsBatch(op);
    for (size_t g = 0; g < gpuCount; ++g) {
      const OpPrediction& p = prediction.ops[g][i];
      addTime(line.perGpu[g], op.phase, input, p, costs[i]);
      addTime(module.perGpu[g], op.phase, input, p, costs[i]);
    }
  }
  // A line with no forward op (the optimizer.step() line) lists its other ops.
  for (size_t l = 0; l < prediction.lines.size(); ++l)
    if (prediction.lines[l].opNames.empty())
      prediction.lines[l].opNames = otherOpNames[l];
}

void summarize(const Trace& trace, const std::vector<OpCost>& costs,
               const std::vector<DeviceSpec>& gpus, const HostTimelines& host,
               const std::vector<GpuMethods>& methods, const PredictorOptions& options,
               Prediction& prediction) {
  const auto& timelines = host.timelines;
  const size_t gpuCount = gpus.size();
  const TensorMemory tensors = tensorMemory(trace, costs, options);
  const std::optional<CompileMode> compiled = compiledMode(trace);
  for (size_t g = 0; g < gpuCount; ++g) {
    GpuSummary summary;
    summary.gpuId = gpus[g].id;
    summary.gpuName = gpus[g].name;
    summary.methods = methods[g];
    for (const auto& line : prediction.lines) {
      summary.inputMs += line.perGpu[g].inputMs;
      summary.forwardMs += line.perGpu[g].forwardMs;
      summary.backwardMs += line.perGpu[g].backwardMs;
      summary.optimizerMs += line.perGpu[g].optimizerMs;
    }
    summary.iterationMs =
        summary.inputMs + summary.forwardMs + summary.backwardMs + summary.optimizerMs;
    summary.gpuMs = timelines[g].gpuMs;
    summary.hostMs = timelines[g].hostMs;
    summary.gpuIdleMs = timelines[g].gpuIdleMs;
    summary.commMs = timelines[g].commMs;
    summary.commHiddenMs = timelines[g].commHiddenMs;
    // The GPU idling while the loop waits for its batches is no issuing cost: host-bound
    // or not is the rest of the iteration's.
    summary.hostBound = isHostBound(summary.gpuIdleMs - summary.inputMs,
                                    summary.iterationMs - summary.inputMs, options.host);
    summary.pricePerHourUsd = gpus[g].pricePerHourUsd;
    if (summary.iterationMs > 0 && trace.samples() > 0) {
      summary.samplesPerSecond = trace.samples() / (summary.iterationMs * 1e-3);
      summary.costPer1kSamplesUsd =
          summary.pricePerHourUsd / 3600.0 * (1000.0 / summary.samplesPerSecond);
    }
    summary.memory = onGpu(tensors, trace, costs, gpus[g], calibrationFor(gpus[g], options), options);
    summary.memoryCapacityBytes = gpus[g].memoryBytes();
    summary.fitsInMemory = summary.memory.peakBytes() <= summary.memoryCapacityBytes;
    for (auto& line : prediction.lines)
      finishSpan(line.perGpu[g], summary.iterationMs, options.host);
    for (auto& module : prediction.modules)
      finishSpan(module.perGpu[g], summary.iterationMs, options.host);
    if (summary.hostBound)
      prediction.advisories.push_back({advisory::HostBound{
          summary.gpuId, summary.gpuIdleMs, summary.iterationMs, summary.gpuMs, compiled}});
    if (timelines[g].loaderWaitMs > 0)
      prediction.advisories.push_back(
          {advisory::InputBound{summary.gpuId, timelines[g].loaderWaitMs, summary.iterationMs,
                                timelines[g].loaderMs, timelines[g].loaderWorkers}});
    else if (summary.inputMs > options.host.inputBoundShare * summary.iterationMs)
      prediction.advisories.push_back({advisory::InputBound{
          summary.gpuId, summary.inputMs, summary.iterationMs, summary.inputMs, 0}});
    if (auto copies = heldByCopies(trace, costs, timelines[g]);
        copies.copyMs > options.host.heldCopiesShare * summary.iterationMs) {
      copies.gpu = summary.gpuId;
      copies.iterationMs = summary.iterationMs;
      prediction.advisories.push_back({std::move(copies)});
    }
    if (!summary.fitsInMemory)
      prediction.advisories.push_back({advisory::OutOfMemory{
          summary.gpuId, summary.memory.peakBytes(), summary.memoryCapacityBytes,
          summary.memory.activationsSource == ActivationsSource::UpperBound}});
    prediction.summaries.push_back(std::move(summary));
  }
}

} // namespace wavecast::stages
