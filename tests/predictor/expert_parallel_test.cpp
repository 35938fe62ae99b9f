// Expert parallelism (--ep) from a single-GPU trace: the experts of each mixture-of-experts
// layer split over the ep ranks, the token all-to-alls, the expert gradients reduced over
// an expert's replicas only, and the memory that saves; worked out by hand on a small
// synthetic transformer whose MLPs are 8 experts (grouped GEMMs over 2 tokens per token).
#include "parallel_fixtures.h"
#include "synthetic_transformer.h"
#include "wavecast/predictor/parallel.h"

#include <gtest/gtest.h>

namespace wavecast {
namespace {

using namespace parallel_fixtures;

constexpr int64_t kExperts = 8;
// Batch 2 x 8 tokens, hidden 16, top-2: 32 routed rows of 16 float32s.
constexpr int64_t kRoutedBytes = 32 * 16 * 4;
// Per block the up and down projections' [8, 16, 64] and [8, 64, 16] float32s.
constexpr int64_t kExpertBytesPerBlock = 2 * kExperts * 16 * 64 * 4;

Trace mixtureOfExperts() {
  TransformerShape shape;
  shape.experts = kExperts;
  return syntheticTransformer(2, shape);
}

int64_t bytesIn(const Trace& trace, const std::string& kind, const std::string& group,
                std::optional<Phase> phase = std::nullopt, int* count = nullptr) {
  int64_t total = 0;
  for (const auto& op : trace.ops) {
    if (op.name.rfind("wavecast::", 0) != 0 ||
        std::get<std::string>(op.args.at("collective")) != kind ||
        std::get<std::string>(op.args.at("group")) != group || (phase && op.phase != *phase))
      continue;
    total += *op.intArg("bytes");
    if (count)
      ++*count;
  }
  return total;
}

TEST(ExpertParallel, FindsEachLayersExpertsAndTheirWeights) {
  const Trace trace = mixtureOfExperts();
  const ModelStructure model = analyzeModel(trace);
  ASSERT_EQ(model.expertLayers.size(), 4u);
  for (const auto& layer : model.expertLayers) {
    EXPECT_EQ(layer.experts, kExperts);
    EXPECT_LT(layer.firstForward, layer.lastForward);
    EXPECT_EQ(layer.dispatchBytes, kRoutedBytes);
    EXPECT_EQ(layer.combineBytes, kRoutedBytes);
    ASSERT_TRUE(layer.firstBackward && layer.lastBackward);
    EXPECT_LT(*layer.firstBackward, *layer.lastBackward);
  }
  int64_t expertBytes = 0;
  for (const auto& p : model.parameters)
    if (p.expert) {
      EXPECT_EQ(p.shape.size(), 3u);
      expertBytes += p.bytes;
    }
  EXPECT_EQ(expertBytes, 4 * kExpertBytesPerBlock);
  EXPECT_TRUE(analyzeModel(syntheticTransformer(2)).expertLayers.empty());
  // What the editor's picker offers expert parallelism for.
  EXPECT_EQ(Predictor().predict(trace, {h100()}).routedExperts, kExperts);
  EXPECT_EQ(Predictor().predict(syntheticTransformer(2), {h100()}).routedExperts, 0);
}

TEST(ExpertParallel, SplitsTheExpertsAndSendsTheTokensBothWays) {
  const Trace trace = mixtureOfExperts();
  const ModelStructure model = analyzeModel(trace);
  ParallelConfig config;
  config.dp = 8;
  config.ep = 4;
  const RankTrace rank = transformForRank(trace, model, config);
  // Each grouped GEMM keeps its 32 rows, over 2 of the 8 experts.
  int grouped = 0;
  for (const auto& op : rank.trace.ops) {
    if (op.name != "aten::_grouped_mm")
      continue;
    ++grouped;
    EXPECT_EQ(op.input(2)->shape, (std::vector<int64_t>{2}));
    const auto& weight = op.input(1)->shape.size() == 3 ? *op.input(1) : *op.output(0);
    EXPECT_EQ(weight.shape[0], 2) << op.id;
    const auto& rows = op.input(0)->shape;
    EXPECT_EQ(rows[0] == 32 || rows[1] == 32, true) << op.id;
  }
  EXPECT_EQ(grouped, 4 * 2 * 3); // two per layer, each with two gradients
  // Per layer: counts, tokens out and results back in forward; both again in backward.
  int forward = 0, backward = 0;
  EXPECT_EQ(bytesIn(rank.trace, "all_to_all", "ep", Phase::Forward, &forward),
            4 * (kExperts * 4 + 2 * kRoutedBytes));
  EXPECT_EQ(bytesIn(rank.trace, "all_to_all", "ep", Phase::Backward, &backward),
            4 * 2 * kRoutedBytes);
  EXPECT_EQ(forward, 12);
  EXPECT_EQ(backward, 8);
  // The rank's experts' gradients go to their 2 replicas, the rest to all 8 dp ranks.
  const int64_t expertsHere = 4 * kExpertBytesPerBlock / config.ep;
  EXPECT_EQ(bytesIn(rank.trace, "all_reduce", "edp"), expertsHere);
  EXPECT_EQ(bytesIn(rank.trace, "all_reduce", "dp"),
            model.parameterBytes() - 4 * kExpertBytesPerBlock);
  EXPECT_EQ(rank.parameterBytesPerRank,
            model.parameterBytes() - 4 * kExpertBytesPerBlock + expertsHere);
  // The optimizer steps the rank's experts only.
  for (const auto& op : rank.trace.ops) {
    if (op.phase != Phase::Optimizer)
      continue;
    for (const auto& t : op.inputs) {
      if (t && t->shape.size() == 3) {
        EXPECT_EQ(t->shape[0], kExperts / config.ep);
      }
    }
  }
  const auto& groups = rank.trace.distributed->groups;
  EXPECT_TRUE(std::any_of(groups.begin(), groups.end(),
                          [](const auto& g) { return g.name == "edp" && g.size == 2; }));
}

TEST(ExpertParallel, WithEpEqualToDpExpertsAreNeverReducedAndFsdpShardsTheRest) {
  const Trace trace = mixtureOfExperts();
  const ModelStructure model = analyzeModel(trace);
  ParallelConfig config;
  config.dp = 8;
  config.ep = 8;
  const RankTrace ddp = transformForRank(trace, model, config);
  EXPECT_EQ(bytesIn(ddp.trace, "all_reduce", "edp"), 0);
  // FSDP with ep 4: an expert's replicas (2) gather and reduce-scatter the rank's experts,
  // block by block, in forward and backward.
  config.ep = 4;
  config.sharding = Sharding::Zero3;
  const RankTrace fsdp = transformForRank(trace, model, config);
  const int64_t expertsHere = 4 * kExpertBytesPerBlock / config.ep;
  EXPECT_EQ(bytesIn(fsdp.trace, "all_gather", "edp"), 2 * expertsHere);
  EXPECT_EQ(bytesIn(fsdp.trace, "reduce_scatter", "edp"), expertsHere);
  EXPECT_EQ(bytesIn(fsdp.trace, "all_gather", "dp"),
            2 * (model.parameterBytes() - 4 * kExpertBytesPerBlock) -
                // the root's parameters are gathered once, not again for backward
                4 * (64 * 16 * 2 + 2 * 16));
  EXPECT_EQ(fsdp.parameterBytesPerRank, model.parameterBytes() / config.dp);
}

// A recomputed block dispatches its tokens again (counts, tokens, results) before its
// backward; torchtitan's per-op policy saves the all-to-alls' outputs instead.
TEST(ExpertParallel, RecomputedBlocksDispatchAgainUnlessThePolicySavesTheAllToAlls) {
  const Trace trace = mixtureOfExperts();
  const ModelStructure model = analyzeModel(trace);
  ParallelConfig config;
  config.dp = 8;
  config.ep = 4;
  config.recompute = true;
  int forward = 0, backward = 0;
  const RankTrace block = transformForRank(trace, model, config);
  bytesIn(block.trace, "all_to_all", "ep", Phase::Forward, &forward);
  bytesIn(block.trace, "all_to_all", "ep", Phase::Backward, &backward);
  EXPECT_EQ(forward, 4 * 3);
  EXPECT_EQ(backward, 4 * 2 + 4 * 3);
  config.recomputePolicy = RecomputePolicy::SelectiveOps;
  backward = 0;
  bytesIn(transformForRank(trace, model, config).trace, "all_to_all", "ep", Phase::Backward,
          &backward);
  EXPECT_EQ(backward, 4 * 2);
}

// Over microbatches, gradients are reduced once, after the last one's backward: the
// experts' over their replicas as much as the rest over dp.
TEST(ExpertParallel, MicrobatchesReduceTheExpertsGradientsOnce) {
  const Trace trace = mixtureOfExperts();
  const auto allReduces = [&](int microbatches) {
    ParallelConfig config;
    config.dp = 8;
    config.ep = 4;
    config.microbatches = microbatches;
    auto outcome = predictParallel(trace, analyzeModel(trace), config, h100(), node8(),
                                   collectiveOptions());
    EXPECT_FALSE(outcome.problem.has_value());
    int count = 0;
    for (const auto& op : outcome.prediction->rank.opInfo)
      count += op.name == "wavecast::all_reduce";
    return count;
  };
  const int once = allReduces(1);
  EXPECT_GE(once, 2); // the dense buckets and the experts'
  EXPECT_EQ(allReduces(2), once);
}

TEST(ExpertParallel, LayoutsItCannotRun) {
  const Trace trace = mixtureOfExperts();
  const ModelStructure model = analyzeModel(trace);
  const SystemSpec system = node8();
  auto kind = [&](int dp, int ep, const ModelStructure& m) {
    ParallelConfig c;
    c.dp = dp;
    c.ep = ep;
    const auto problem = validateLayout(c, m, 2, system);
    return problem ? std::optional<LayoutProblemKind>(problem->kind) : std::nullopt;
  };
  EXPECT_EQ(kind(8, 4, model), std::nullopt);
  EXPECT_EQ(kind(6, 4, model), LayoutProblemKind::EpNotDividingDp);
  EXPECT_EQ(kind(6, 3, model), LayoutProblemKind::EpNotDividingExperts);
  EXPECT_EQ(kind(8, 0, model), LayoutProblemKind::BadDegree);
  EXPECT_EQ(kind(8, 2, analyzeModel(syntheticTransformer(2))), LayoutProblemKind::EpWithoutExperts);
}

TEST(ExpertParallel, ReadsAndWritesEpAsAWord) {
  const auto parsed = parseParallelTarget("8xH100-SXM ep4");
  ASSERT_TRUE(std::holds_alternative<ParallelTarget>(parsed));
  const auto& config = std::get<ParallelTarget>(parsed).config;
  EXPECT_EQ(config.dp, 8);
  EXPECT_EQ(config.ep, 4);
  EXPECT_EQ(config.worldSize(), 8); // experts split the dp ranks: no more GPUs
  const std::string text = parallelConfigText(config);
  EXPECT_NE(text.find(" ep4"), std::string::npos) << text;
  EXPECT_EQ(std::get<ParallelTarget>(parseParallelTarget(text)).config.ep, 4);
  EXPECT_EQ(parallelConfigText(ParallelConfig{}).find("ep"), std::string::npos);
}

// Priced: the all-to-alls cost time on the rank, and each rank holds a quarter of the
// experts (their weights, gradients and Adam-free optimizer states).
TEST(ExpertParallel, PredictsTheAllToAllsAndTheMemoryItSaves) {
  const Trace trace = mixtureOfExperts();
  ParallelConfig config;
  config.dp = 8;
  const ParallelSummary replicated = predictLayout(trace, config);
  config.ep = 4;
  const ParallelSummary split = predictLayout(trace, config);
  const auto& before = replicated.stages.front().memory;
  const auto& after = split.stages.front().memory;
  EXPECT_EQ(before.weightsBytes - after.weightsBytes, 4 * kExpertBytesPerBlock * 3 / 4);
  EXPECT_LT(after.gradientsBytes, before.gradientsBytes);
  EXPECT_GT(split.communication.ms, 0.0);
  EXPECT_EQ(split.gpus, 8);
}

} // namespace
} // namespace wavecast
