// The multi-GPU prediction's invariants: one GPU is the single-GPU prediction, memory per
// rank, weak and strong scaling, pipeline stages and microbatches.
#include "parallel_fixtures.h"
#include "synthetic_transformer.h"
#include "wavecast/predictor/parallel.h"

#include <gtest/gtest.h>

namespace wavecast {
namespace {

using namespace parallel_fixtures;

TEST(ParallelPrediction, OneGpuEqualsTheSingleGpuPrediction) {
  const Trace trace = syntheticTransformer(2);
  const Prediction single = Predictor(collectiveOptions()).predict(trace, {h100()});
  const ParallelSummary summary = predictLayout(trace, ParallelConfig{});
  const auto& s = single.summaries[0];
  EXPECT_EQ(summary.iterationMs, s.iterationMs);
  EXPECT_DOUBLE_EQ(summary.samplesPerSecond, s.samplesPerSecond);
  ASSERT_EQ(summary.stages.size(), 1u);
  EXPECT_EQ(summary.stages[0].memory.peakBytes(), s.memory.peakBytes());
  EXPECT_EQ(summary.communication.ms, 0);
}

// Whether this build prices the inserted collectives as communication (CostFamily::
// Collective on NCCL's stream) rather than as ops without a formula.
bool pricesCollectives(const Trace& trace) {
  ParallelConfig config;
  config.dp = 2;
  const Trace rank = transformForRank(trace, analyzeModel(trace), config).trace;
  PredictorOptions options = collectiveOptions();
  options.systems[h100().id] = node8();
  const Prediction prediction = Predictor(options).predict(rank, {h100()});
  for (size_t i = 0; i < rank.ops.size(); ++i)
    if (rank.ops[i].name.rfind("wavecast::", 0) == 0)
      return prediction.ops[0][i].family == CostFamily::Collective;
  return false;
}

// The rank's peak moves to the optimizer step when sharding shrinks the states and the
// activations were small: every gradient is live then (docs/parallel.md, "Memory per rank").
TEST(ParallelPrediction, MemoryPerRankPeaksAtTheStepWhenGradientsOutweighActivations) {
  Trace trace = syntheticTransformer(2);
  const int64_t w = trace.memory.parametersBytes;
  ASSERT_EQ(analyzeModel(trace).parameterBytes(), w);
  trace.memory.optimizerStateBytes = 2 * w;        // Adam's two moments
  trace.memory.peakLiveBytes = w + 2 * w + w / 10; // a forward peak: no gradients yet
  trace.memory.gradientsAtPeakBytes = 0;
  trace.memory.peakPhase = Phase::Forward;
  ParallelConfig config;
  config.dp = 8;
  config.sharding = Sharding::Zero1;
  const auto outcome =
      predictParallel(trace, analyzeModel(trace), config, h100(), node8(), collectiveOptions());
  ASSERT_TRUE(outcome.prediction.has_value());
  const MemoryEstimate& m = outcome.prediction->summary.stages[0].memory;
  // At the forward peak: w + 0 + 2w/8 + w/10; at the step: w + w + 2w/8, the larger.
  EXPECT_EQ(m.weightsBytes, w);
  EXPECT_EQ(m.gradientsBytes, w);
  EXPECT_EQ(m.optimizerStateBytes, 2 * w / 8);
  EXPECT_EQ(m.activationsBytes, 0);
  EXPECT_EQ(m.peakPhase, Phase::Optimizer);
  // The rank's own summary (the CLI's per-GPU row) says the same as the layout's.
  const GpuSummary& rank = outcome.prediction->rank.summaries[0];
  EXPECT_EQ(rank.memory.peakBytes(), m.peakBytes());
  EXPECT_EQ(rank.memory.gradientsBytes, w);
}

TEST(ParallelPrediction, WeakScalingKeepsPerGpuThroughputWithinCommunication) {
  const Trace trace = syntheticTransformer(2);
  if (!pricesCollectives(trace))
    GTEST_SKIP() << "collectives are not priced as communication in this build (the NCCL "
                    "model and its stream come with CostFamily::Collective's pricing)";
  const ParallelSummary one = predictLayout(trace, ParallelConfig{});
  for (int dp : {2, 8, 16}) {
    ParallelConfig config;
    config.dp = dp;
    const auto outcome =
        predictParallel(trace, analyzeModel(trace), config, h100(), node8(), collectiveOptions());
    const ParallelSummary& many = outcome.prediction->summary;
    // The CPU's time issuing what the layout adds (this small model is host-bound): the
    // collectives and DDP's reducer copies, and the copies' kernels.
    std::set<int64_t> traced;
    for (const auto& op : trace.ops)
      traced.insert(op.id);
    double issueMs = 0;
    const Prediction& rank = outcome.prediction->rank;
    for (size_t i = 0; i < rank.opInfo.size(); ++i)
      if (!traced.count(rank.opInfo[i].id))
        issueMs += rank.opInfo[i].hostMs +
                   (rank.ops[0][i].family == CostFamily::Collective ? 0 : rank.ops[0][i].timeMs);
    EXPECT_EQ(many.globalBatch, 2 * dp);
    EXPECT_LE(many.samplesPerSecondPerGpu, one.samplesPerSecondPerGpu * (1 + 1e-9)) << dp;
    // Slower by at most the communication (what the rank waits for, plus the compute that
    // overlapped the rest running on fewer SMs) and issuing it.
    EXPECT_GT(many.communication.ms, 0);
    EXPECT_GE(many.iterationMs, one.iterationMs - 1e-9);
    EXPECT_LE(many.iterationMs, one.iterationMs + many.communication.ms + issueMs + 1e-6) << dp;
  }
}

TEST(ParallelPrediction, StrongScalingIsNeverFasterThanLinear) {
  const ParallelSummary one = predictLayout(syntheticTransformer(16), ParallelConfig{});
  for (int dp : {2, 4, 8}) {
    ParallelConfig config;
    config.dp = dp;
    const ParallelSummary many = predictLayout(syntheticTransformer(16 / dp), config);
    EXPECT_EQ(many.globalBatch, 16);
    EXPECT_LE(many.samplesPerSecond, one.samplesPerSecond * dp * (1 + 1e-9)) << dp;
  }
}

TEST(ParallelPrediction, PipelineStagesShareTheModelAndItsMemory) {
  const Trace trace = syntheticTransformer(8);
  ParallelConfig config;
  config.pp = 2;
  config.microbatches = 4;
  config.schedule = PipelineSchedule::GPipe;
  const ParallelSummary gpipe = predictLayout(trace, config);
  ASSERT_EQ(gpipe.stages.size(), 2u);
  EXPECT_EQ(gpipe.stages[0].firstBlock, 0);
  EXPECT_EQ(gpipe.stages[1].lastBlock, 4);
  EXPECT_EQ(gpipe.stages[0].microbatchesInFlight, 4);
  config.schedule = PipelineSchedule::OneFOneB;
  const ParallelSummary oneF = predictLayout(trace, config);
  EXPECT_EQ(oneF.stages[0].microbatchesInFlight, 2);
  EXPECT_EQ(oneF.stages[1].microbatchesInFlight, 1);
  EXPECT_LT(oneF.stages[0].memory.activationsBytes, gpipe.stages[0].memory.activationsBytes);
  EXPECT_GT(gpipe.bubbleFraction, 0);
  EXPECT_GT(gpipe.tokensPerSecond, 0);
}

// Gradient accumulation over m microbatches: each runs every forward and backward op on a
// quarter of the batch, so the host issues them m times while the kernels' work stays the
// batch's; from the second microbatch on, each parameter's gradient is added to the one kept.
TEST(ParallelPrediction, MicrobatchesIssueEveryOpAgainAndAccumulateGradients) {
  const Trace trace = syntheticTransformer(8);
  const ModelStructure model = analyzeModel(trace);
  ParallelConfig config;
  config.microbatches = 4;
  const auto outcome = predictParallel(trace, model, config, h100(), node8(), collectiveOptions());
  ASSERT_FALSE(outcome.problem.has_value());
  const Prediction& rank = outcome.prediction->rank;
  const Prediction single = Predictor(collectiveOptions()).predict(trace, {h100()});
  // Per prediction: ops, host and kernel time of the forward and backward passes, and the
  // accumulations apart.
  struct Passes {
    size_t ops = 0, accumulations = 0;
    double hostMs = 0, gpuMs = 0, accumulationMs = 0;
  };
  const auto passes = [](const Prediction& p) {
    Passes out;
    for (size_t i = 0; i < p.opInfo.size(); ++i) {
      const OpInfo& op = p.opInfo[i];
      if (op.phase == Phase::Optimizer)
        continue;
      if (op.name == "aten::add_" && op.phase == Phase::Backward) {
        out.accumulations += 1;
        out.accumulationMs += p.ops[0][i].timeMs;
        continue;
      }
      out.ops += 1;
      out.hostMs += op.hostMs;
      out.gpuMs += p.ops[0][i].timeMs;
    }
    return out;
  };
  const Passes one = passes(single), four = passes(rank);
  EXPECT_EQ(one.accumulations, 0u);
  EXPECT_EQ(four.accumulations, 3 * model.parameters.size());
  EXPECT_EQ(four.ops, 4 * one.ops);
  EXPECT_NEAR(four.hostMs, 4 * one.hostMs, 1e-9); // a backward call per microbatch too
  // The kernels do the batch's work in quarters, each at least a launch: this model's are
  // that small, so four times as long.
  EXPECT_GE(four.gpuMs, one.gpuMs - 1e-9);
  EXPECT_LE(four.gpuMs, 4 * one.gpuMs + 1e-9);
  EXPECT_GT(four.gpuMs, 3.5 * one.gpuMs);
  // Each accumulation reads two gradients and writes one.
  const double gradientsMs =
      3 * 3.0 * trace.memory.parametersBytes / (h100().memoryBandwidthGBs * 1e6);
  EXPECT_GT(four.accumulationMs, gradientsMs);
  EXPECT_GT(outcome.prediction->summary.iterationMs, single.summaries.front().iterationMs);
}

// With the script traced again at one microbatch's batch, each microbatch's ops are that
// trace's, priced at their own shapes: the kernels of four microbatches of 2 take four times
// what one trace at batch 2 takes, where 1/4 of each batch-8 op would not (tile and wave
// quantisation, launch floors). A trace of other ops, or of another batch, is not used.
TEST(ParallelPrediction, MicrobatchesTracedAtTheirOwnBatchArePricedAtTheirShapes) {
  const Trace trace = syntheticTransformer(8);
  const Trace microbatch = syntheticTransformer(2);
  const ModelStructure model = analyzeModel(trace);
  ParallelConfig config;
  config.microbatches = 4;
  const auto kernelMs = [](const Prediction& p) {
    double ms = 0;
    for (size_t i = 0; i < p.opInfo.size(); ++i)
      if (p.opInfo[i].phase != Phase::Optimizer &&
          !(p.opInfo[i].name == "aten::add_" && p.opInfo[i].phase == Phase::Backward))
        ms += p.ops[0][i].timeMs;
    return ms;
  };
  const auto rankWith = [&](const Trace* traced) {
    const auto outcome =
        predictParallel(trace, model, config, h100(), node8(), collectiveOptions(), traced);
    EXPECT_FALSE(outcome.problem.has_value());
    return outcome.prediction->rank;
  };
  const double one = kernelMs(Predictor(collectiveOptions()).predict(microbatch, {h100()}));
  const double shares = kernelMs(rankWith(nullptr));
  EXPECT_NEAR(kernelMs(rankWith(&microbatch)), 4 * one, 1e-9);
  EXPECT_GT(std::abs(shares - 4 * one), 1e-6) << "1/4 of each op is not a microbatch's op";

  Trace otherOps = microbatch;
  otherOps.ops.pop_back();
  EXPECT_NEAR(kernelMs(rankWith(&otherOps)), shares, 1e-9);
  const Trace otherBatch = syntheticTransformer(4);
  EXPECT_NEAR(kernelMs(rankWith(&otherBatch)), shares, 1e-9);

  // Pipeline stages too: the stage's microbatch ops are the microbatch trace's.
  config.pp = 2;
  const auto pipelined =
      predictParallel(trace, model, config, h100(), node8(), collectiveOptions(), &microbatch);
  ASSERT_FALSE(pipelined.problem.has_value());
  const auto byShares = predictParallel(trace, model, config, h100(), node8(), collectiveOptions());
  EXPECT_GT(std::abs(kernelMs(pipelined.prediction->rank) - kernelMs(byShares.prediction->rank)),
            1e-6);
  EXPECT_EQ(pipelined.prediction->summary.globalBatch, 8);
  EXPECT_EQ(pipelined.prediction->summary.stages[0].memory.activationsBytes,
            byShares.prediction->summary.stages[0].memory.activationsBytes)
      << "memory comes from the whole batch's trace";
}

// The batch one microbatch's trace is taken at, where the script's providers set the batch,
// and each layout saying how it priced its microbatches.
TEST(ParallelPrediction, MicrobatchPricingSaysWhereTheShapesCameFrom) {
  Trace trace = syntheticTransformer(8);
  trace.providerLines[Provider::Input] = 12;
  ParallelConfig config;
  EXPECT_EQ(microbatchBatchSize(trace, config), std::nullopt) << "one microbatch";
  config.microbatches = 4;
  EXPECT_EQ(microbatchBatchSize(trace, config), 2);
  config.microbatches = 3;
  EXPECT_EQ(microbatchBatchSize(trace, config), std::nullopt) << "8 does not split in 3";
  config.microbatches = 4;
  Trace asWritten = trace;
  asWritten.providerLines.clear();
  EXPECT_EQ(microbatchBatchSize(asWritten, config), std::nullopt) << "no wavecast_input";
  Trace distributed = trace;
  distributed.distributed = DistributedInfo{};
  EXPECT_EQ(microbatchBatchSize(distributed, config), std::nullopt) << "one rank of a launch";

  const ModelStructure model = analyzeModel(trace);
  const auto pricing = [&](const ParallelConfig& c, const Trace* microbatch) {
    const auto outcome =
        predictParallel(trace, model, c, h100(), node8(), collectiveOptions(), microbatch);
    EXPECT_FALSE(outcome.problem.has_value());
    return outcome.prediction->summary.microbatchPricing;
  };
  const Trace microbatch = syntheticTransformer(2);
  const Trace otherBatch = syntheticTransformer(4);
  EXPECT_EQ(pricing(ParallelConfig{}, nullptr), MicrobatchPricing::Whole);
  EXPECT_EQ(pricing(config, nullptr), MicrobatchPricing::Shares);
  EXPECT_EQ(pricing(config, &microbatch), MicrobatchPricing::Traced);
  EXPECT_EQ(pricing(config, &otherBatch), MicrobatchPricing::Shares);
}

// A mixture of experts' grouped GEMMs stay whole under tensor parallelism, and the layout
// says so (the MLP's activation stands in for each block's experts here).
TEST(ParallelPrediction, TensorParallelismSaysItLeavesTheExpertsWhole) {
  Trace trace = syntheticTransformer(2);
  const int64_t tokens = 2 * 8, width = 4 * 16;
  for (OpRecord& op : trace.ops) {
    if (op.name != "aten::gelu" || op.phase != Phase::Forward)
      continue;
    op.name = "aten::_grouped_mm";
    TensorMeta a, b, offsets;
    a.shape = {tokens, width};
    b.shape = {8, width, width};
    offsets.shape = {8};
    offsets.dtype = ScalarType::Int32;
    op.inputs = {a, b, offsets};
    op.outputs = {a};
  }
  const auto advisories = [&](ParallelConfig config) {
    auto outcome =
        predictParallel(trace, analyzeModel(trace), config, h100(), node8(), collectiveOptions());
    EXPECT_FALSE(outcome.problem.has_value());
    std::vector<advisory::ReplicatedExperts> found;
    for (const Advisory& advisory : outcome.prediction->summary.advisories)
      if (const auto* facts = advisory.as<advisory::ReplicatedExperts>())
        found.push_back(*facts);
    return found;
  };
  ParallelConfig tp;
  tp.tp = 2;
  const auto replicated = advisories(tp);
  ASSERT_EQ(replicated.size(), 1u);
  EXPECT_EQ(replicated[0].tensorParallel, 2);
  EXPECT_EQ(replicated[0].count, 4) << "one per block";
  ParallelConfig dp;
  dp.dp = 2;
  EXPECT_TRUE(advisories(dp).empty()) << "data parallelism replicates everything anyway";
}

} // namespace
} // namespace wavecast
