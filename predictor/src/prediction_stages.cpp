#include "wavecast/predictor/prediction_stages.h"

#include "wavecast/predictor/compiled_fusion.h"
#include "wavecast/predictor/measured_trace.h"
#include "wavecast/predictor/wave_scaling.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace wavecast::stages {
namespace {

// A kernel that cannot launch as recorded on a GPU; its calls are counted.
struct WaveScalingKey {
  std::string gpu;
  std::string kernel;
  LaunchProblem problem;
  bool operator<(const WaveScalingKey& other) const {
    const auto key = [](const WaveScalingKey& k) {
      return std::tie(k.gpu, k.kernel, k.problem.limit, k.problem.requested, k.problem.allowed);
    };
    return key(*this) < key(other);
  }
};

// Wave-scales the measured kernels of `op` from the origin to `gpu` (0 without kernels:
// the op ran no GPU work where it was measured).
double waveScaledOpMs(const OpRecord& op, const OpCost& cost, const DeviceSpec& origin,
                      const DeviceSpec& gpu, std::map<WaveScalingKey, int>& problems) {
  // Eq. 3 needs the kernel's arithmetic intensity; without hardware counters the
  // op's analytic FLOPs/bytes stand in for every kernel of the op.
  const double intensity = cost.dramBytes() > 0 ? cost.flops / cost.dramBytes() : -1;
  const double ridge = peakTflops(gpu, cost) * 1e12 / (gpu.memoryBandwidthGBs * 1e9);
  const double gamma = waveScalingGamma(intensity, ridge);
  double total = 0;
  for (const auto& kernel : op.kernels) {
    const WaveScaledKernel scaled = waveScaleKernel(kernel, origin, gpu, gamma);
    if (scaled.problem)
      ++problems[{scaled.problem->gpu, kernel.name, scaled.problem->problem}];
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

// What the calibration measured of its machine's host, if anything.
const HostCalibration* calibratedHost(const CalibrationTable* calibration) {
  return calibration && calibration->calibration().host ? &*calibration->calibration().host
                                                        : nullptr;
}

// The GPU time of one op on one GPU and how it was obtained. `measured`: the trace has
// kernels from a known GPU; `onOrigin`: this GPU is that one; `calibration`: this GPU's.
PredictionMethod timeOp(const OpRecord& op, const OpCost& cost, const DeviceSpec& gpu,
                        bool onOrigin, bool measured, const CalibrationTable* calibration,
                        const std::optional<double>& learnedMs, const PredictorOptions& options,
                        double& timeMs, std::map<WaveScalingKey, int>& waveProblems) {
  timeMs = 0;
  if (onOrigin) {
    timeMs = measuredOpMs(op);
    return PredictionMethod::Measured;
  }
  if (cost.metadataOnly())
    return PredictionMethod::Roofline;
  if (cost.fused) {
    timeMs = rooflineTime(cost, gpu, options.roofline).timeMs;
    return PredictionMethod::Roofline;
  }
  if (const HostCalibration* host = calibratedHost(calibration);
      cost.family == CostFamily::HostTransfer && host &&
      host->copies(cost.transfer.direction).pinned) {
    // The DMA at the rate the GPU's own machine copied page-locked memory.
    timeMs = hostTransferMs(cost, *host->copies(cost.transfer.direction).pinned, options.roofline);
    return PredictionMethod::Calibrated;
  }
  if (calibration)
    if (const auto calibrated = calibration->find(op, cost)) {
      timeMs = calibrated->measuredMs;
      // A near shape's time follows the roofline from its shape to this one: waves, tiles,
      // a block per channel and launch floors change with the shape where bytes and FLOPs
      // scale evenly. Without a roofline time, the ratio of their work.
      if (!calibrated->exact()) {
        const double traced = rooflineTime(cost, gpu, options.roofline).timeMs;
        const double near = rooflineTime(*calibrated->measuredCost, gpu, options.roofline).timeMs;
        timeMs = traced > 0 && near > 0 ? timeMs * traced / near : calibrated->timeMs();
      }
      return PredictionMethod::Calibrated;
    }
  if (learnedMs) {
    timeMs = *learnedMs;
    return PredictionMethod::Learned;
  }
  if (measured) {
    timeMs = waveScaledOpMs(op, cost, *options.originGpu, gpu, waveProblems);
    return PredictionMethod::WaveScaling;
  }
  timeMs = rooflineTime(cost, gpu, options.roofline).timeMs;
  return cost.approximate ? PredictionMethod::Fallback : PredictionMethod::Roofline;
}

// One group's GEMM of a grouped GEMM, as the mm CUDA runs for it.
OpRecord groupMm(const GemmShape& g, ScalarType dtype) {
  const auto dim = [](double d) { return static_cast<int64_t>(d); };
  OpRecord mm;
  mm.name = "aten::mm";
  mm.phase = Phase::Forward;
  mm.inputs = {TensorMeta{{dim(g.m), dim(g.k)}, dtype}, TensorMeta{{dim(g.k), dim(g.n)}, dtype}};
  mm.outputs = {TensorMeta{{dim(g.m), dim(g.n)}, dtype}};
  return mm;
}

} // namespace

FloatPrecision effectivePrecision(const Trace& trace, const PredictorOptions& options) {
  FloatPrecision precision = trace.precision.value_or(FloatPrecision{});
  if (options.matmulTf32)
    precision.matmulTf32 = *options.matmulTf32;
  if (options.convTf32)
    precision.cudnnTf32 = *options.convTf32;
  return precision;
}

CostedOps costOps(const Trace& trace, const FloatPrecision& precision) {
  CostedOps out;
  out.costs.reserve(trace.ops.size());
  out.info.reserve(trace.ops.size());
  std::map<std::string, advisory::ApproximateOp> approximate;
  for (const auto& op : trace.ops) {
    out.costs.push_back(estimateOpCost(op));
    OpCost& cost = out.costs.back();
    cost.tf32 = runsInTf32(cost, precision);
    out.info.push_back({op.id, op.name, op.phase, op.loc, op.module, cost.note});
    if (cost.approximate) {
      auto& entry = approximate[op.name];
      entry.op = op.name;
      entry.family = cost.family;
      entry.note = cost.note;
      ++entry.count;
    }
  }
  for (auto& [name, entry] : approximate)
    out.approximate.push_back(std::move(entry));
  compiled::fuseRegions(trace, out.costs);
  for (size_t i = 0; i < out.costs.size(); ++i)
    if (out.costs[i].fused)
      out.info[i].note = out.costs[i].note;
  return out;
}

MeasuredKernels useMeasuredKernels(const Trace& trace, const std::vector<DeviceSpec>& gpus,
                                   const PredictorOptions& options, std::vector<OpCost>& costs) {
  // A measured trace on its own GPU is its measurements; on every other GPU its kernels
  // are wave-scaled, and the learned models answer only kernel-varying ops (Habitat).
  MeasuredKernels out;
  const bool hasKernels = hasMeasuredKernels(trace);
  out.measured = hasKernels && options.originGpu.has_value();
  out.onOrigin.assign(gpus.size(), false);
  for (size_t g = 0; g < gpus.size() && out.measured; ++g)
    out.onOrigin[g] = gpus[g].id == options.originGpu->id;
  if (trace.mode == TraceMode::Cuda && !hasKernels)
    out.advisories.push_back({advisory::MeasuredWithoutKernels{}});
  else if (hasKernels && !options.originGpu)
    out.advisories.push_back({advisory::UnknownMeasuredGpu{trace.device.value_or("")}});
  if (out.measured)
    for (size_t i = 0; i < trace.ops.size(); ++i)
      if (!trace.ops[i].kernels.empty()) // the host model issues what the GPU really ran
        costs[i].kernels = static_cast<int>(trace.ops[i].kernels.size());
  return out;
}

std::vector<std::optional<double>> askLearnedModel(const Trace& trace,
                                                   const std::vector<OpCost>& costs,
                                                   const std::vector<DeviceSpec>& gpus,
                                                   const MeasuredKernels& kernels,
                                                   const PredictorOptions& options) {
  const size_t opCount = trace.ops.size();
  std::vector<std::optional<double>> learned(opCount * gpus.size());
  if (!options.opTimeModel || gpus.empty())
    return learned;
  // A grouped GEMM CUDA runs as one mm per group (every dtype but bf16 on sm90/sm100, which
  // the FP32 models do not cover anyway) is asked as one group's mm, times the groups.
  std::vector<std::optional<OpRecord>> perGroup(opCount);
  for (size_t i = 0; i < opCount; ++i)
    if (costs[i].grouped.groups > 1 && costs[i].gemm.m > 0 && trace.ops[i].input(0))
      perGroup[i] = groupMm(costs[i].gemm, trace.ops[i].input(0)->dtype);
  std::vector<OpTimeQuery> queries;
  std::vector<size_t> slots;
  for (size_t g = 0; g < gpus.size(); ++g)
    for (size_t i = 0; i < opCount; ++i) {
      // NeuSight's GEMM rows are tiled kernels': GEMVs and outer products are not asked.
      if (costs[i].metadataOnly() || costs[i].fused || costs[i].family == CostFamily::Collective ||
          costs[i].gemmKernel != GemmKernel::Tiled ||
          (kernels.measured && (kernels.onOrigin[g] || !isKernelVarying(costs[i]))))
        continue;
      // The learned models were trained on FP32 without TF32 (NeuSight's setting).
      if (!usesTf32Cores(costs[i], gpus[g])) {
        queries.push_back({perGroup[i] ? &*perGroup[i] : &trace.ops[i], &gpus[g]});
        slots.push_back(g * opCount + i);
      }
    }
  const auto answers = options.opTimeModel->predictMs(queries);
  for (size_t q = 0; q < answers.size() && q < slots.size(); ++q)
    if (answers[q] && *answers[q] >= 0) {
      const size_t i = slots[q] % opCount;
      learned[slots[q]] = *answers[q] * (perGroup[i] ? costs[i].grouped.groups : 1);
    }
  return learned;
}

double collectiveMs(const CollectiveWork& work, const SystemSpec& system,
                    const CollectiveModel& model, int tracedRanksPerNode) {
  int perNode = work.ranksPerNode > 0 ? work.ranksPerNode : system.gpusPerNode;
  if (work.ranksPerNode <= 0 && tracedRanksPerNode > 0)
    perNode = std::min(perNode, tracedRanksPerNode);
  const CommGroup group{work.groupSize, std::min(work.groupSize, std::max(1, perNode))};
  return estimateCollective(work.kind, work.bytes, group, system, model).ms;
}

OpTimes timeOps(const Trace& trace, const std::vector<OpCost>& costs,
                const std::vector<DeviceSpec>& gpus, const MeasuredKernels& kernels,
                const std::vector<std::optional<double>>& learned,
                const PredictorOptions& options) {
  const size_t opCount = trace.ops.size();
  OpTimes out;
  out.methods.resize(gpus.size());
  if (kernels.measured)
    for (auto& methods : out.methods)
      methods.origin = options.originGpu->id;
  out.ops.assign(gpus.size(), std::vector<OpPrediction>(opCount));
  std::map<WaveScalingKey, int> waveProblems;
  const auto variants = compiled::inductorVariants(trace, costs);
  for (size_t g = 0; g < gpus.size(); ++g) {
    const std::optional<SystemSpec> system = options.systemFor(gpus[g]);
    const CalibrationTable* calibration = calibrationFor(gpus[g], options);
    for (size_t i = 0; i < opCount; ++i) {
      const OpCost& cost = costs[i];
      OpPrediction& op = out.ops[g][i];
      op.opId = trace.ops[i].id;
      op.family = cost.family;
      op.flops = cost.flops;
      op.bytes = cost.dramBytes();
      op.approximate = cost.approximate;
      if (cost.family == CostFamily::Collective) {
        op.method = PredictionMethod::Collective;
        if (system && !cost.metadataOnly()) {
          op.timeMs = collectiveMs(cost.collective, *system, options.collectives,
                                   trace.distributed ? trace.distributed->localWorldSize : 0);
          out.methods[g].used[static_cast<size_t>(op.method)] = true;
        }
        continue;
      }
      op.method = timeOp(trace.ops[i], cost, gpus[g], kernels.onOrigin[g], kernels.measured,
                         calibration, learned[g * opCount + i], options, op.timeMs, waveProblems);
      // As Inductor runs it: pad_mm keeps a padded GEMM where it is faster, copies
      // included; a layout-optimized convolution runs in channels_last, which changes its
      // time where it is calibrated in that layout (the models price layouts alike).
      if (const auto& variant = variants[i];
          variant && !kernels.onOrigin[g] && compiled::runsOn(*variant, cost, gpus[g])) {
        double variantMs = 0;
        const PredictionMethod method =
            timeOp(variant->op, variant->cost, gpus[g], false, false, calibration, std::nullopt,
                   options, variantMs, waveProblems);
        OpCost copies;
        copies.family = CostFamily::Copy;
        copies.bytes = variant->copyBytes;
        copies.kernels = variant->copyKernels;
        if (copies.kernels > 0)
          variantMs += rooflineTime(copies, gpus[g], options.roofline).timeMs;
        const bool padding = variant->kind == compiled::InductorVariant::Kind::PaddedGemm;
        if (padding ? variantMs < op.timeMs : method == PredictionMethod::Calibrated) {
          op.timeMs = variantMs;
          op.method = method;
        }
      }
      // A microbatch's share of a traced op: its kernels' work in proportion, their fixed
      // time whole, not below one launch each.
      if (const double share = trace.ops[i].batchShare; share != 1.0 && op.timeMs > 0) {
        const double fixedMs = std::min(op.timeMs, fixedKernelMs(cost, gpus[g], options.roofline));
        op.timeMs =
            std::max(fixedMs + (op.timeMs - fixedMs) * share,
                     std::min(op.timeMs, cost.kernels * options.roofline.launchFloorUs * 1e-3));
        op.flops *= share;
        op.bytes *= share;
      }
      if (!cost.metadataOnly())
        out.methods[g].used[static_cast<size_t>(op.method)] = true;
    }
    if (out.methods[g].uses(PredictionMethod::Calibrated))
      out.methods[g].calibratedOn = calibration->calibration().gpuName;
  }
  advisory::UntrainedGpus untrained;
  for (size_t g = 0; g < gpus.size(); ++g)
    if (out.methods[g].uses(PredictionMethod::Learned) && !options.opTimeModel->measuredOn(gpus[g]))
      untrained.gpus.push_back(gpus[g].id);
  if (!untrained.gpus.empty())
    out.advisories.push_back({std::move(untrained)});
  for (const auto& [key, count] : waveProblems)
    out.advisories.push_back(
        {advisory::WaveScalingAssumption{key.gpu, key.kernel, key.problem, count}});
  return out;
}

const CalibrationTable* calibrationFor(const DeviceSpec& gpu, const PredictorOptions& options) {
  const auto it = options.calibrations.find(gpu.id);
  return it == options.calibrations.end() ? nullptr : it->second.get();
}

HostTimelines playIterations(const Trace& trace, const std::vector<OpCost>& costs,
                             const std::vector<DeviceSpec>& gpus, const PredictorOptions& options,
                             OpTimes& times) {
  const HostOptions& host = options.host;
  const size_t opCount = trace.ops.size();
  HostTimelines out;
  out.hostMs = issueMs(trace, costs, host);
  const std::vector<bool> waits = hostWaits(trace);
  std::vector<size_t> grouped; // ops whose issue and waits depend on the GPU
  std::vector<size_t> pageable;
  for (size_t i = 0; i < std::min(opCount, costs.size()); ++i) {
    if (costs[i].grouped.groups > 0)
      grouped.push_back(i);
    if (costs[i].family == CostFamily::HostTransfer && costs[i].transfer.pageable)
      pageable.push_back(i);
  }
  out.timelines.reserve(times.ops.size());
  for (size_t g = 0; g < times.ops.size(); ++g) {
    auto& ops = times.ops[g];
    std::vector<double> gpuMs(opCount);
    for (size_t i = 0; i < opCount; ++i)
      gpuMs[i] = ops[i].timeMs;
    std::vector<double> hostMs; // this GPU's, where it differs from out.hostMs
    std::vector<bool> gpuWaits;
    for (size_t i : grouped) {
      if (g >= gpus.size() || !groupedGemmLoops(costs[i], gpus[g]))
        continue;
      if (hostMs.empty()) {
        hostMs = out.hostMs;
        gpuWaits = waits;
      }
      // The offsets' copy to the host, then the mm a group that issueMs did not count.
      const int uncounted = std::max(0, costs[i].grouped.groups - costs[i].kernels);
      hostMs[i] += (host.opUs + uncounted * host.extraLaunchUs) * 1e-3;
      gpuWaits[i] = true;
    }
    // A pageable copy takes as long as the GPU's own machine took to make one, staging
    // included, rather than the staging this CPU timed.
    const HostCalibration* calibrated =
        calibratedHost(g < gpus.size() ? calibrationFor(gpus[g], options) : nullptr);
    for (size_t i : pageable) {
      const auto gbs =
          calibrated ? calibrated->copies(costs[i].transfer.direction).pageable : std::nullopt;
      if (!gbs)
        continue;
      if (hostMs.empty()) {
        hostMs = out.hostMs;
        gpuWaits = waits;
      }
      const double share = trace.ops[i].batchShare;
      const double measuredMs = costs[i].bytes * share / (*gbs * 1e9) * 1e3;
      hostMs[i] += measuredMs - costs[i].transfer.stagingMs * share;
    }
    const bool changed = !hostMs.empty();
    out.timelines.push_back(simulateIteration(trace, costs, changed ? hostMs : out.hostMs, gpuMs,
                                              changed ? gpuWaits : waits,
                                              options.collectives.smShare));
    for (size_t i = 0; i < opCount; ++i) {
      ops[i].wallMs = out.timelines.back().ops[i].wallMs;
      ops[i].gpuIdleMs = out.timelines.back().ops[i].gpuIdleMs;
      ops[i].commHiddenMs = out.timelines.back().ops[i].commHiddenMs;
    }
  }
  return out;
}

int64_t routedExperts(const std::vector<OpCost>& costs) {
  int64_t experts = 0;
  for (const OpCost& cost : costs)
    if (cost.note == CostNote::EvenExpertGroups)
      experts = std::max<int64_t>(experts, cost.grouped.groups);
  return experts;
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

// One advisory per attention kernel a GPU lacks and the kernel torch runs there instead.
std::vector<Advisory> attentionSubstitutions(const std::vector<OpCost>& costs,
                                             const std::vector<DeviceSpec>& gpus) {
  std::vector<Advisory> out;
  for (const auto& gpu : gpus) {
    std::map<std::pair<AttentionBackend, AttentionBackend>, int> changed;
    for (const OpCost& cost : costs)
      if (cost.attention.backend != AttentionBackend::None) {
        const AttentionBackend runs = attentionBackendOn(cost, gpu);
        if (runs != cost.attention.backend)
          ++changed[{cost.attention.backend, runs}];
      }
    for (const auto& [backends, count] : changed)
      out.push_back({advisory::AttentionSubstituted{gpu.id, gpu.computeCapability(), backends.first,
                                                    backends.second, count}});
  }
  return out;
}

} // namespace wavecast::stages
