// Pricing a layout: the rank's trace through the ordinary predictor, pipeline stages
// balanced by predicted time and scheduled over microbatches, memory per rank, and the
// per-configuration figures (throughput, MFU, cost).
#include "parallel_ops.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/predictor/parallel.h"
#include "wavecast/predictor/prediction_stages.h"
#include "wavecast/predictor/roofline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace wavecast {

std::vector<int> balanceStages(const std::vector<double>& blockMs, double headMs, double tailMs,
                               int stages) {
  const int n = static_cast<int>(blockMs.size());
  stages = std::max(1, std::min(stages, n));
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + blockMs[i];
  // best[s][i]: the slowest stage when blocks [0, i) form s stages; the first stage carries
  // the head, the last the tail.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= n - (stages - s); ++i)
      for (int j = s - 1; j < i; ++j) {
        double stage = prefix[i] - prefix[j] + (s == 1 ? headMs : 0) + (s == stages ? tailMs : 0);
        const double worst = std::max(best[s - 1][j], stage);
        if (worst < best[s][i]) {
          best[s][i] = worst;
          cut[s][i] = j;
        }
      }
  std::vector<int> first(stages, 0);
  for (int s = stages, i = n; s >= 1; --s) {
    first[s - 1] = cut[s][i];
    i = cut[s][i];
  }
  return first;
}

PipelineTime pipelineTime(const std::vector<double>& stageMs, int microbatches) {
  PipelineTime out;
  if (stageMs.empty())
    return out;
  const double slowest = *std::max_element(stageMs.begin(), stageMs.end());
  out.ms = std::accumulate(stageMs.begin(), stageMs.end(), 0.0) + (microbatches - 1) * slowest;
  if (out.ms > 0)
    out.bubbleFraction = (out.ms - microbatches * slowest) / out.ms;
  return out;
}

namespace {

struct StageOps {
  std::vector<int> opStage;    // [rank op]
  std::vector<int> paramStage; // [parameter]
  std::vector<int> blockFirst; // [stage]: first block
};

// Which stage runs each op of the rank trace: a block's ops with its block; the rest
// before the first block with the first stage, after it with the last; backward ops with
// the forward op they differentiate; optimizer ops everywhere (filtered per stage later).
StageOps assignStages(const Trace& single, const ModelStructure& model, const RankTrace& rank,
                      const std::vector<int>& blockFirst) {
  const int stages = static_cast<int>(blockFirst.size());
  std::vector<int> blockStage(model.blocks.size(), 0);
  for (int s = 0; s < stages; ++s)
    for (size_t b = blockFirst[s]; b < model.blocks.size(); ++b)
      blockStage[b] = s;
  const size_t firstBlockOp = model.blocks.empty() ? 0 : model.blocks.front().firstForward;
  std::vector<int> singleStage(single.ops.size(), stages - 1);
  std::unordered_map<int64_t, size_t> byId;
  for (size_t i = 0; i < single.ops.size(); ++i)
    byId.emplace(single.ops[i].id, i);
  for (size_t i = 0; i < single.ops.size(); ++i) {
    const auto& op = single.ops[i];
    size_t origin = i;
    if (op.phase == Phase::Backward && op.forwardId)
      if (const auto it = byId.find(*op.forwardId); it != byId.end())
        origin = it->second;
    if (model.opBlock[origin] >= 0)
      singleStage[i] = blockStage[model.opBlock[origin]];
    else if (single.ops[origin].phase == Phase::Forward && origin < firstBlockOp)
      singleStage[i] = 0;
  }
  StageOps out;
  out.blockFirst = blockFirst;
  for (size_t origin : rank.opOrigin)
    out.opStage.push_back(single.ops[origin].phase == Phase::Optimizer ? -1 : singleStage[origin]);
  for (const auto& p : model.parameters)
    out.paramStage.push_back(p.block >= 0   ? blockStage[p.block]
                             : p.gradientOp ? singleStage[*p.gradientOp]
                                            : 0);
  return out;
}

// The parameter each per-parameter host op of the optimizer serves, -1 for the other ops:
// runs of one op on the CPU, a multiple of the parameters long, in their order (Adam's step
// counters read one by one for the bias corrections).
std::vector<int> perParameterHostOps(const Trace& trace, size_t paramCount) {
  std::vector<int> parameter(trace.ops.size(), -1);
  const auto onHostStep = [&](size_t i) {
    return trace.ops[i].phase == Phase::Optimizer && trace.ops[i].onHost;
  };
  for (size_t i = 0; i < trace.ops.size();) {
    size_t end = i + 1;
    while (onHostStep(i) && end < trace.ops.size() && onHostStep(end) &&
           trace.ops[end].name == trace.ops[i].name)
      ++end;
    if (onHostStep(i) && paramCount > 0 && (end - i) % paramCount == 0)
      for (size_t j = i; j < end; ++j)
        parameter[j] = static_cast<int>((j - i) % paramCount);
    i = end;
  }
  return parameter;
}

// Stage `s`'s trace: its ops, its parameters' part of each optimizer op, and the
// activation (forward) and its gradient (backward) sent to the neighbouring stage. `origin`
// gets each op's single-GPU op (kNoOrigin for the sends).
Trace stageTrace(const Trace& single, const ModelStructure& model, const RankTrace& rank,
                 const StageOps& stages, int s, int ranksPerNode, std::vector<size_t>& origin) {
  Trace out = rank.trace;
  out.ops.clear();
  origin.clear();
  const int count = static_cast<int>(stages.blockFirst.size());
  const size_t paramCount = model.parameters.size();
  int64_t sendBytes = 0;
  if (s + 1 < count) {
    const auto& last = model.blocks[stages.blockFirst[s + 1] - 1];
    for (const auto& t : single.ops[last.lastForward].outputs)
      if (t) {
        sendBytes = t->bytes();
        break;
      }
  }
  int64_t nextId = 0;
  for (const auto& op : rank.trace.ops)
    nextId = std::max(nextId, op.id + 1);
  const std::vector<int> hostParameter = perParameterHostOps(rank.trace, paramCount);
  std::optional<size_t> lastForward, lastBackward;
  for (size_t i = 0; i < rank.trace.ops.size(); ++i) {
    const auto& op = rank.trace.ops[i];
    if (stages.opStage[i] >= 0 && stages.opStage[i] != s)
      continue;
    if (hostParameter[i] >= 0 && stages.paramStage[hostParameter[i]] != s)
      continue;
    origin.push_back(rank.opOrigin[i]);
    if (op.phase != Phase::Optimizer) {
      out.ops.push_back(op);
      (op.phase == Phase::Forward ? lastForward : lastBackward) = out.ops.size() - 1;
      continue;
    }
    OpRecord filtered = op;
    const auto tensors = op.intArg("num_tensors");
    if (paramCount > 0 && tensors && *tensors == static_cast<int64_t>(paramCount)) {
      int64_t kept = 0;
      for (auto* list : {&filtered.inputs, &filtered.outputs}) {
        std::vector<std::optional<TensorMeta>> keep;
        for (size_t j = 0; j < list->size(); ++j)
          if (stages.paramStage[j % paramCount] == s)
            keep.push_back((*list)[j]);
        list->swap(keep);
      }
      for (size_t j = 0; j < paramCount; ++j)
        kept += stages.paramStage[j] == s;
      filtered.args["num_tensors"] = kept;
    }
    out.ops.push_back(std::move(filtered));
  }
  // Sends last in their phase: the next stage cannot start before they arrive.
  CollectiveCall send{
      CollectiveKind::SendRecv, sendBytes, "pp", 2, ranksPerNode, false, std::nullopt};
  auto insertAfter = [&](std::optional<size_t> at, Phase phase, int64_t bytes) {
    if (!at || bytes <= 0)
      return;
    CollectiveCall call = send;
    call.bytes = bytes;
    OpRecord op = collectiveOp(call, out.ops[*at], phase);
    op.id = nextId++;
    out.ops.insert(out.ops.begin() + static_cast<long>(*at) + 1, std::move(op));
    origin.insert(origin.begin() + static_cast<long>(*at) + 1, kNoOrigin);
  };
  // The backward send goes first so the forward index stays valid (backward comes later).
  if (s > 0 && stages.blockFirst[s] > 0) {
    const auto& prev = model.blocks[stages.blockFirst[s] - 1];
    for (const auto& t : single.ops[prev.lastForward].outputs)
      if (t) {
        insertAfter(lastBackward, Phase::Backward, t->bytes());
        break;
      }
  }
  insertAfter(lastForward, Phase::Forward, sendBytes);
  return out;
}

// What a rank of stage `s` holds at its peak: its share of the parameters, gradients and
// optimizer states by ZeRO stage and tp, and the activations of each microbatch in flight.
// The single GPU's peak says what was live then (gradients only as far as backward had made
// them: none at a forward peak); the rank's peak is the larger of that moment, scaled, and
// the optimizer step's, when every gradient is live and the activations are freed: sharding
// and tp shrink the activations and the states differently, so the peak can move.
MemoryEstimate stageMemory(const MemoryEstimate& single, const ModelStructure& model,
                           const RankTrace& rank, const StageOps& stages, int s,
                           const ParallelConfig& config, const Trace& trace) {
  MemoryEstimate m = single;
  const int count = static_cast<int>(stages.blockFirst.size());
  // The stage's parameters on a rank (after tp and ep) and their ZeRO shards (of dp ranks;
  // an expert's of its dp / ep replicas).
  int64_t params = 0, sharded = 0, total = 0, largestBlock = 0;
  std::vector<int64_t> blockBytes(model.blocks.size(), 0);
  for (size_t p = 0; p < model.parameters.size(); ++p) {
    const auto& param = model.parameters[p];
    const int64_t bytes = rankBytes(param, config);
    total += param.bytes;
    if (stages.paramStage[p] == s) {
      params += bytes;
      sharded += bytes / zeroShards(param, config);
    }
    if (param.block >= 0)
      blockBytes[param.block] += bytes;
  }
  for (int64_t b : blockBytes)
    largestBlock = std::max(largestBlock, b);
  if (model.parameters.empty()) {
    total = std::max<int64_t>(single.weightsBytes, 1);
    params = single.weightsBytes / (config.tp * count);
    sharded = params / config.dp;
  }
  const double share = total > 0 ? static_cast<double>(params) / total : 1.0;
  const auto perWeight = [&](int64_t bytes) {
    return single.weightsBytes > 0 ? static_cast<double>(bytes) / single.weightsBytes : 1.0;
  };
  const int64_t allGradients =
      trace.memory.gradientsBytes > 0 ? trace.memory.gradientsBytes : single.weightsBytes;
  const int dp = config.dp;
  const bool zero3 = config.sharding == Sharding::Zero3 && dp > 1;
  // ZeRO-3 keeps its shard plus the gathered blocks: the one running and the one prefetched,
  // in the dtype they were gathered in.
  if (zero3 && config.paramDtype)
    largestBlock =
        largestBlock * elementSize(*config.paramDtype) / elementSize(parameterDtype(model));
  m.weightsBytes = zero3 ? sharded + 2 * largestBlock : params;
  const int gradientShards = config.sharding >= Sharding::Zero2 ? dp : 1;
  const auto gradientsOf = [&](int64_t singleBytes) {
    return static_cast<int64_t>((gradientShards > 1 ? sharded : params) * perWeight(singleBytes));
  };
  m.gradientsBytes = gradientsOf(single.gradientsBytes);
  const double shardShare = total > 0 ? static_cast<double>(sharded) / total : share / dp;
  m.optimizerStateBytes = static_cast<int64_t>(
      single.optimizerStateBytes * (config.sharding >= Sharding::Zero1 ? shardShare : share));
  // Activations: the stage's share of what autograd keeps, after tensor parallelism, per
  // microbatch, times the microbatches in flight.
  double savedSingle = 0, savedStage = 0;
  std::vector<double> kept(model.blocks.size(), 0); // the stage's saved bytes per block
  for (const auto& op : trace.ops)
    savedSingle += static_cast<double>(op.savedBytes.value_or(0));
  for (size_t i = 0; i < rank.trace.ops.size(); ++i)
    if (stages.opStage[i] == s) {
      const auto saved = static_cast<double>(rank.trace.ops[i].savedBytes.value_or(0));
      savedStage += saved;
      if (rank.opBlock[i] >= 0)
        kept[rank.opBlock[i]] += saved;
    }
  const double activationShare =
      savedSingle > 0 ? savedStage / savedSingle : 1.0 / (count * config.tp);
  const int inFlight = config.schedule == PipelineSchedule::GPipe
                           ? config.microbatches
                           : std::min(config.microbatches, count - s);
  const double perMicrobatch = activationShare / config.microbatches;
  m.activationsBytes = static_cast<int64_t>(single.activationsBytes * perMicrobatch * inFlight);
  m.activationsSavedBytes =
      static_cast<int64_t>(single.activationsSavedBytes * perMicrobatch * inFlight);
  const int64_t stepGradients = gradientsOf(allGradients);
  // Recomputing, the peak can come in backward instead, while a recomputed block c reruns:
  // every checkpoint, c's rerun activations (one microbatch's), what the blocks before c
  // keep (those after c are done and have freed theirs: a block run as traced its
  // activations, a recomputed one what the per-op policy kept), and the gradients of every
  // block after c and of what follows the blocks. With every block recomputed that is
  // highest at the stage's first block, the last to rerun.
  const size_t firstBlock = stages.blockFirst[s];
  const size_t lastBlock = s + 1 < count ? stages.blockFirst[s + 1] : model.blocks.size();
  if (!rank.recomputedSavedBytes.empty() && savedSingle > 0) {
    // One microbatch's part of the single GPU's activations, per saved byte.
    const double perSaved = 1.0 / savedSingle / config.microbatches;
    int64_t gradients = stepGradients;
    const auto heldUntilDone = [&](size_t b) {
      return rank.recomputedSavedBytes[b] == 0 ? kept[b]
                                               : static_cast<double>(rank.recomputeKeptBytes[b]);
    };
    double freed = 0; // what the blocks after c held until their backward was done
    for (size_t b = firstBlock; b < lastBlock; ++b)
      freed += heldUntilDone(b);
    const int64_t forwardActivations = m.activationsBytes, forwardSaved = m.activationsSavedBytes;
    for (size_t c = firstBlock; c < lastBlock; ++c) {
      gradients -= static_cast<int64_t>(blockBytes[c] * perWeight(allGradients)) / gradientShards;
      freed -= heldUntilDone(c);
      if (rank.recomputedSavedBytes[c] == 0)
        continue;
      const double share = (rank.recomputedSavedBytes[c] - freed) * perSaved;
      const auto activations =
          forwardActivations + static_cast<int64_t>(single.activationsBytes * share);
      // c's own gradients come during its backward: counted as not yet there.
      const int64_t atC = std::max<int64_t>(0, gradients);
      if (atC + activations > m.gradientsBytes + m.activationsBytes) {
        m.activationsSavedBytes =
            forwardSaved + static_cast<int64_t>(single.activationsSavedBytes * share);
        m.activationsBytes = activations;
        m.gradientsBytes = atC;
        m.peakPhase = Phase::Backward;
        m.peakOpId.reset();
      }
    }
  }
  if (stepGradients > m.gradientsBytes + m.activationsBytes) {
    m.gradientsBytes = stepGradients;
    m.activationsBytes = 0;
    m.activationsSavedBytes = 0;
    m.peakPhase = Phase::Optimizer;
    m.peakOpId.reset();
  }
  return m;
}

CommunicationTotals communicationOf(const Prediction& prediction) {
  CommunicationTotals out;
  if (prediction.ops.empty())
    return out;
  for (const auto& op : prediction.ops[0])
    if (op.family == CostFamily::Collective) {
      out.ms += op.timeMs;
      out.exposedMs += op.timeMs - op.commHiddenMs;
    }
  return out;
}

// Whether `microbatch` traced the same ops as `whole` (names and phases, one for one), so
// that one microbatch's ops can be priced from it.
bool tracesTheSameOps(const Trace& microbatch, const Trace& whole) {
  if (microbatch.ops.size() != whole.ops.size())
    return false;
  for (size_t i = 0; i < whole.ops.size(); ++i)
    if (microbatch.ops[i].name != whole.ops[i].name ||
        microbatch.ops[i].phase != whole.ops[i].phase)
      return false;
  return true;
}

} // namespace

std::optional<int64_t> microbatchBatchSize(const Trace& trace, const ParallelConfig& config) {
  const int m = config.microbatches;
  if (m <= 1 || !trace.providerLines.count(Provider::Input) || trace.distributed ||
      trace.batchSize % m != 0)
    return std::nullopt;
  return trace.batchSize / m;
}

ParallelOutcome predictParallel(const Trace& trace, const ModelStructure& model,
                                const ParallelConfig& config, const DeviceSpec& gpu,
                                const SystemSpec& system, PredictorOptions options,
                                const Trace* microbatchTrace) {
  ParallelOutcome outcome;
  if ((outcome.problem = validateLayout(config, model, trace.batchSize, system)))
    return outcome;
  options.systems[gpu.id] = system;
  // A stage's iteration is not the layout's: what compiling changes is the single GPU's.
  options.compareCompiledWithEager = false;
  const Predictor predictor(options);
  const RankTrace rank = transformForRank(trace, model, config, system.gpusPerNode);
  // Time: one microbatch's ops at their own shapes where a trace of one microbatch has
  // the whole batch's ops; else the whole batch's ops, each doing 1/m of its work. Memory
  // comes from the whole batch's trace either way.
  std::optional<ModelStructure> microbatchModel;
  if (microbatchTrace && config.microbatches > 1 && tracesTheSameOps(*microbatchTrace, trace) &&
      microbatchTrace->batchSize * config.microbatches == trace.batchSize) {
    microbatchModel = analyzeModel(*microbatchTrace);
    if (microbatchModel->blocks.size() != model.blocks.size() ||
        microbatchModel->parameters.size() != model.parameters.size())
      microbatchModel.reset();
  }
  const Trace& timed = microbatchModel ? *microbatchTrace : trace;
  const ModelStructure& timedModel = microbatchModel ? *microbatchModel : model;
  std::optional<RankTrace> microbatchRank;
  if (microbatchModel)
    microbatchRank = transformForRank(timed, timedModel, config, system.gpusPerNode);
  const RankTrace& timedRank = microbatchRank ? *microbatchRank : rank;
  const int stages = config.pp;
  ParallelSummary summary;
  summary.config = config;
  summary.gpuId = gpu.id;
  summary.systemId = system.id;
  summary.gpus = config.worldSize();
  summary.nodes = (summary.gpus + system.gpusPerNode - 1) / system.gpusPerNode;
  summary.batchPerReplica = trace.batchSize;
  summary.globalBatch = trace.samples() * config.dp;
  summary.sequenceLength = model.sequence;
  summary.microbatchPricing = config.microbatches <= 1 ? MicrobatchPricing::Whole
                              : microbatchModel        ? MicrobatchPricing::Traced
                                                       : MicrobatchPricing::Shares;

  std::vector<Prediction> stagePredictions;
  std::vector<int> blockFirst{0};
  if (stages > 1) {
    const Prediction whole = predictor.predict(timedRank.trace, {gpu});
    std::vector<double> blockMs(timedModel.blocks.size(), 0);
    double headMs = 0, tailMs = 0;
    const size_t firstBlockOp = timedModel.blocks.front().firstForward;
    for (size_t i = 0; i < timedRank.trace.ops.size(); ++i) {
      const auto& op = timedRank.trace.ops[i];
      if (op.phase == Phase::Optimizer)
        continue;
      const double ms = whole.ops[0][i].wallMs;
      if (timedRank.opBlock[i] >= 0)
        blockMs[timedRank.opBlock[i]] += ms;
      else if (timedRank.opOrigin[i] < firstBlockOp && op.phase == Phase::Forward)
        headMs += ms;
      else
        tailMs += ms;
    }
    blockFirst = balanceStages(blockMs, headMs, tailMs, stages);
  }
  const StageOps stageOps = assignStages(trace, model, rank, blockFirst);
  const StageOps timedStageOps =
      microbatchModel ? assignStages(timed, timedModel, timedRank, blockFirst) : stageOps;
  const Microbatches microbatches{config.microbatches, microbatchModel.has_value()};
  if (stages == 1) {
    stagePredictions.push_back(
        predictor.predict(runMicrobatches(timedRank.trace, timedRank.opOrigin, timed, timedModel,
                                          config, microbatches),
                          {gpu}));
  } else {
    // Neighbouring stages are tp x dp ranks apart (Megatron's order): on one node when
    // two such strides fit in it.
    const int sendRanksPerNode = 2 * config.tp * config.dp <= system.gpusPerNode ? 2 : 1;
    std::vector<size_t> origin;
    for (int s = 0; s < stages; ++s) {
      const Trace stage =
          stageTrace(timed, timedModel, timedRank, timedStageOps, s, sendRanksPerNode, origin);
      stagePredictions.push_back(predictor.predict(
          runMicrobatches(stage, origin, timed, timedModel, config, microbatches), {gpu}));
    }
  }

  const MemoryEstimate single = estimateMemory(trace, gpu, options);
  const auto capacity = static_cast<int64_t>(gpu.memoryGiB * 1024.0 * 1024.0 * 1024.0);
  std::vector<double> stageMs;
  double optimizerMs = 0;
  for (int s = 0; s < stages; ++s) {
    const GpuSummary& g = stagePredictions[s].summaries.front();
    StageSummary stage;
    stage.firstBlock = blockFirst[s];
    stage.lastBlock = s + 1 < stages ? blockFirst[s + 1] : static_cast<int>(model.blocks.size());
    stage.forwardMs = (g.inputMs + g.forwardMs) / config.microbatches; // its batch, then forward
    stage.backwardMs = g.backwardMs / config.microbatches;
    stage.optimizerMs = g.optimizerMs;
    stage.microbatchesInFlight = config.schedule == PipelineSchedule::GPipe
                                     ? config.microbatches
                                     : std::min(config.microbatches, stages - s);
    stage.memory = stageMemory(single, model, rank, stageOps, s, config, trace);
    stage.fitsInMemory = stage.memory.peakBytes() <= capacity;
    summary.fitsInMemory = summary.fitsInMemory && stage.fitsInMemory;
    stageMs.push_back(stage.forwardMs + stage.backwardMs);
    optimizerMs = std::max(optimizerMs, stage.optimizerMs);
    summary.stages.push_back(std::move(stage));
  }
  if (stages == 1) {
    // Gradient accumulation: the microbatches one after another, then the step.
    summary.iterationMs = stagePredictions[0].summaries.front().iterationMs;
    summary.computeMs = summary.iterationMs;
  } else {
    const PipelineTime pipe = pipelineTime(stageMs, config.microbatches);
    summary.iterationMs = pipe.ms + optimizerMs;
    summary.bubbleFraction = pipe.bubbleFraction;
    summary.bubbleMs = pipe.bubbleFraction * pipe.ms;
    summary.computeMs = config.microbatches * *std::max_element(stageMs.begin(), stageMs.end());
  }
  for (const auto& op : stagePredictions[0].opInfo)
    if (op.name == "wavecast::send")
      for (const auto& p : stagePredictions[0].ops[0])
        if (p.opId == op.id)
          summary.pointToPointMs += p.wallMs;
  summary.communication = communicationOf(stagePredictions[0]);

  // Throughput, MFU and cost for the whole cluster.
  const double seconds = summary.iterationMs / 1000.0;
  if (seconds > 0) {
    summary.samplesPerSecond = summary.globalBatch / seconds;
    summary.samplesPerSecondPerGpu = summary.samplesPerSecond / summary.gpus;
    if (model.sequence > 0) {
      summary.tokensPerSecond = summary.samplesPerSecond * model.sequence;
      summary.tokensPerSecondPerGpu = summary.tokensPerSecond / summary.gpus;
    }
  }
  const auto costs = stages::costOps(trace, stages::effectivePrecision(trace, options)).costs;
  const OpCost* heaviest = nullptr;
  double flops = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (trace.ops[i].phase == Phase::Optimizer)
      continue;
    flops += costs[i].flops;
    if (costs[i].unit == ComputeUnit::Matrix && (!heaviest || costs[i].flops > heaviest->flops))
      heaviest = &costs[i];
  }
  summary.modelFlops = flops * config.dp;
  if (heaviest && seconds > 0) {
    summary.mfuPrecision = mathPrecision(*heaviest);
    const double peak = peakTflops(gpu, *heaviest) * 1e12;
    summary.mfu = summary.modelFlops / (seconds * peak * summary.gpus);
  }
  // A share of a node costs its share of the node's price.
  summary.clusterPricePerHourUsd =
      system.pricePerHourUsd > 0
          ? system.pricePerHourUsd * summary.gpus / std::max(1, system.gpusPerNode)
          : gpu.pricePerHourUsd * summary.gpus;
  if (summary.samplesPerSecond > 0 && summary.clusterPricePerHourUsd > 0)
    summary.costPer1kSamplesUsd =
        summary.clusterPricePerHourUsd / 3600.0 * 1000.0 / summary.samplesPerSecond;

  // The rank's own figures are the first stage's: its memory as the layout holds it.
  GpuSummary& first = stagePredictions[0].summaries.front();
  first.memory = summary.stages.front().memory;
  first.fitsInMemory = summary.stages.front().fitsInMemory;
  auto& advisories = stagePredictions[0].advisories;
  advisories.erase(
      std::remove_if(advisories.begin(), advisories.end(),
                     [](const Advisory& a) { return a.kind() == AdvisoryKind::OutOfMemory; }),
      advisories.end());
  if (!first.fitsInMemory)
    advisories.push_back(
        {advisory::OutOfMemory{first.gpuId, first.memory.peakBytes(), first.memoryCapacityBytes,
                               first.memory.activationsSource == ActivationsSource::UpperBound}});
  if (config.tp > 1) {
    int experts = 0; // the experts' forward grouped GEMMs
    for (size_t i = 0; i < model.opExpertLayer.size(); ++i)
      experts += model.opExpertLayer[i] >= 0 && trace.ops[i].phase == Phase::Forward;
    if (experts > 0)
      summary.advisories.push_back({advisory::ReplicatedExperts{config.tp, experts}});
  }
  outcome.prediction = ParallelPrediction{std::move(summary), std::move(stagePredictions[0])};
  return outcome;
}

} // namespace wavecast
