// The two ways into a multi-GPU prediction must agree (docs/parallel.md, "The two ways
// agree"): a single-GPU script transformed by --dp/--fsdp/--tp, and the same model written
// with DDP, FSDP2 or DTensor tensor parallelism and traced as one rank under torch's fake
// process group; --recompute against the same model with torch.utils.checkpoint around each
// block, around every second one, or under torchtitan's per-op policy; --pp against
// torch.distributed.pipelining; and --ep against a mixture of experts spread over the ranks
// as torchtitan's token dispatch spreads it. The twins are tests/cli/fixtures/twins/: one
// model (twin_model.py), eight ways to launch it, and a mixture of experts (moe_model.py),
// two ways.
//
// Bytes: the same collectives of the same sizes, per kind. The fake process group's side is
// what PyTorch really issues; each expected figure is also worked out by hand from the
// model's parameter and activation sizes.
// Time: both traces priced by the same predictor on the same node (HGX H100, roofline).
// They differ only where the scripts really do different work, so the iterations must be
// within 3% of each other, and the kernels' time too (each test says what the remaining
// difference is); DTensor's tensor parallelism issues more ops than Megatron's (below).
#include "cli_run.h"

#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

// twin_model.py: DIM 1024, 8 heads, 4 blocks, sequence 128, float32; batch 32 per replica
// (4,096 tokens: enough work that the GPU, not the CPU issuing it, sets the time).
constexpr int64_t kDim = 1024, kDepth = 4, kSequence = 128, kBatch = 32, kFloat = 4;
constexpr int64_t kNormParams = 2 * kDim;
constexpr int64_t kBlockParams = (kDim * 3 * kDim + 3 * kDim) + (kDim * kDim + kDim) +
                                 (kDim * 4 * kDim + 4 * kDim) + (4 * kDim * kDim + kDim) +
                                 2 * kNormParams;
constexpr int64_t kBlockBytes = kBlockParams * kFloat;
constexpr int64_t kModelBytes = kDepth * kBlockBytes + kNormParams * kFloat;
constexpr int64_t kActivationBytes = kBatch * kSequence * kDim * kFloat;
constexpr double kTimeTolerance = 0.03;

std::string twin(const std::string& name) {
  return std::string(CLI_FIXTURES) + "/twins/" + name;
}

struct Volume {
  int count = 0;
  int64_t bytes = 0;
  std::vector<int64_t> sizes; // in issue order
};
using Volumes = std::map<std::string, Volume>; // collective kind -> its volume

struct Predicted {
  double iterationMs = 0;
  double communicationMs = 0;
  double gpuMs = 0; // kernels, collectives not included
};

class TwoWaysAgree : public testing::Test {
protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/wavecast-twins-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    single_ = traceTo("single.py");
  }
  static void TearDownTestSuite() { std::system(("rm -rf " + dir_).c_str()); }

  // Traces a twin (at batch 32) and returns the saved trace's path ("" on failure).
  static std::string traceTo(const std::string& name, int64_t batch = kBatch) {
    const std::string out = dir_ + "/" + name + ".json";
    const CliRun run = wavecast("trace " + twin(name) + " --batch-size " + std::to_string(batch) +
                                " --out " + out);
    EXPECT_EQ(run.status, 0) << name << ": " << run.err;
    return run.status == 0 ? out : "";
  }

  // What one rank of the fake process group issued, from the trace's collective ops.
  static Volumes traced(const std::string& path) {
    Volumes volumes;
    const json trace = json::parse(slurp(path));
    for (const auto& op : trace.at("ops")) {
      const auto& args = op.at("args");
      if (!args.contains("collective"))
        continue;
      Volume& v = volumes[args.at("collective").get<std::string>()];
      v.count += 1;
      v.bytes += args.at("bytes").get<int64_t>();
      v.sizes.push_back(args.at("bytes").get<int64_t>());
    }
    return volumes;
  }

  // What the transform's rank issues: its `wavecast::KIND` ops in the results JSON.
  static Volumes transformed(const json& doc) {
    Volumes volumes;
    for (const auto& op : doc.at("ops")) {
      if (op.at("family") != "collective")
        continue;
      const std::string name = op.at("name");
      Volume& v = volumes[name.substr(name.find("::") + 2)];
      v.count += 1;
      v.bytes += static_cast<int64_t>(op.at("bytes").get<double>());
      v.sizes.push_back(static_cast<int64_t>(op.at("bytes").get<double>()));
    }
    return volumes;
  }

  static json predict(const std::string& trace, const std::string& flags) {
    const CliRun run = wavecast("predict " + trace + " --gpu H100 --roofline --json " + flags);
    EXPECT_EQ(run.status, 0) << run.err;
    return run.status == 0 ? json::parse(run.out) : json::object();
  }

  // The fake-process-group trace priced as it is (one rank), and the single-GPU trace
  // transformed by `layout`.
  static std::pair<Predicted, Predicted> times(const json& distributed, const json& whatIf) {
    const auto& rank = distributed.at("summaries")[0];
    const auto& layout = whatIf.at("parallel")[0];
    return {{rank.at("iteration_ms").get<double>(), rank.at("comm_ms").get<double>(),
             rank.at("gpu_ms").get<double>()},
            {layout.at("iteration_ms").get<double>(), layout.at("communication_ms").get<double>(),
             whatIf.at("summaries")[0].at("gpu_ms").get<double>()}};
  }

  static void expectClose(double traced, double transformed, double tolerance,
                          const std::string& what) {
    EXPECT_NEAR(transformed, traced, tolerance * traced)
        << what << ": the transform says " << transformed << ", the traced script " << traced;
  }

  static double peakAllocated(const json& summary) {
    return summary.at("memory").at("peak_allocated_bytes").get<double>();
  }

  // A twin that recomputes on one GPU, priced as traced (`traced`), against the single-GPU
  // trace transformed to do the same (`whatIf`): the same kernels (1%), the same iteration
  // (3%), the same peak allocated memory (`peakTolerance`).
  static void expectSameRecomputation(const json& traced, const json& whatIf,
                                      double peakTolerance) {
    ASSERT_FALSE(whatIf.at("parallel").empty());
    const auto& rank = traced.at("summaries")[0];
    const auto& transformed = whatIf.at("summaries")[0];
    expectClose(rank.at("gpu_ms").get<double>(), transformed.at("gpu_ms").get<double>(), 0.01,
                "kernels");
    expectClose(rank.at("iteration_ms").get<double>(),
                whatIf.at("parallel")[0].at("iteration_ms").get<double>(), kTimeTolerance,
                "iteration");
    expectClose(peakAllocated(rank), peakAllocated(transformed), peakTolerance, "peak allocated");
  }

  static std::string dir_;
  static std::string single_;
};
std::string TwoWaysAgree::dir_;
std::string TwoWaysAgree::single_;

// DDP: gradients all-reduced in buckets filled in reverse registration order, the first
// closing past 1 MiB, the others past 25 MiB (torch's _DEFAULT_FIRST_BUCKET_BYTES,
// bucket_cap_mb). By hand: the final norm (8 KiB), block 3's down bias and weight close the
// first bucket; the others take up, norm2, out and qkv of a block (33.6 MB) or the
// remainder.
TEST_F(TwoWaysAgree, DdpBucketsAndTime) {
  ASSERT_FALSE(single_.empty());
  const std::string ddp = traceTo("ddp.py");
  ASSERT_FALSE(ddp.empty());
  const Volumes real = traced(ddp);
  const json whatIf = predict(single_, "--dp 8");
  const Volumes analytic = transformed(whatIf);
  ASSERT_EQ(real.size(), 1u);
  ASSERT_EQ(analytic.size(), 1u);
  EXPECT_EQ(real.at("all_reduce").bytes, kModelBytes) << "every gradient once";
  EXPECT_EQ(analytic.at("all_reduce").bytes, kModelBytes);
  const int64_t down = (4 * kDim * kDim + kDim) * kFloat;
  EXPECT_EQ(real.at("all_reduce").sizes.front(), kNormParams * kFloat + down);
  EXPECT_EQ(analytic.at("all_reduce").sizes, real.at("all_reduce").sizes) << "the same buckets";

  const auto [rank, layout] = times(predict(ddp, ""), whatIf);
  expectClose(rank.communicationMs, layout.communicationMs, 1e-6, "communication");
  // The transform adds DDP's reducer copies (each gradient into its bucket divided by the
  // world size, and back after the all-reduce): the same kernels as the traced script's.
  expectClose(rank.gpuMs, layout.gpuMs, 0.01, "kernels");
  expectClose(rank.iterationMs, layout.iterationMs, kTimeTolerance, "iteration");
}

// FSDP2 (fully_shard per block, then the root): per block an all-gather of its parameters
// before forward and again before backward, and a reduce-scatter of its gradients; the
// root's parameters (the final norm) gathered once, its gradients reduce-scattered.
TEST_F(TwoWaysAgree, FsdpGathersScattersAndTime) {
  ASSERT_FALSE(single_.empty());
  const std::string fsdp = traceTo("fsdp2.py");
  ASSERT_FALSE(fsdp.empty());
  const Volumes real = traced(fsdp);
  const json whatIf = predict(single_, "--fsdp --dp 8");
  const Volumes analytic = transformed(whatIf);
  const int64_t root = kNormParams * kFloat;
  for (const Volumes* side : {&real, &analytic}) {
    ASSERT_EQ(side->count("all_gather"), 1u);
    ASSERT_EQ(side->count("reduce_scatter"), 1u);
    EXPECT_EQ(side->at("all_gather").count, 2 * kDepth + 1);
    EXPECT_EQ(side->at("all_gather").bytes, 2 * kDepth * kBlockBytes + root);
    EXPECT_EQ(side->at("reduce_scatter").count, kDepth + 1);
    EXPECT_EQ(side->at("reduce_scatter").bytes, kModelBytes);
  }

  const auto [rank, layout] = times(predict(fsdp, ""), whatIf);
  expectClose(rank.communicationMs, layout.communicationMs, 1e-6, "communication");
  // With FSDP2's copies around each collective (copy-in, split copy-out, chunk_cat).
  expectClose(rank.gpuMs, layout.gpuMs, 0.01, "kernels");
  // The rest: FSDP2 issues a block's forward all-gather when the block is called, and the
  // predictor starts a collective only once the compute issued before it is done, so the
  // traced gathers hide less than the transform's, issued a block ahead (FSDP2's
  // all-gather stream does not wait for compute: in a real run they overlap as well).
  expectClose(rank.iterationMs, layout.iterationMs, kTimeTolerance, "iteration");
}

// FSDP2 with torchtitan's MixedPrecisionPolicy (bf16 parameters, fp32 reduction) against
// the single-GPU twin under bf16 autocast transformed by --fsdp --param-dtype bf16
// --reduce-dtype fp32: each gather moves 2 bytes a parameter, each reduce-scatter 4.
TEST_F(TwoWaysAgree, FsdpMixedPrecisionGathersBf16AndReducesFp32) {
  const std::string mixed = traceTo("fsdp2_mixed.py");
  const std::string autocast = traceTo("single_bf16.py");
  ASSERT_FALSE(mixed.empty());
  ASSERT_FALSE(autocast.empty());
  const Volumes real = traced(mixed);
  const json whatIf = predict(autocast, "--fsdp --dp 8 --param-dtype bf16 --reduce-dtype fp32");
  ASSERT_FALSE(whatIf.at("parallel").empty());
  EXPECT_EQ(whatIf.at("parallel")[0].at("param_dtype"), "bfloat16");
  EXPECT_EQ(whatIf.at("parallel")[0].at("reduce_dtype"), "float32");
  const Volumes analytic = transformed(whatIf);
  constexpr int64_t kBf16 = 2;
  for (const Volumes* side : {&real, &analytic}) {
    ASSERT_EQ(side->count("all_gather"), 1u);
    ASSERT_EQ(side->count("reduce_scatter"), 1u);
    EXPECT_EQ(side->at("all_gather").bytes, (2 * kDepth * kBlockParams + kNormParams) * kBf16);
    EXPECT_EQ(side->at("reduce_scatter").bytes, kModelBytes);
  }
  // autocast's casts of the weights are gone from the rank: FSDP hands the blocks bf16
  // parameters.
  int parameterCasts = 0;
  for (const auto& op : whatIf.at("ops"))
    parameterCasts += op.at("name") == "aten::_to_copy" && op.at("family") == "copy" &&
                      op.at("bytes").get<double>() == 3.0 * kDim * kDim * (kFloat + kBf16);
  EXPECT_EQ(parameterCasts, 0);
  const auto [rank, layout] = times(predict(mixed, ""), whatIf);
  expectClose(rank.communicationMs, layout.communicationMs, 1e-6, "communication");
  // What remains is work the two scripts really do differently: autocast runs the layer
  // norms and the loss in fp32 and casts their results, FSDP's bf16 parameters keep them in
  // bf16.
  expectClose(rank.gpuMs, layout.gpuMs, 0.06, "kernels");
  expectClose(rank.iterationMs, layout.iterationMs, 0.06, "iteration");
  // A bf16 gather of a script that computes in fp32 is refused, with what to change.
  const CliRun refused =
      wavecast("predict " + single_ + " --gpu H100 --fsdp --dp 8 " + "--param-dtype bf16");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("torch.autocast(\"cuda\", dtype=torch.bfloat16)"), std::string::npos)
      << refused.err;
}

// Megatron tensor parallelism over 8 ranks: per block an all-reduce of the batch's
// activations after the out and down projections in forward, and after the QKV and up
// projections' input gradients in backward: 4 per block, 2 MiB each.
TEST_F(TwoWaysAgree, TensorParallelAllReducesAndTime) {
  ASSERT_FALSE(single_.empty());
  const std::string tp = traceTo("tensor_parallel.py");
  ASSERT_FALSE(tp.empty());
  const Volumes real = traced(tp);
  const json whatIf = predict(single_, "--tp 8");
  const Volumes analytic = transformed(whatIf);
  for (const Volumes* side : {&real, &analytic}) {
    ASSERT_EQ(side->size(), 1u);
    EXPECT_EQ(side->at("all_reduce").count, 4 * kDepth);
    EXPECT_EQ(side->at("all_reduce").sizes, std::vector<int64_t>(4 * kDepth, kActivationBytes));
  }

  const auto [rank, layout] = times(predict(tp, ""), whatIf);
  expectClose(rank.communicationMs, layout.communicationMs, 1e-6, "communication");
  // DTensor adds a division of the bias before each row-parallel all-reduce (Partial plus
  // Replicate), which Megatron does not, and the twin steps two optimizers (DTensor and
  // plain parameters cannot share a foreach step): a few more kernels...
  expectClose(rank.gpuMs, layout.gpuMs, 0.05, "kernels");
  // ...and, an eighth of the model per rank being host-bound on an H100, their 50 us each
  // of CPU time show in the iteration: the DTensor script is up to 10% slower.
  EXPECT_GE(rank.iterationMs, layout.iterationMs);
  expectClose(rank.iterationMs, layout.iterationMs, 0.10, "iteration");
}

// Activation recomputation: the twin with each block under torch.utils.checkpoint
// (non-reentrant), traced on one GPU, against the single-GPU trace transformed by
// --recompute. Autograd keeps each block's input instead of its activations, and before a
// block's backward its forward runs again up to GELU (the down projection and the residual
// add make nothing its backward needs). Same kernels, same iteration, same memory at the
// backward peak (the last block to rerun, with every other block's gradients).
TEST_F(TwoWaysAgree, RecomputeRerunsEachBlockAndKeepsItsInput) {
  ASSERT_FALSE(single_.empty());
  const std::string checkpointed = traceTo("checkpointed.py");
  ASSERT_FALSE(checkpointed.empty());
  const json traced = predict(checkpointed, "");
  const json whatIf = predict(single_, "--recompute");
  const json plain = predict(single_, "");
  expectSameRecomputation(traced, whatIf, 0.02);
  const auto& layout = whatIf.at("parallel")[0];
  EXPECT_TRUE(layout.at("recompute").get<bool>());
  EXPECT_EQ(layout.at("gpus"), 1);
  // The rerun costs about the blocks' forward: more than a fifth of the plain iteration.
  EXPECT_GT(layout.at("iteration_ms").get<double>(),
            1.2 * plain.at("summaries")[0].at("iteration_ms").get<double>());

  const auto& rank = traced.at("summaries")[0];
  const auto& transformed = whatIf.at("summaries")[0];
  // Kept through backward: the four blocks' inputs and the final norm's, [32, 128, 1024]
  // float32 each, and a few small tensors of the loss.
  EXPECT_NEAR(rank.at("memory").at("activations_saved_bytes").get<double>(),
              (kDepth + 1) * kActivationBytes, 0.01 * kActivationBytes);
  EXPECT_LT(peakAllocated(transformed), 0.75 * peakAllocated(plain.at("summaries")[0]));

  // The checkpointed script recomputes already: asked again, the layout is refused.
  const CliRun twice = wavecast("predict " + checkpointed + " --gpu H100 --roofline --recompute");
  EXPECT_NE(twice.status, 0);
  EXPECT_NE(twice.err.find("already recomputes"), std::string::npos) << twice.err;
}

// --recompute-every 2 against the twin that checkpoints blocks 1 and 3 only. The peak comes
// at the start of backward, while block 3 reruns and blocks 0-2 hold what they keep; the
// traced one also holds the first gradient block 3's backward makes (16.8 MB, the down
// projection's weight): 2.3% more.
TEST_F(TwoWaysAgree, RecomputeEverySecondBlock) {
  ASSERT_FALSE(single_.empty());
  const std::string alternate = traceTo("checkpointed_alternate.py");
  ASSERT_FALSE(alternate.empty());
  const json traced = predict(alternate, "");
  const json whatIf = predict(single_, "--recompute-every 2");
  expectSameRecomputation(traced, whatIf, 0.03);
  EXPECT_EQ(whatIf.at("parallel")[0].at("recompute_every"), 2);
  const auto& rank = traced.at("summaries")[0];
  const auto& transformed = whatIf.at("summaries")[0];
  EXPECT_EQ(rank.at("memory").at("peak_phase"), "backward");
  EXPECT_EQ(transformed.at("memory").at("peak_phase"), "backward");
}

// --recompute-ops against the twin checkpointed under torchtitan's per-op policy. Each block
// keeps attention's outputs from forward and reruns the rest up to GELU; at the peak (block
// 0's rerun) that is the same memory as recomputing whole blocks: the later blocks' saved
// attention is freed by then, and block 0's would be recomputed anyway.
TEST_F(TwoWaysAgree, RecomputeOpsKeepsAttention) {
  ASSERT_FALSE(single_.empty());
  const std::string selective = traceTo("selective.py");
  ASSERT_FALSE(selective.empty());
  const json traced = predict(selective, "");
  const json whatIf = predict(single_, "--recompute-ops");
  expectSameRecomputation(traced, whatIf, 0.02);
  EXPECT_EQ(whatIf.at("parallel")[0].at("recompute_policy"), "ops");
  // Attention runs once per block in forward and never again: no rerun of it in backward.
  const auto attentionRuns = [](const json& ops) {
    int count = 0;
    for (const auto& op : ops)
      count += op.at("name") == "aten::_scaled_dot_product_efficient_attention";
    return count;
  };
  EXPECT_EQ(attentionRuns(json::parse(slurp(selective)).at("ops")), kDepth);
  EXPECT_EQ(attentionRuns(whatIf.at("ops")), kDepth);
}

// Pipeline: the first of two stages (blocks 0 and 1) over four microbatches of 8, GPipe, as
// torch.distributed.pipelining runs it, and --pp 2 --microbatches 4. Each microbatch runs
// every op of the stage again on a quarter of the batch, so the host issues everything four
// times. By hand: the stage sends each microbatch's block-1 output on ([8, 128, 1024]
// float32, four sends), and from the second microbatch on each of its 24 parameters (12 per
// block) adds the new gradient to the one kept (3 x 24 add_). The traced rank also receives
// the gradients back (recv), which the transform puts on the next stage as its sends.
TEST_F(TwoWaysAgree, PipelineStageRunsEveryMicrobatch) {
  ASSERT_FALSE(single_.empty());
  const std::string pipelined = traceTo("pipelined.py");
  ASSERT_FALSE(pipelined.empty());
  constexpr int kMicrobatches = 4, kStageParameters = 24;
  const int64_t sendBytes = kActivationBytes; // four quarters of the batch's activation
  const Volumes fake = traced(pipelined);
  const json whatIf = predict(single_, "--pp 2 --microbatches 4 --schedule gpipe");
  const Volumes ours = transformed(whatIf);
  ASSERT_TRUE(fake.count("send") && ours.count("send"));
  EXPECT_EQ(fake.at("send").count, kMicrobatches);
  EXPECT_EQ(ours.at("send").count, kMicrobatches);
  EXPECT_EQ(fake.at("send").bytes, sendBytes);
  EXPECT_EQ(ours.at("send").bytes, sendBytes);

  const auto accumulations = [](const json& ops) {
    int count = 0;
    for (const auto& op : ops)
      count += op.at("name") == "aten::add_" && op.at("phase") == "backward";
    return count;
  };
  EXPECT_EQ(accumulations(json::parse(slurp(pipelined)).at("ops")),
            (kMicrobatches - 1) * kStageParameters);
  EXPECT_EQ(accumulations(whatIf.at("ops")), (kMicrobatches - 1) * kStageParameters);
  // AdamW reads each of the stage's step counters twice on the CPU (its bias corrections).
  const auto stepCounterReads = [](const json& ops) {
    int count = 0;
    for (const auto& op : ops)
      count += op.at("name") == "aten::_local_scalar_dense" && op.at("phase") == "optimizer";
    return count;
  };
  EXPECT_EQ(stepCounterReads(json::parse(slurp(pipelined)).at("ops")), 2 * kStageParameters);
  EXPECT_EQ(stepCounterReads(whatIf.at("ops")), 2 * kStageParameters);

  // The rank's own work, no bubble on either side: the traced rank never waits for its
  // neighbour, and the layout's rank summary is its first stage's.
  const json distributed = predict(pipelined, "");
  const auto& rank = distributed.at("summaries")[0];
  const auto& stage = whatIf.at("summaries")[0];
  expectClose(rank.at("host_ms").get<double>(), stage.at("host_ms").get<double>(), 0.02, "host");
  expectClose(rank.at("iteration_ms").get<double>(), stage.at("iteration_ms").get<double>(),
              kTimeTolerance, "iteration");
  // Kernels within 5%: the traced stage also receives the gradients back (its recv, 1.5%
  // here, which the transform prices on the next stage), and a quarter-batch op costs more
  // than a quarter of the whole batch's where the launch floor holds (the bias gradients'
  // sums: 1%), which the transform's share of a traced op does not see.
  expectClose(rank.at("gpu_ms").get<double>(), stage.at("gpu_ms").get<double>(), 0.05, "kernels");
  // Predicted from the script itself, the transform traces one microbatch (batch 8) again
  // and prices each microbatch's ops at their own shapes, so their launch floors count as
  // the traced rank's do: what is left between the two is the recv.
  const json fromScript =
      predict(twin("single.py"), "--batch-size " + std::to_string(kBatch) +
                                     " --pp 2 --microbatches 4 --schedule gpipe");
  const double tracedKernels = rank.at("gpu_ms").get<double>();
  EXPECT_LT(std::abs(fromScript.at("summaries")[0].at("gpu_ms").get<double>() - tracedKernels),
            std::abs(stage.at("gpu_ms").get<double>() - tracedKernels));
  EXPECT_EQ(accumulations(fromScript.at("ops")), (kMicrobatches - 1) * kStageParameters);
  // Each says how it priced the microbatches: a saved trace's batch is not wavecast's to set.
  EXPECT_EQ(whatIf.at("parallel")[0].at("microbatch_pricing"), "shares");
  EXPECT_EQ(whatIf.at("parallel")[0].at("microbatch_text"),
            "each microbatch priced as 1/4 of the batch's ops");
  EXPECT_EQ(fromScript.at("parallel")[0].at("microbatch_pricing"), "traced");
  EXPECT_EQ(fromScript.at("parallel")[0].at("microbatch_text"),
            "microbatches of 8 priced at their own shapes");
  const auto& first = whatIf.at("parallel")[0].at("stages")[0];
  expectClose(rank.at("forward_ms").get<double>() + rank.at("backward_ms").get<double>(),
              kMicrobatches *
                  (first.at("forward_ms").get<double>() + first.at("backward_ms").get<double>()),
              kTimeTolerance, "the stage's forward and backward");
}

// Expert parallelism over all 8 ranks: per layer, forward, an all-to-all of the float32
// token counts per expert (16: 64 bytes), of the routed tokens (64 x 256 tokens, 2 experts
// each, 512 float32s: 64 MiB) and of the experts' results back; backward, the results'
// gradients and the tokens' again. By hand and from the fake process group alike.
TEST_F(TwoWaysAgree, ExpertParallelAllToAllsAndTime) {
  constexpr int64_t kMoeBatch = 64, kRouted = kMoeBatch * 256 * 2 * 512 * kFloat, kLayers = 2;
  const std::string single = traceTo("moe_single.py", kMoeBatch);
  const std::string spread = traceTo("moe_expert_parallel.py", kMoeBatch);
  ASSERT_FALSE(single.empty() || spread.empty());
  const Volumes real = traced(spread);
  const json whatIf = predict(single, "--dp 8 --ep 8");
  const Volumes analytic = transformed(whatIf);
  const std::vector<int64_t> layer = {16 * kFloat, kRouted, kRouted};
  std::vector<int64_t> forward;
  for (int l = 0; l < kLayers; ++l)
    forward.insert(forward.end(), layer.begin(), layer.end());
  for (const Volumes* volumes : {&real, &analytic}) {
    const Volume& all = volumes->at("all_to_all");
    EXPECT_EQ(std::vector<int64_t>(all.sizes.begin(), all.sizes.begin() + 6), forward);
    EXPECT_EQ(all.count, kLayers * 5);
    EXPECT_EQ(all.bytes, kLayers * (16 * kFloat + 4 * kRouted));
  }
  // The transform's dp all-reduce of what the ranks share (routers and norms, 77,824 bytes);
  // the twin trains without one.
  EXPECT_EQ(analytic.at("all_reduce").bytes, (kLayers * (512 * 16 + 2 * 512) + 2 * 512) * kFloat);
  EXPECT_EQ(real.count("all_reduce"), 0u);

  const auto [rank, layout] = times(predict(spread, ""), whatIf);
  expectClose(rank.communicationMs, layout.communicationMs, 0.02, "communication");
  expectClose(rank.gpuMs, layout.gpuMs, 0.01, "kernels");
  // Within 5%: the twin reads each layer's split sizes one value at a time (.tolist(), 16
  // reads), the transform as torchtitan does, once per layer; after the CPU has waited for
  // the GPU there, those reads are host time the GPU waits for.
  expectClose(rank.iterationMs, layout.iterationMs, 0.05, "iteration");
}

} // namespace
