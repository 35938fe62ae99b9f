#include "wavecast/predictor/predictor.h"

#include "memory_estimate.h"
#include "wavecast/predictor/measured_trace.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/predictor/wave_scaling.h"

#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <unordered_map>

namespace wavecast {
namespace {

// Wave-scales the measured kernels of `op` from the origin to `gpu` (0 without kernels:
// the op ran no GPU work where it was measured).
double waveScaledOpMs(const OpRecord& op, const OpCost& cost, const DeviceSpec& origin,
                      const DeviceSpec& gpu, std::string& problem) {
  // Eq. 3 needs the kernel's arithmetic intensity; without hardware counters the
  // op's analytic FLOPs/bytes stand in for every kernel of the op.
  const double intensity = cost.bytes > 0 ? cost.flops / cost.bytes : -1;
  const double ridge = peakTflops(gpu, cost) * 1e12 / (gpu.memoryBandwidthGBs * 1e9);
  const double gamma = waveScalingGamma(intensity, ridge);
  double total = 0;
  for (const auto& kernel : op.kernels) {
    const WaveScaledKernel scaled = waveScaleKernel(kernel, origin, gpu, gamma);
    if (!scaled.problem.empty())
      problem = scaled.problem;
    total += scaled.timeMs;
  }
  return total;
}

double measuredOpMs(const OpRecord& op) {
  double total = 0;
  for (const auto& kernel : op.kernels)
    total += kernel.durationMs;
  return total;
}

constexpr size_t kPredictionMethods = 5;
using MethodsUsed = std::array<bool, kPredictionMethods>;

bool uses(const MethodsUsed& used, PredictionMethod method) {
  return used[static_cast<size_t>(method)];
}

// The GPU time of one op on one GPU and how it was obtained. `measured`: the trace has
// kernels from a known GPU; `onOrigin`: this GPU is that one.
PredictionMethod timeOp(const OpRecord& op, const OpCost& cost, const DeviceSpec& gpu,
                        bool onOrigin, bool measured, const std::optional<double>& learnedMs,
                        const PredictorOptions& options, double& timeMs,
                        std::map<std::string, int>& waveProblems) {
  timeMs = 0;
  if (onOrigin) {
    timeMs = measuredOpMs(op);
    return PredictionMethod::Measured;
  }
  if (cost.metadataOnly())
    return PredictionMethod::Roofline;
  if (learnedMs) {
    timeMs = *learnedMs;
    return PredictionMethod::Learned;
  }
  if (measured) {
    std::string problem;
    timeMs = waveScaledOpMs(op, cost, *options.originGpu, gpu, problem);
    if (!problem.empty())
      ++waveProblems[problem];
    return PredictionMethod::WaveScaling;
  }
  timeMs = rooflineTime(cost, gpu, options.roofline).timeMs;
  return cost.approximate ? PredictionMethod::Fallback : PredictionMethod::Roofline;
}

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string text;
  for (size_t p = 0; p < parts.size(); ++p)
    text += (p ? separator : "") + parts[p];
  return text;
}

// One GPU's method in words: "measured on H100-SXM", "scaled from H100-SXM", or the
// models that predicted it from shapes.
std::string gpuMethod(const MethodsUsed& used, const PredictorOptions& options) {
  if (uses(used, PredictionMethod::Measured))
    return "measured on " + options.originGpu->id;
  std::vector<std::string> parts;
  if (uses(used, PredictionMethod::WaveScaling))
    parts.push_back("scaled from " + options.originGpu->id);
  if (uses(used, PredictionMethod::Learned))
    parts.push_back(parts.empty() ? "learned per-op model"
                                  : "learned models for kernel-varying ops");
  if (uses(used, PredictionMethod::Roofline) || uses(used, PredictionMethod::Fallback) ||
      parts.empty())
    parts.push_back("analytic roofline");
  return joined(parts, " + ");
}

// The whole prediction's method: the models used, and for a measured trace which GPU
// was measured and which were scaled from it.
std::string describeMethods(const std::vector<MethodsUsed>& used,
                            const std::vector<DeviceSpec>& gpus, const PredictorOptions& options) {
  MethodsUsed any{};
  for (const auto& perGpu : used)
    for (size_t m = 0; m < kPredictionMethods; ++m)
      any[m] = any[m] || perGpu[m];
  if (!uses(any, PredictionMethod::Measured) && !uses(any, PredictionMethod::WaveScaling)) {
    std::vector<std::string> parts;
    if (uses(any, PredictionMethod::Learned))
      parts.push_back("learned per-op model (" + options.opTimeModel->name() + ")");
    if (uses(any, PredictionMethod::Roofline) || uses(any, PredictionMethod::Fallback) ||
        parts.empty())
      parts.push_back("analytic roofline (FLOPs and bytes against each GPU's spec-sheet peaks)");
    return joined(parts, " + ");
  }
  // "H100-SXM: measured on H100-SXM; A100, T4: scaled from H100-SXM (...)"
  std::map<std::string, std::string> gpusByMethod;
  std::vector<std::string> order;
  for (size_t g = 0; g < gpus.size(); ++g) {
    const std::string method = gpuMethod(used[g], options);
    auto [it, added] = gpusByMethod.emplace(method, gpus[g].id);
    if (added)
      order.push_back(method);
    else
      it->second += ", " + gpus[g].id;
  }
  std::string text;
  for (const auto& method : order)
    text += (text.empty() ? "" : "; ") + gpusByMethod[method] + ": " + method;
  if (uses(any, PredictionMethod::WaveScaling))
    text += " (Habitat's wave scaling of each measured kernel" +
            std::string(uses(any, PredictionMethod::Learned)
                            ? "; convolutions, matmuls and RNNs by the learned per-op model (" +
                                  options.opTimeModel->name() + ")"
                            : "") +
            ")";
  return text;
}

bool isHostBound(double gpuIdleMs, double wallMs, const HostOptions& options) {
  return wallMs > 0 && gpuIdleMs > options.hostBoundIdleShare * wallMs;
}

void finishSpan(LineTimes& times, double iterationMs, const HostOptions& options) {
  times.shareOfIteration = iterationMs > 0 ? times.totalMs() / iterationMs : 0;
  times.hostBound = isHostBound(times.gpuIdleMs, times.totalMs(), options);
}

std::string hostBoundAdvice(const GpuSummary& summary) {
  std::ostringstream out;
  out.precision(2);
  out << std::fixed << summary.gpuId << ": host-bound: the GPU waits for the CPU to issue "
      << "work for " << summary.gpuIdleMs << " of the " << summary.iterationMs
      << " ms of an iteration (its kernels take " << summary.gpuMs
      << " ms); a larger batch, CUDA graphs or torch.compile (fewer, larger kernels) "
         "would use it better";
  return out.str();
}

struct LineKey {
  std::string file;
  int line = 0;
  bool operator<(const LineKey& other) const {
    return file != other.file ? file < other.file : line < other.line;
  }
};

void addTime(LineTimes& times, Phase phase, const OpPrediction& op) {
  times.gpuMs += op.timeMs;
  times.gpuIdleMs += op.gpuIdleMs;
  const double ms = op.wallMs;
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

std::string describeApproximations(const std::map<std::string, std::pair<int, std::string>>& ops) {
  std::ostringstream out;
  out << ops.size() << " kind(s) of op have no formula of their own and were predicted "
      << "approximately:";
  bool first = true;
  for (const auto& [name, countAndNote] : ops) {
    out << (first ? " " : "; ") << name << " x" << countAndNote.first << " (" << countAndNote.second
        << ")";
    first = false;
  }
  return out.str();
}

// Per matrix family, the precision that carries most of its FLOPs.
std::vector<FamilyPrecision> familyPrecisions(const std::vector<OpCost>& costs) {
  std::map<CostFamily, std::map<std::string, double>> flops; // family -> precision -> FLOPs
  for (const OpCost& cost : costs)
    if (cost.unit == ComputeUnit::Matrix && !cost.metadataOnly())
      flops[cost.family][mathPrecision(cost)] += cost.flops;
  std::vector<std::pair<double, FamilyPrecision>> ranked;
  for (const auto& [family, byPrecision] : flops) {
    const auto top =
        std::max_element(byPrecision.begin(), byPrecision.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    double total = 0;
    for (const auto& entry : byPrecision)
      total += entry.second;
    ranked.push_back({total, {family, top->first}});
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<FamilyPrecision> out;
  for (auto& entry : ranked)
    out.push_back(std::move(entry.second));
  return out;
}

// One line per attention kernel a GPU lacks, e.g. "T4 (compute capability 7.5) has no
// flash attention: 12 attention ops predicted as memory-efficient attention, ...".
std::vector<std::string> attentionFallbacks(const std::vector<OpCost>& costs,
                                            const std::vector<DeviceSpec>& gpus) {
  std::vector<std::string> lines;
  for (const auto& gpu : gpus) {
    std::map<std::pair<AttentionBackend, AttentionBackend>, int> changed;
    for (const OpCost& cost : costs)
      if (cost.attention.backend != AttentionBackend::None) {
        const AttentionBackend runs = attentionBackendOn(cost, gpu);
        if (runs != cost.attention.backend)
          ++changed[{cost.attention.backend, runs}];
      }
    for (const auto& [backends, count] : changed)
      lines.push_back(gpu.id + " (compute capability " + gpu.computeCapability() + ") has no " +
                      toString(backends.first) + ": " + std::to_string(count) +
                      " attention ops predicted as " + toString(backends.second) +
                      ", which torch runs there instead");
  }
  return lines;
}

} // namespace

Predictor::Predictor(PredictorOptions options) : options_(std::move(options)) {}

Prediction Predictor::predict(const Trace& trace, const std::vector<DeviceSpec>& gpus) const {
  Prediction prediction;
  prediction.batchSize = trace.batchSize;
  const size_t opCount = trace.ops.size();
  const size_t gpuCount = gpus.size();
  for (const auto& gpu : gpus)
    prediction.gpus.push_back(gpu.id);

  FloatPrecision precision = trace.precision.value_or(FloatPrecision{});
  if (options_.matmulTf32)
    precision.matmulTf32 = *options_.matmulTf32;
  if (options_.convTf32)
    precision.cudnnTf32 = *options_.convTf32;

  std::vector<OpCost> costs;
  costs.reserve(opCount);
  prediction.opInfo.reserve(opCount);
  std::map<std::string, std::pair<int, std::string>> approximateOps;
  for (const auto& op : trace.ops) {
    costs.push_back(estimateOpCost(op));
    costs.back().tf32 = runsInTf32(costs.back(), precision);
    const OpCost& cost = costs.back();
    prediction.opInfo.push_back({op.id, op.name, op.phase, op.loc, op.module, cost.note});
    if (cost.approximate) {
      auto& entry = approximateOps[op.name];
      ++entry.first;
      entry.second = cost.note;
    }
  }

  // A measured trace on its own GPU is its measurements; on every other GPU its kernels
  // are wave-scaled, and the learned models answer only kernel-varying ops (Habitat).
  const bool hasKernels = hasMeasuredKernels(trace);
  const bool measured = hasKernels && options_.originGpu.has_value();
  std::vector<bool> onOrigin(gpuCount, false);
  for (size_t g = 0; g < gpuCount && measured; ++g)
    onOrigin[g] = gpus[g].id == options_.originGpu->id;
  if (trace.mode == TraceMode::Cuda && !hasKernels)
    prediction.warnings.push_back(
        "the trace was measured on a GPU but carries no kernels (an older wavecast recorded "
        "none); re-record it with `wavecast trace FILE.py --mode cuda` to use the "
        "measurements (analytic model used instead)");
  else if (hasKernels && !options_.originGpu)
    prediction.warnings.push_back(
        "the trace was measured on '" + trace.device.value_or("an unnamed GPU") +
        "', which the GPU database does not know; add it to your GPU file (docs/gpus.md) to "
        "use its measurements (analytic model used instead)");
  if (measured)
    for (size_t i = 0; i < opCount; ++i)
      if (!trace.ops[i].kernels.empty()) // the host model issues what the GPU really ran
        costs[i].kernels = static_cast<int>(trace.ops[i].kernels.size());

  // 1. The pluggable model, asked once for every (op, GPU) pair it may answer.
  std::vector<std::optional<double>> learned(opCount * gpuCount);
  if (options_.opTimeModel && gpuCount > 0) {
    std::vector<OpTimeQuery> queries;
    std::vector<size_t> slots;
    for (size_t g = 0; g < gpuCount; ++g)
      for (size_t i = 0; i < opCount; ++i) {
        if (costs[i].metadataOnly() || (measured && (onOrigin[g] || !isKernelVarying(costs[i]))))
          continue;
        // The learned models were trained on FP32 without TF32 (NeuSight's setting).
        if (!usesTf32Cores(costs[i], gpus[g])) {
          queries.push_back({&trace.ops[i], &gpus[g]});
          slots.push_back(g * opCount + i);
        }
      }
    const auto answers = options_.opTimeModel->predictMs(queries);
    for (size_t q = 0; q < answers.size() && q < slots.size(); ++q)
      if (answers[q] && *answers[q] >= 0)
        learned[slots[q]] = answers[q];
  }

  prediction.precisions = familyPrecisions(costs);

  // 2. Per op and GPU: the measurement on its own GPU; else learned, else wave scaling of
  // measured kernels, else roofline.
  std::vector<MethodsUsed> used(gpuCount);
  std::map<std::string, int> waveProblems;
  prediction.ops.assign(gpuCount, std::vector<OpPrediction>(opCount));
  for (size_t g = 0; g < gpuCount; ++g) {
    for (size_t i = 0; i < opCount; ++i) {
      const OpCost& cost = costs[i];
      const OpRecord& op = trace.ops[i];
      OpPrediction& out = prediction.ops[g][i];
      out.opId = op.id;
      out.family = cost.family;
      out.flops = cost.flops;
      out.bytes = cost.bytes;
      out.approximate = cost.approximate;
      out.method = timeOp(op, cost, gpus[g], onOrigin[g], measured, learned[g * opCount + i],
                          options_, out.timeMs, waveProblems);
      if (!cost.metadataOnly())
        used[g][static_cast<size_t>(out.method)] = true;
    }
  }
  std::string unmeasured;
  for (size_t g = 0; g < gpuCount; ++g)
    if (uses(used[g], PredictionMethod::Learned) && !options_.opTimeModel->measuredOn(gpus[g]))
      unmeasured += (unmeasured.empty() ? "" : ", ") + gpus[g].id;
  if (!unmeasured.empty())
    prediction.warnings.push_back(
        unmeasured +
        ": not among the GPUs whose measurements trained the learned models; predicted from "
        "the spec sheet alone (docs/accuracy.md gives the error on a GPU left out of training)");
  for (const auto& [problem, count] : waveProblems)
    prediction.warnings.push_back(
        problem + (count > 1 ? " (" + std::to_string(count) + " times)" : std::string()));
  for (const std::string& fallback : attentionFallbacks(costs, gpus))
    prediction.warnings.push_back(fallback);
  if (!approximateOps.empty())
    prediction.warnings.push_back(describeApproximations(approximateOps));
  prediction.method = describeMethods(used, gpus, options_);

  // 3. The host model's timeline per GPU: wall time per op.
  const std::vector<double> hostMs = issueMs(trace, costs, options_.host);
  for (size_t i = 0; i < opCount; ++i)
    prediction.opInfo[i].hostMs = hostMs[i];
  std::vector<IterationTimeline> timelines;
  timelines.reserve(gpuCount);
  for (size_t g = 0; g < gpuCount; ++g) {
    std::vector<double> gpuMs(opCount);
    for (size_t i = 0; i < opCount; ++i)
      gpuMs[i] = prediction.ops[g][i].timeMs;
    timelines.push_back(simulateIteration(trace, costs, hostMs, gpuMs));
    for (size_t i = 0; i < opCount; ++i) {
      prediction.ops[g][i].wallMs = timelines[g].ops[i].wallMs;
      prediction.ops[g][i].gpuIdleMs = timelines[g].ops[i].gpuIdleMs;
    }
  }

  // 4. Aggregation per line, per module, per phase and per GPU.
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
    for (size_t g = 0; g < gpuCount; ++g) {
      const OpPrediction& p = prediction.ops[g][i];
      addTime(line.perGpu[g], op.phase, p);
      addTime(module.perGpu[g], op.phase, p);
    }
  }
  // A line with no forward op (the optimizer.step() line) lists its other ops.
  for (size_t l = 0; l < prediction.lines.size(); ++l)
    if (prediction.lines[l].opNames.empty())
      prediction.lines[l].opNames = otherOpNames[l];

  const TensorMemory tensors = tensorMemory(trace, costs);
  for (size_t g = 0; g < gpuCount; ++g) {
    GpuSummary summary;
    summary.gpuId = gpus[g].id;
    summary.gpuName = gpus[g].name;
    summary.method = gpuMethod(used[g], options_);
    for (const auto& line : prediction.lines) {
      summary.forwardMs += line.perGpu[g].forwardMs;
      summary.backwardMs += line.perGpu[g].backwardMs;
      summary.optimizerMs += line.perGpu[g].optimizerMs;
    }
    summary.iterationMs = summary.forwardMs + summary.backwardMs + summary.optimizerMs;
    summary.gpuMs = timelines[g].gpuMs;
    summary.hostMs = timelines[g].hostMs;
    summary.gpuIdleMs = timelines[g].gpuIdleMs;
    summary.hostBound = isHostBound(summary.gpuIdleMs, summary.iterationMs, options_.host);
    summary.pricePerHourUsd = gpus[g].pricePerHourUsd;
    if (summary.iterationMs > 0 && trace.batchSize > 0) {
      summary.samplesPerSecond = trace.batchSize / (summary.iterationMs * 1e-3);
      summary.costPer1kSamplesUsd =
          summary.pricePerHourUsd / 3600.0 * (1000.0 / summary.samplesPerSecond);
    }
    summary.memory = onGpu(tensors, gpus[g], options_);
    summary.memoryCapacityBytes = gpus[g].memoryBytes();
    summary.fitsInMemory = summary.memory.peakBytes() <= summary.memoryCapacityBytes;
    for (auto& line : prediction.lines)
      finishSpan(line.perGpu[g], summary.iterationMs, options_.host);
    for (auto& module : prediction.modules)
      finishSpan(module.perGpu[g], summary.iterationMs, options_.host);
    if (summary.hostBound)
      prediction.warnings.push_back(hostBoundAdvice(summary));
    if (!summary.fitsInMemory)
      prediction.warnings.push_back(
          "predicted peak memory " + std::to_string(summary.memory.peakBytes() >> 20) +
          " MiB exceeds the " + std::to_string(summary.memoryCapacityBytes >> 20) + " MiB of " +
          gpus[g].id + ": lower the batch size or choose a larger GPU" +
          (summary.memory.activationsSource == ActivationsSource::UpperBound
               ? " (activations are an upper bound for this older trace; re-trace for the "
                 "measured figure)"
               : ""));
    prediction.summaries.push_back(std::move(summary));
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
