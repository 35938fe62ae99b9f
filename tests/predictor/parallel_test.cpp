// The multi-GPU what-if: the rank trace a layout makes of a single-GPU trace (its ops,
// shapes and collective bytes, checked by hand on a small synthetic transformer), the
// pipeline arithmetic and the layout problems (the predictions: parallel_prediction_test).
#include "parallel_fixtures.h"
#include "synthetic_transformer.h"
#include "wavecast/predictor/collectives.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/predictor/parallel.h"
#include "wavecast/predictor/prediction_stages.h"

#include <gtest/gtest.h>
#include <numeric>
#include <set>

namespace wavecast {
namespace {

using namespace parallel_fixtures;

// 15,200 float32 parameters: embedding and head 64 x 16 each, final norm 32, and per
// block 3,280 (norms 64, qkv 816, proj 272, mlp 1,040 + 1,040).
constexpr int64_t kBlocks = 4;
constexpr int64_t kParameterBytes = 4 * (1024 + 4 * 3280 + 32 + 1024);

struct Collective {
  std::string kind, group;
  int64_t bytes = 0;
  bool async = false;
  Phase phase = Phase::Forward;
  std::optional<int64_t> wait;
};
std::vector<Collective> collectives(const Trace& trace) {
  std::vector<Collective> out;
  for (const auto& op : trace.ops) {
    if (op.name.rfind("wavecast::", 0) != 0)
      continue;
    Collective c;
    c.kind = std::get<std::string>(op.args.at("collective"));
    c.group = std::get<std::string>(op.args.at("group"));
    c.bytes = *op.intArg("bytes");
    c.async = *op.boolArg("async");
    c.phase = op.phase;
    c.wait = op.intArg("wait_op");
    out.push_back(c);
  }
  return out;
}
int64_t sumBytes(const std::vector<Collective>& list, const std::string& kind, Phase phase) {
  int64_t total = 0;
  for (const auto& c : list)
    if (c.kind == kind && c.phase == phase)
      total += c.bytes;
  return total;
}

TEST(ParallelStructure, FindsBlocksHeadsAndLinearPairs) {
  const Trace trace = syntheticTransformer(2);
  const ModelStructure model = analyzeModel(trace);
  EXPECT_EQ(model.blocks.size(), 4u);
  EXPECT_EQ(model.hidden, 16);
  EXPECT_EQ(model.heads, 4);
  EXPECT_EQ(model.sequence, 8);
  EXPECT_EQ(model.vocab, 64);
  ASSERT_EQ(model.groups.size(), 8u); // attention and MLP per block
  EXPECT_TRUE(model.headOp.has_value());
  ASSERT_EQ(model.parameters.size(), 52u);
  EXPECT_EQ(model.parameterBytes(), kParameterBytes);
  for (const auto& p : model.parameters)
    EXPECT_TRUE(p.gradientOp.has_value());
  EXPECT_EQ(model.parameters[3].block, 0); // blocks.0.attn.qkv.weight
  EXPECT_TRUE(model.parameters[3].tensorParallel);
  EXPECT_FALSE(model.parameters[6].tensorParallel); // proj bias: row-parallel, replicated
}

TEST(ParallelTransform, SingleGpuLayoutLeavesTheTraceAlone) {
  const Trace trace = syntheticTransformer(2);
  const RankTrace rank = transformForRank(trace, analyzeModel(trace), ParallelConfig{});
  ASSERT_EQ(rank.trace.ops.size(), trace.ops.size());
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    EXPECT_EQ(rank.trace.ops[i].id, trace.ops[i].id);
    EXPECT_EQ(rank.trace.ops[i].inputs.size(), trace.ops[i].inputs.size());
  }
}

TEST(ParallelTransform, DdpBucketsSumToTheGradientBytes) {
  const Trace trace = syntheticTransformer(2);
  ParallelConfig config;
  config.dp = 4;
  config.firstBucketBytes = 4096;
  config.bucketBytes = 16384;
  const RankTrace rank = transformForRank(trace, analyzeModel(trace), config);
  const auto list = collectives(rank.trace);
  ASSERT_FALSE(list.empty());
  EXPECT_EQ(sumBytes(list, "all_reduce", Phase::Backward), kParameterBytes);
  // The first bucket closes at its 4 KiB cap with the head's 64 x 16 weight alone.
  EXPECT_EQ(list.front().bytes, 4096);
  // Each waited for where DDP's reducer copies the reduced buckets back into the
  // gradients, after the last backward op: one copy per parameter, as many as the
  // gradients made into the buckets (`mul` by 1/dp).
  std::set<int64_t> traced;
  for (const auto& op : trace.ops)
    traced.insert(op.id);
  size_t copies = 0, muls = 0, waitAt = rank.trace.ops.size();
  for (size_t i = 0; i < rank.trace.ops.size(); ++i) {
    const auto& op = rank.trace.ops[i];
    if (op.id == list.front().wait)
      waitAt = i;
    if (op.phase == Phase::Backward && !traced.count(op.id)) {
      copies += op.name == "aten::copy_";
      muls += op.name == "aten::mul";
    }
  }
  const size_t parameters = analyzeModel(trace).parameters.size();
  EXPECT_EQ(copies, parameters);
  EXPECT_EQ(muls, parameters);
  ASSERT_LT(waitAt, rank.trace.ops.size());
  EXPECT_EQ(rank.trace.ops[waitAt].name, "aten::copy_");
  EXPECT_EQ(rank.trace.ops[waitAt + parameters].phase, Phase::Optimizer);
  for (const auto& c : list) {
    EXPECT_EQ(c.group, "dp");
    EXPECT_TRUE(c.async);
    EXPECT_EQ(c.wait, list.front().wait);
  }
  // Then buckets close once they pass 16 KiB, in reverse registration order: the final
  // norm (128) and block 3 (13,120) + block 2's mlp.2 (64 + 4,096) = 17,408; the rest of
  // block 2 (8,960) + block 1's mlp.2 and mlp.0 (8,512) = 17,472; the rest of block 1
  // (4,608) + block 0 down to its qkv weight (12,992) = 17,600; block 0's ln1 (128) and the
  // embedding (4,096) = 4,224.
  std::vector<int64_t> sizes;
  for (const auto& c : list)
    sizes.push_back(c.bytes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{4096, 17408, 17472, 17600, 4224}));
}

TEST(ParallelTransform, Zero3GathersEveryParameterOncePerPass) {
  const Trace trace = syntheticTransformer(2);
  ParallelConfig config;
  config.dp = 8;
  config.sharding = Sharding::Zero3;
  const RankTrace rank = transformForRank(trace, analyzeModel(trace), config);
  const auto list = collectives(rank.trace);
  EXPECT_EQ(sumBytes(list, "all_gather", Phase::Forward), kParameterBytes);
  // Backward gathers the blocks again (the root's parameters are kept): 4 x 3,280 x 4.
  EXPECT_EQ(sumBytes(list, "all_gather", Phase::Backward), 4 * 4 * 3280);
  EXPECT_EQ(sumBytes(list, "reduce_scatter", Phase::Backward), kParameterBytes);
  EXPECT_EQ(rank.parameterBytesPerRank, kParameterBytes / 8);
  // The optimizer updates a flat eighth of each tensor: the 64 x 16 embedding -> 128.
  EXPECT_EQ(rank.trace.ops.back().inputs[0]->shape, std::vector<int64_t>{128});
}

TEST(ParallelTransform, Zero2ReduceScattersGradientsAndGathersAfterTheStep) {
  const Trace trace = syntheticTransformer(2);
  ParallelConfig config;
  config.dp = 2;
  config.sharding = Sharding::Zero2;
  const auto list = collectives(transformForRank(trace, analyzeModel(trace), config).trace);
  EXPECT_EQ(sumBytes(list, "reduce_scatter", Phase::Backward), kParameterBytes);
  EXPECT_EQ(sumBytes(list, "all_gather", Phase::Optimizer), kParameterBytes);
  EXPECT_EQ(sumBytes(list, "all_reduce", Phase::Backward), 0);
}

double flopsOf(const OpRecord& op) {
  return estimateOpCost(op).flops;
}

TEST(ParallelTransform, TensorParallelSplitsGemmsAndInsertsFourAllReducesPerLayer) {
  const Trace trace = syntheticTransformer(2);
  const ModelStructure model = analyzeModel(trace);
  ParallelConfig config;
  config.tp = 2;
  const RankTrace rank = transformForRank(trace, model, config);
  const auto list = collectives(rank.trace);
  // Per block two forward and two backward; plus the embedding's forward sum and the
  // head's input-gradient sum.
  int blockReduces = 0;
  for (const auto& c : list) {
    EXPECT_EQ(c.kind, "all_reduce");
    EXPECT_EQ(c.group, "tp");
    EXPECT_FALSE(c.async);
    blockReduces += c.bytes == 16 * 16 * 4; // tokens x hidden x 4 bytes
  }
  EXPECT_EQ(list.size(), 4u * kBlocks + 2);
  EXPECT_EQ(blockReduces, 4 * kBlocks + 2); // the embedding and head move the same size
  // The first block's qkv GEMM (column-parallel) and attention bmm run half their FLOPs;
  // its proj (row-parallel) splits K and keeps its bias: 2 x 16 x 8 x 16 + 16 x 16.
  std::vector<const OpRecord*> gemms;
  for (const auto& op : rank.trace.ops)
    if (op.phase == Phase::Forward && op.module.rfind("blocks.0", 0) == 0 &&
        (op.name == "aten::addmm" || op.name == "aten::bmm"))
      gemms.push_back(&op);
  ASSERT_EQ(gemms.size(), 6u);
  EXPECT_DOUBLE_EQ(flopsOf(*gemms[0]), (2.0 * 16 * 16 * 48 + 16 * 48) / 2);
  EXPECT_DOUBLE_EQ(flopsOf(*gemms[1]), 2.0 * 8 * 8 * 8 * 4 / 2);
  EXPECT_DOUBLE_EQ(flopsOf(*gemms[3]), 2.0 * 16 * 8 * 16 + 16 * 16);
  // Every block GEMM of the model: half the multiply-adds.
  double single = 0, sharded = 0;
  for (const auto& op : trace.ops)
    if (op.module.rfind("blocks.", 0) == 0 && (op.name == "aten::mm" || op.name == "aten::bmm"))
      single += flopsOf(op);
  for (const auto& op : rank.trace.ops)
    if (op.module.rfind("blocks.", 0) == 0 && (op.name == "aten::mm" || op.name == "aten::bmm"))
      sharded += flopsOf(op);
  EXPECT_DOUBLE_EQ(sharded, single / 2);
}

TEST(ParallelTransform, SequenceParallelTurnsEachAllReduceIntoReduceScatterAndAllGather) {
  const Trace trace = syntheticTransformer(2);
  ParallelConfig config;
  config.tp = 2;
  config.sequenceParallel = true;
  const auto list = collectives(transformForRank(trace, analyzeModel(trace), config).trace);
  for (Phase phase : {Phase::Forward, Phase::Backward}) {
    EXPECT_EQ(sumBytes(list, "all_gather", phase), 2 * kBlocks * 1024);
    EXPECT_EQ(sumBytes(list, "reduce_scatter", phase), 2 * kBlocks * 1024);
  }
}

TEST(ParallelPipeline, BubbleOfEqualStagesIsPMinusOneOverMPlusPMinusOne) {
  const PipelineTime time = pipelineTime({2.0, 2.0, 2.0, 2.0}, 8);
  EXPECT_DOUBLE_EQ(time.ms, 2.0 * (8 + 4 - 1));
  EXPECT_DOUBLE_EQ(time.bubbleFraction, 3.0 / 11.0);
}

TEST(ParallelPipeline, StagesBalanceByTime) {
  EXPECT_EQ(balanceStages({1, 1, 1, 1}, 0, 0, 2), (std::vector<int>{0, 2}));
  // A heavy head pushes blocks onto the later stage: [head+b0] [b1 b2 b3].
  EXPECT_EQ(balanceStages({1, 1, 1, 1}, 2, 0, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(balanceStages({4, 1, 1, 1, 1}, 0, 0, 2), (std::vector<int>{0, 1}));
}

TEST(ParallelLayout, EachImpossibleLayoutGivesItsKind) {
  const Trace trace = syntheticTransformer(4);
  const ModelStructure model = analyzeModel(trace);
  const SystemSpec system = node8();
  auto kind = [&](ParallelConfig c, int64_t batch = 4) {
    const auto problem = validateLayout(c, model, batch, system);
    return problem ? std::optional<LayoutProblemKind>(problem->kind) : std::nullopt;
  };
  ParallelConfig c;
  EXPECT_EQ(kind(c), std::nullopt);
  c.tp = 3;
  EXPECT_EQ(kind(c), LayoutProblemKind::TpNotDividingHeads);
  c = {};
  c.pp = 5;
  EXPECT_EQ(kind(c), LayoutProblemKind::PpExceedsLayers);
  c = {};
  c.dp = 12;
  EXPECT_EQ(kind(c), LayoutProblemKind::WorldSizeNotFittingNodes);
  c = {};
  c.microbatches = 3;
  EXPECT_EQ(kind(c), LayoutProblemKind::BatchNotDivisible);
  c = {};
  c.dp = 0;
  EXPECT_EQ(kind(c), LayoutProblemKind::BadDegree);
  ModelStructure wide = model;
  wide.heads = 8;
  wide.hidden = 20;
  c = {};
  c.tp = 8;
  EXPECT_EQ(validateLayout(c, wide, 4, system)->kind, LayoutProblemKind::TpNotDividingHidden);
  ModelStructure plain = model;
  plain.groups.clear();
  c.tp = 2;
  EXPECT_EQ(validateLayout(c, plain, 4, system)->kind, LayoutProblemKind::TpWithoutHeads);
  ModelStructure flat = model;
  flat.blocks.clear();
  c = {};
  c.recompute = true;
  EXPECT_EQ(validateLayout(c, flat, 4, system)->kind, LayoutProblemKind::RecomputeWithoutBlocks);
  c.recomputeEvery = static_cast<int>(model.blocks.size()) + 1; // recomputes none
  EXPECT_EQ(validateLayout(c, model, 4, system)->kind,
            LayoutProblemKind::RecomputeEveryExceedsBlocks);
  c.recomputeEvery = 1;
  // A script that checkpoints its blocks: the first block's norm again, in its backward.
  Trace checkpointed = trace;
  const RepeatedBlock& first = model.blocks.front();
  OpRecord rerun = checkpointed.ops[first.firstForward];
  rerun.phase = Phase::Backward;
  rerun.forwardId = checkpointed.ops[first.lastForward].id;
  checkpointed.ops.insert(
      checkpointed.ops.begin() + static_cast<std::ptrdiff_t>(*first.lastBackward), rerun);
  const ModelStructure rerunning = analyzeModel(checkpointed);
  EXPECT_TRUE(rerunning.recomputesBlocks);
  EXPECT_FALSE(model.recomputesBlocks);
  EXPECT_EQ(validateLayout(c, rerunning, 4, system)->kind, LayoutProblemKind::RecomputeAlready);
  // FSDP's mixed precision: only with FSDP over 2 or more ranks, and only in the dtype the
  // script computes in (this fp32 one; under bf16 autocast, bf16).
  c = {};
  c.dp = 8;
  c.reduceDtype = ScalarType::Float32;
  EXPECT_EQ(kind(c), LayoutProblemKind::MixedPrecisionWithoutFsdp);
  c.sharding = Sharding::Zero3;
  EXPECT_EQ(kind(c), std::nullopt);
  c.paramDtype = ScalarType::BFloat16;
  EXPECT_EQ(kind(c), LayoutProblemKind::ParamDtypeNotTraced);
  ModelStructure autocast = model;
  autocast.computeDtype = ScalarType::BFloat16;
  EXPECT_EQ(validateLayout(c, autocast, 4, system), std::nullopt);
}

TEST(ParallelTarget, ParsesTheCompactText) {
  const auto parsed = parseParallelTarget("8xH100-SXM fsdp tp2");
  ASSERT_TRUE(std::holds_alternative<ParallelTarget>(parsed));
  const auto& target = std::get<ParallelTarget>(parsed);
  EXPECT_EQ(target.gpu, "H100-SXM");
  EXPECT_EQ(target.gpuCount, 8);
  EXPECT_EQ(target.config.dp, 4);
  EXPECT_EQ(target.config.tp, 2);
  EXPECT_EQ(target.config.sharding, Sharding::Zero3);
  const auto round = parseParallelTarget(parallelConfigText(target.config));
  EXPECT_EQ(std::get<ParallelTarget>(round).config.dp, 4);
  const auto bad = parseParallelTarget("dp4 tq2");
  ASSERT_TRUE(std::holds_alternative<TargetTextProblem>(bad));
  EXPECT_EQ(std::get<TargetTextProblem>(bad).word, "tq2");
  EXPECT_EQ(std::get<TargetTextProblem>(parseParallelTarget("6xH100 tp4")).kind,
            TargetTextProblemKind::CountNotDivisible);
}

// As the editor's settings and picker write targets: commas, a space after the count, the
// multiplication sign, capitals.
TEST(ParallelTarget, ParsesTargetsAsTheEditorWritesThem) {
  for (const char* text : {"8x H100-SXM, FSDP", "8\u00d7 H100-SXM, fsdp", "8xH100-SXM,FSDP"}) {
    const auto parsed = parseParallelTarget(text);
    ASSERT_TRUE(std::holds_alternative<ParallelTarget>(parsed)) << text;
    const auto& target = std::get<ParallelTarget>(parsed);
    EXPECT_EQ(target.gpu, "H100-SXM") << text;
    EXPECT_EQ(target.gpuCount, 8) << text;
    EXPECT_EQ(target.config.dp, 8) << text;
    EXPECT_EQ(target.config.sharding, Sharding::Zero3) << text;
  }
  const auto both = std::get<ParallelTarget>(parseParallelTarget("16x A100-80GB, tp2, pp2, mb4"));
  EXPECT_EQ(both.gpu, "A100-80GB");
  EXPECT_EQ(both.config.dp, 4);
  EXPECT_EQ(both.config.tp, 2);
  EXPECT_EQ(both.config.pp, 2);
  EXPECT_EQ(both.config.microbatches, 4);
  EXPECT_EQ(std::get<TargetTextProblem>(parseParallelTarget("8x")).kind,
            TargetTextProblemKind::BadNumber);
}

// FSDP2's MixedPrecisionPolicy as words: torch's dtype names read too, and the text
// round-trips.
TEST(ParallelTarget, ReadsFsdpMixedPrecision) {
  const auto parsed =
      std::get<ParallelTarget>(parseParallelTarget("8x H100-SXM, FSDP, param bf16, reduce fp32"));
  EXPECT_EQ(parsed.config.paramDtype, ScalarType::BFloat16);
  EXPECT_EQ(parsed.config.reduceDtype, ScalarType::Float32);
  const auto round =
      std::get<ParallelTarget>(parseParallelTarget(parallelConfigText(parsed.config)));
  EXPECT_EQ(round.config.paramDtype, ScalarType::BFloat16);
  EXPECT_EQ(round.config.reduceDtype, ScalarType::Float32);
  const auto torchNames = std::get<ParallelTarget>(parseParallelTarget("fsdp dp8 param float16"));
  EXPECT_EQ(torchNames.config.paramDtype, ScalarType::Float16);
  EXPECT_FALSE(torchNames.config.reduceDtype.has_value());
  const auto bad = std::get<TargetTextProblem>(parseParallelTarget("fsdp dp8 param int8"));
  EXPECT_EQ(bad.kind, TargetTextProblemKind::UnknownWord);
  EXPECT_EQ(bad.word, "param int8");
}

// Where the `count` ops the rank runs right before `block`'s first backward op (its rerun)
// begin; end() when that op is missing.
std::vector<OpRecord>::const_iterator rerunOf(const RankTrace& rank, const Trace& trace,
                                              const RepeatedBlock& block, size_t count) {
  const OpRecord& firstBackward = trace.ops[*block.firstBackward];
  const auto at = std::find_if(rank.trace.ops.begin(), rank.trace.ops.end(),
                               [&](const OpRecord& op) { return op.id == firstBackward.id; });
  return at == rank.trace.ops.end() ? at : at - static_cast<std::ptrdiff_t>(count);
}

// Recomputation: before each block's backward, its forward runs again up to the last op
// whose output that backward needs; here every op saves its output, so all but the closing
// residual add (the next block's input). Forward keeps the first block's input and each
// block's output, nothing else of the blocks.
TEST(ParallelTransform, RecomputeRerunsEachBlockBeforeItsBackwardAndKeepsItsInput) {
  const Trace trace = syntheticTransformer(4);
  const ModelStructure model = analyzeModel(trace);
  ASSERT_EQ(model.blocks.size(), static_cast<size_t>(kBlocks));
  ParallelConfig config;
  config.recompute = true;
  const RankTrace rank = transformForRank(trace, model, config);
  const std::vector<std::string> rerun = {
      "aten::native_layer_norm", "aten::addmm", "aten::view",  "aten::bmm",
      "aten::_softmax",          "aten::bmm",   "aten::addmm", "aten::add",
      "aten::native_layer_norm", "aten::addmm", "aten::gelu",  "aten::addmm"};
  ASSERT_EQ(rank.trace.ops.size(), trace.ops.size() + kBlocks * rerun.size());
  const int64_t activation = 4 * 8 * 16 * 4; // [B, L, h] float32
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    const auto start = rerunOf(rank, trace, model.blocks[b], rerun.size());
    ASSERT_NE(start, rank.trace.ops.end());
    for (size_t k = 0; k < rerun.size(); ++k) {
      const OpRecord& op = start[static_cast<std::ptrdiff_t>(k)];
      EXPECT_EQ(op.name, rerun[k]) << "block " << b << ", rerun op " << k;
      EXPECT_EQ(op.phase, Phase::Backward);
      EXPECT_EQ(op.module.rfind("blocks." + std::to_string(b), 0), 0u) << op.module;
      EXPECT_FALSE(op.savedBytes.has_value());
    }
    // What the rerun saves: the outputs of those ops (the synthetic trace saves every one).
    int64_t saved = 0;
    for (size_t i = model.blocks[b].firstForward; i < model.blocks[b].lastForward; ++i)
      saved += trace.ops[i].savedBytes.value_or(0);
    EXPECT_EQ(rank.recomputedSavedBytes[b], saved);
  }
  int64_t keptInBlocks = 0;
  for (size_t i = 0; i < rank.trace.ops.size(); ++i)
    if (rank.opBlock[i] >= 0 && rank.trace.ops[i].phase == Phase::Forward)
      keptInBlocks += rank.trace.ops[i].savedBytes.value_or(0);
  EXPECT_EQ(keptInBlocks, activation + kBlocks * activation);

  // Priced: the same forward, a backward longer by the reruns, and less memory.
  ParallelConfig plain;
  const ParallelSummary without = predictLayout(trace, plain);
  const ParallelSummary with = predictLayout(trace, config);
  EXPECT_GT(with.iterationMs, without.iterationMs);
  EXPECT_EQ(with.stages[0].forwardMs, without.stages[0].forwardMs);
  EXPECT_LT(with.stages[0].memory.activationsBytes, without.stages[0].memory.activationsBytes);
  EXPECT_DOUBLE_EQ(with.modelFlops, without.modelFlops) << "MFU counts the model's FLOPs once";
  const auto parsed = parseParallelTarget(parallelConfigText(config));
  EXPECT_TRUE(std::get<ParallelTarget>(parsed).config.recompute);
}

// Every second block (torchtitan's layer checkpointing): blocks 1 and 3 rerun, 0 and 2 keep
// what they saved. The peak can come at the last block's rerun, with the traced blocks'
// activations still held; it lies between no recomputation and recomputing every block.
TEST(ParallelTransform, RecomputeEverySecondBlockRerunsOnlyThose) {
  const Trace trace = syntheticTransformer(4);
  const ModelStructure model = analyzeModel(trace);
  ASSERT_EQ(model.blocks.size(), static_cast<size_t>(kBlocks));
  ParallelConfig every;
  every.recompute = true;
  every.recomputeEvery = 2;
  const RankTrace rank = transformForRank(trace, model, every);
  ASSERT_EQ(rank.recomputedSavedBytes.size(), model.blocks.size());
  size_t reruns = 0;
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    EXPECT_EQ(rank.recomputedSavedBytes[b] > 0, b % 2 == 1) << "block " << b;
    for (size_t i = 0; i < rank.trace.ops.size(); ++i)
      reruns += rank.opBlock[i] == static_cast<int>(b) &&
                rank.trace.ops[i].phase == Phase::Backward &&
                rank.trace.ops[i].name == "aten::native_layer_norm";
  }
  EXPECT_EQ(reruns, 2u * 2u); // two norms per rerun block
  ParallelConfig all = every;
  all.recomputeEvery = 1;
  const ParallelSummary none = predictLayout(trace, ParallelConfig{});
  const ParallelSummary half = predictLayout(trace, every);
  const ParallelSummary full = predictLayout(trace, all);
  EXPECT_GT(half.iterationMs, none.iterationMs);
  EXPECT_LT(half.iterationMs, full.iterationMs);
  EXPECT_LT(half.stages[0].memory.peakBytes(), none.stages[0].memory.peakBytes());
  EXPECT_GT(half.stages[0].memory.peakBytes(), full.stages[0].memory.peakBytes());
  const auto parsed = parseParallelTarget(parallelConfigText(every));
  EXPECT_EQ(std::get<ParallelTarget>(parsed).config.recomputeEvery, 2);
  EXPECT_TRUE(std::get<ParallelTarget>(parsed).config.recompute);
}

// torchtitan's per-op policy on Linears without bias (aten::mm): the first and third matmul
// of a block (QKV, up) keep their outputs and do not run again, the second and fourth (out,
// down) rerun, as do attention's bmm and softmax (this trace saves every op's output, so
// everything up to the closing residual add is needed).
TEST(ParallelTransform, RecomputeOpsSavesEveryOtherMatmul) {
  Trace trace = syntheticTransformer(4);
  for (auto& op : trace.ops)
    if (op.name == "aten::addmm")
      op.name = "aten::mm";
  const ModelStructure model = analyzeModel(trace);
  ASSERT_EQ(model.blocks.size(), static_cast<size_t>(kBlocks));
  ParallelConfig config;
  config.recompute = true;
  config.recomputePolicy = RecomputePolicy::SelectiveOps;
  const RankTrace rank = transformForRank(trace, model, config);
  const std::vector<std::string> rerun = {"aten::native_layer_norm",
                                          "aten::view",
                                          "aten::bmm",
                                          "aten::_softmax",
                                          "aten::bmm",
                                          "aten::mm",
                                          "aten::add",
                                          "aten::native_layer_norm",
                                          "aten::gelu",
                                          "aten::mm"};
  ASSERT_EQ(rank.trace.ops.size(), trace.ops.size() + kBlocks * rerun.size());
  const int64_t activation = 4 * 8 * 16 * 4; // [B, L, h] float32
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    const auto start = rerunOf(rank, trace, model.blocks[b], rerun.size());
    ASSERT_NE(start, rank.trace.ops.end());
    for (size_t k = 0; k < rerun.size(); ++k)
      EXPECT_EQ(start[static_cast<std::ptrdiff_t>(k)].name, rerun[k])
          << "block " << b << ", rerun op " << k;
    // Kept from forward: QKV's output ([B, L, 3h]) and up's ([B, L, 4h]).
    EXPECT_EQ(rank.recomputeKeptBytes[b], 3 * activation + 4 * activation) << "block " << b;
  }
  const auto parsed = parseParallelTarget(parallelConfigText(config));
  EXPECT_EQ(std::get<ParallelTarget>(parsed).config.recomputePolicy, RecomputePolicy::SelectiveOps);
}

} // namespace
} // namespace wavecast
