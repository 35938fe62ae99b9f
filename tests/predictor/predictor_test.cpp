// The predictor end to end: per-line aggregation, throughput, memory, unknown ops, the
// results JSON and collectives; op_pricing_test.cpp prices the ops themselves.
#include "prediction_fixtures.h"
#include "presentation.h"
#include "results_json.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/predictor/predictor.h"
#include "wavecast/predictor/system_database.h"
#include "wavecast/predictor/tensor_core_gemm.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <numeric>

namespace wavecast {
namespace {

using testing::db;
using testing::op;
using testing::smallTrace;
using testing::tensor;

// A script run as written that makes its batches in the loop's process: the wait is the
// iteration's input, on the loop's line, in no phase of the model's; whether the rest is
// host-bound is judged without it.
TEST(Predictor, TheLoopsWaitForItsBatchIsInputNotForward) {
  const auto gpus = db().resolve({"H100"});
  const Prediction plain = Predictor().predict(smallTrace(), gpus);
  Trace trace = smallTrace();
  OpRecord loading;
  loading.id = 100;
  loading.name = "wavecast::data_loading";
  loading.phase = Phase::Forward;
  loading.onHost = true;
  loading.loc = {"/w/train.py", 5, ""};
  loading.args = {{"host_ms", 40.0}, {"loader", int64_t{0}}};
  trace.ops.insert(trace.ops.begin(), loading);
  const Prediction p = Predictor().predict(trace, gpus);
  const GpuSummary& s = p.summaries[0];
  EXPECT_NEAR(s.inputMs, 40.0, 1e-9);
  EXPECT_NEAR(s.forwardMs, plain.summaries[0].forwardMs, 1e-9);
  EXPECT_NEAR(s.iterationMs, 40.0 + plain.summaries[0].iterationMs, 1e-9);
  EXPECT_NEAR(s.iterationMs, s.inputMs + s.forwardMs + s.backwardMs + s.optimizerMs, 1e-12);
  EXPECT_EQ(s.hostBound, plain.summaries[0].hostBound);
  const auto loop = std::find_if(p.lines.begin(), p.lines.end(), [](const LineBreakdown& line) {
    return line.loc.file == "/w/train.py";
  });
  ASSERT_NE(loop, p.lines.end());
  EXPECT_NEAR(loop->perGpu[0].inputMs, 40.0, 1e-9);
  EXPECT_DOUBLE_EQ(loop->perGpu[0].forwardMs, 0);
  const auto input = std::find_if(p.advisories.begin(), p.advisories.end(),
                                  [](const Advisory& a) { return a.as<advisory::InputBound>(); });
  ASSERT_NE(input, p.advisories.end());
  EXPECT_EQ(input->as<advisory::InputBound>()->workers, 0);
  EXPECT_NEAR(input->as<advisory::InputBound>()->waitMs, 40.0, 1e-9);
}

TEST(Predictor, AggregatesPerLinePhaseAndGpu) {
  const auto gpus = db().resolve({"T4,H100"});
  const Prediction p = Predictor().predict(smallTrace(), gpus);
  ASSERT_EQ(p.gpus, (std::vector<std::string>{"T4", "H100-SXM"}));
  ASSERT_EQ(p.summaries.size(), 2u);
  ASSERT_EQ(p.ops.size(), 2u);
  ASSERT_EQ(p.ops[0].size(), 8u);
  EXPECT_NE(predictionMethodText(p).find("analytic roofline"), std::string::npos);

  for (size_t g = 0; g < 2; ++g) {
    const auto& ops = p.ops[g];
    const GpuSummary& s = p.summaries[g];
    EXPECT_DOUBLE_EQ(ops[1].timeMs, 0) << "view is free";
    EXPECT_DOUBLE_EQ(ops[4].timeMs, 0) << "expand is free";
    // Phases carry wall time (host model), GPU time is the kernels' sum.
    EXPECT_DOUBLE_EQ(s.forwardMs, ops[0].wallMs + ops[1].wallMs + ops[2].wallMs + ops[3].wallMs);
    EXPECT_DOUBLE_EQ(s.backwardMs, ops[4].wallMs + ops[5].wallMs + ops[6].wallMs);
    EXPECT_DOUBLE_EQ(s.optimizerMs, ops[7].wallMs);
    EXPECT_NEAR(s.iterationMs, s.forwardMs + s.backwardMs + s.optimizerMs, 1e-12);
    double gpu = 0;
    for (const auto& o : ops)
      gpu += o.timeMs;
    EXPECT_NEAR(s.gpuMs, gpu, 1e-12);
    EXPECT_NEAR(s.gpuIdleMs, s.iterationMs - s.gpuMs, 1e-12);
    // Six ops that launch work (the convolution twice: its bias add; convolution_backward
    // twice: weight and bias gradients), a backward call and an optimizer step, on the CPU.
    const HostOptions host;
    EXPECT_NEAR(
        s.hostMs,
        (6 * host.opUs + 2 * host.extraLaunchUs + host.backwardCallUs + host.optimizerStepUs) *
            1e-3,
        1e-9);
    EXPECT_TRUE(s.hostBound) << "tiny kernels: the GPU waits for the CPU";
    EXPECT_DOUBLE_EQ(s.samplesPerSecond, 32 / (s.iterationMs / 1000));
    EXPECT_NEAR(s.costPer1kSamplesUsd, s.pricePerHourUsd / 3600 * 1000 / s.samplesPerSecond, 1e-12);
    double shares = 0;
    for (const auto& line : p.lines)
      shares += line.perGpu[g].shareOfIteration;
    EXPECT_NEAR(shares, 1.0, 1e-12);
  }
  // Tiny ops: the H100 sits on the launch floor, the T4 is bandwidth bound; on either
  // the CPU issuing them sets the pace.
  EXPECT_GT(p.summaries[0].gpuMs, 2 * p.summaries[1].gpuMs);
  EXPECT_DOUBLE_EQ(p.summaries[1].hostMs, p.summaries[0].hostMs);
  const auto hostBound = [&](const Advisory& advisory) {
    const auto* facts = advisory.as<advisory::HostBound>();
    const auto h100 = std::find_if(p.summaries.begin(), p.summaries.end(),
                                   [](const GpuSummary& s) { return s.gpuId == "H100-SXM"; });
    return facts && h100 != p.summaries.end() && facts->gpu == "H100-SXM" &&
           facts->gpuIdleMs == h100->gpuIdleMs && facts->iterationMs == h100->iterationMs;
  };
  EXPECT_NE(std::find_if(p.advisories.begin(), p.advisories.end(), hostBound), p.advisories.end());

  // Lines sorted; line 10 = conv forward + its backward.
  ASSERT_EQ(p.lines.size(), 4u);
  EXPECT_EQ(p.lines[0].loc.line, 10);
  EXPECT_EQ(p.lines[3].loc.line, 20);
  EXPECT_DOUBLE_EQ(p.lines[0].perGpu[0].forwardMs, p.ops[0][0].wallMs);
  EXPECT_DOUBLE_EQ(p.lines[0].perGpu[0].backwardMs, p.ops[0][6].wallMs);
  EXPECT_DOUBLE_EQ(p.lines[0].perGpu[0].gpuMs, p.ops[0][0].timeMs + p.ops[0][6].timeMs);
  // On the T4 the convolution's kernels (3 input channels: off the tensor cores) keep the
  // GPU busy; the relu line's tiny kernels leave it waiting for the CPU.
  EXPECT_FALSE(p.lines[0].perGpu[0].hostBound);
  EXPECT_TRUE(p.lines[1].perGpu[0].hostBound);
  EXPECT_EQ(p.lines[1].opNames, (std::vector<std::string>{"aten::relu"}));
  EXPECT_EQ(p.lines[1].opCount, 2) << "relu and threshold_backward; the view does no work";
  EXPECT_EQ(p.lines[3].opNames, (std::vector<std::string>{"aten::_foreach_add_"}));
  EXPECT_DOUBLE_EQ(p.lines[3].perGpu[1].optimizerMs, p.ops[1][7].wallMs);

  // Modules.
  ASSERT_EQ(p.modules.size(), 3u);
  EXPECT_EQ(p.modules[1].module, "features.0");
  EXPECT_DOUBLE_EQ(p.modules[1].perGpu[0].totalMs(), p.ops[0][0].wallMs + p.ops[0][6].wallMs);
}

// A script that accumulates gradients over four batches of 32 per optimizer step trains on
// 128 samples an iteration: throughput and cost count them all.
TEST(Predictor, SamplesPerSecondCountEveryBatchOfTheStep) {
  const auto gpus = db().resolve({"H100"});
  Trace accumulating = smallTrace();
  accumulating.samplesPerIteration = 4 * accumulating.batchSize;
  const Prediction one = Predictor().predict(smallTrace(), gpus);
  const Prediction four = Predictor().predict(accumulating, gpus);
  EXPECT_EQ(four.batchSize, 32);
  EXPECT_EQ(four.samplesPerIteration, 128);
  EXPECT_EQ(one.samplesPerIteration, 32);
  const GpuSummary& s = four.summaries[0];
  EXPECT_DOUBLE_EQ(s.iterationMs, one.summaries[0].iterationMs);
  EXPECT_DOUBLE_EQ(s.samplesPerSecond, 128 / (s.iterationMs / 1000));
  EXPECT_NEAR(s.costPer1kSamplesUsd, one.summaries[0].costPer1kSamplesUsd / 4, 1e-12);
}

TEST(Predictor, MemoryEstimateAndFit) {
  const Trace trace = smallTrace();
  const MemoryEstimate memory = estimateMemory(trace, *db().find("T4"), PredictorOptions{});
  EXPECT_EQ(memory.weightsBytes, 1000000);
  EXPECT_EQ(memory.gradientsBytes, 1000000);
  EXPECT_EQ(memory.optimizerStateBytes, 2000000);
  // An older trace (no tracer figures): fresh forward results, i.e. the conv output, the
  // relu output and the scalar sum (the view is free).
  EXPECT_EQ(memory.activationsSource, ActivationsSource::UpperBound);
  EXPECT_EQ(memory.activationsBytes, 2 * 2097152 + 4);
  // Allocated: the tensors (no GEMM, so no cuBLAS workspace). Reserved: + cuDNN's
  // workspace of the largest conv operand (the 2 MiB output) + the scalar sum's 512-byte
  // block. Process: + the CUDA context.
  EXPECT_EQ(memory.cublasWorkspaceBytes, 0);
  EXPECT_EQ(memory.allocatedPeakBytes(), 4000000 + 2 * 2097152 + 4);
  EXPECT_EQ(memory.reservedPeakBytes() - memory.allocatedPeakBytes(), 2097152 + 508);
  EXPECT_EQ(memory.processPeakBytes() - memory.reservedPeakBytes(), int64_t{512} << 20);
  EXPECT_EQ(memory.workspaceBytes(), (int64_t{512} << 20) + 2097152 + 508);

  Trace huge = trace;
  huge.ops[0].outputs[0] = tensor({1024, 1024, 1024, 16}); // 64 GiB of activations
  const auto gpus = db().resolve({"T4,H200"});
  const Prediction p = Predictor().predict(huge, gpus);
  EXPECT_FALSE(p.summaries[0].fitsInMemory);
  EXPECT_TRUE(p.summaries[1].fitsInMemory);
  EXPECT_EQ(p.summaries[0].memoryCapacityBytes, int64_t{15} << 30);
  ASSERT_EQ(p.advisories.size(), 1u);
  const auto* outOfMemory = p.advisories[0].as<advisory::OutOfMemory>();
  ASSERT_NE(outOfMemory, nullptr);
  EXPECT_EQ(outOfMemory->gpu, "T4");
  EXPECT_EQ(outOfMemory->capacityBytes, int64_t{15} << 30);
}

TEST(Predictor, UnknownOpsAreFlaggedNeverZero) {
  Trace trace;
  trace.batchSize = 4;
  trace.ops.push_back(
      op(0, "aten::frobnicate", Phase::Forward, 3, {tensor({1 << 20})}, {tensor({1 << 20})}));
  trace.ops.push_back(
      op(1, "aten::frobnicate", Phase::Forward, 4, {tensor({1 << 20})}, {tensor({1 << 20})}));
  const Prediction p = Predictor().predict(trace, db().resolve({"L4"}));
  EXPECT_TRUE(p.ops[0][0].approximate);
  EXPECT_EQ(p.ops[0][0].method, PredictionMethod::Fallback);
  EXPECT_GT(p.ops[0][0].timeMs, 0);
  const advisory::ApproximateOp* approximate = nullptr;
  for (const Advisory& advisory : p.advisories)
    if (advisory.kind() == AdvisoryKind::ApproximateOp) {
      ASSERT_EQ(approximate, nullptr) << "one advisory per op name";
      approximate = advisory.as<advisory::ApproximateOp>();
    }
  ASSERT_NE(approximate, nullptr);
  EXPECT_EQ(approximate->op, "aten::frobnicate");
  EXPECT_EQ(approximate->count, 2);
  EXPECT_EQ(approximate->family, p.ops[0][0].family);
}

TEST(Predictor, JsonHasTheDocumentedShape) {
  const auto gpus = db().resolve({"T4,A10"});
  const Trace trace = smallTrace();
  const auto doc = resultsJson(Predictor().predict(trace, gpus), traceFacts(trace));
  EXPECT_EQ(doc["batch_size"], 32);
  EXPECT_EQ(doc["gpus"], nlohmann::json({"T4", "A10"}));
  const auto& summary = doc["summaries"][0];
  for (const char* key :
       {"gpu", "name", "iteration_ms", "forward_ms", "backward_ms", "optimizer_ms", "gpu_ms",
        "host_ms", "gpu_idle_ms", "host_bound", "samples_per_second", "cost_per_1k_samples_usd",
        "price_per_hour_usd", "memory", "memory_capacity_bytes", "fits_in_memory"})
    EXPECT_TRUE(summary.contains(key)) << key;
  for (const char* key : {"weights_bytes", "gradients_bytes", "optimizer_state_bytes",
                          "activations_bytes", "workspace_bytes", "peak_bytes"})
    EXPECT_TRUE(summary["memory"].contains(key)) << key;
  const auto& line = doc["lines"][0];
  EXPECT_EQ(line["file"], "/p/model.py");
  EXPECT_EQ(line["line"], 10);
  EXPECT_EQ(line["ops"], nlohmann::json({"aten::convolution"}));
  EXPECT_EQ(line["per_gpu"][1]["gpu"], "A10");
  for (const char* key : {"forward_ms", "backward_ms", "optimizer_ms", "total_ms", "share",
                          "gpu_ms", "gpu_idle_ms", "host_bound"})
    EXPECT_TRUE(line["per_gpu"][0].contains(key)) << key;
  const auto& conv = doc["ops"][0];
  EXPECT_EQ(conv["name"], "aten::convolution");
  EXPECT_EQ(conv["phase"], "forward");
  EXPECT_EQ(conv["family"], "conv");
  EXPECT_DOUBLE_EQ(conv["flops"].get<double>(), 28835840);
  EXPECT_EQ(conv["per_gpu"][0]["method"], "roofline");
  EXPECT_TRUE(conv["per_gpu"][0].contains("wall_ms"));
  // The convolution and PyTorch's add_ of its bias after cuDNN.
  EXPECT_DOUBLE_EQ(conv["host_ms"].get<double>(),
                   (HostOptions().opUs + HostOptions().extraLaunchUs) * 1e-3);
  EXPECT_EQ(doc["ops"][1]["family"], "metadata");
  EXPECT_TRUE(doc["advisories"].is_array());
  EXPECT_TRUE(doc["trace_warnings"].is_array());
  EXPECT_EQ(doc["trace_mode"], "shape");
}

OpRecord collectiveOp(int64_t id, Phase phase, int line, int64_t bytes, int groupSize, bool async) {
  OpRecord record = op(id, "c10d::allreduce_", phase, line, {}, {});
  record.args = {{"collective", std::string("all_reduce")},
                 {"bytes", bytes},
                 {"group_size", int64_t{groupSize}},
                 {"group", std::string("default")},
                 {"async", async}};
  return record;
}

// Backward: a long mm, a 25 MB DDP-like bucket all-reduce (async), another long mm it
// hides behind, a 1 GiB async all-reduce with only a small add after it; the optimizer:
// an add, then a synchronous all-reduce.
Trace ddpLikeTrace(int groupSize) {
  Trace trace;
  trace.batchSize = 8;
  const auto big = tensor({8192, 8192});
  const auto small = tensor({1024});
  trace.ops.push_back(op(0, "aten::mm", Phase::Backward, 30, {big, big}, {big}));
  trace.ops.push_back(collectiveOp(1, Phase::Backward, 40, 25 << 20, groupSize, true));
  trace.ops.push_back(op(2, "aten::mm", Phase::Backward, 31, {big, big}, {big}));
  trace.ops.push_back(collectiveOp(3, Phase::Backward, 41, int64_t{1} << 30, groupSize, true));
  trace.ops.push_back(op(4, "aten::add", Phase::Backward, 32, {small, small}, {small}));
  trace.ops.push_back(op(5, "aten::add", Phase::Optimizer, 50, {small, small}, {small}));
  trace.ops.push_back(collectiveOp(6, Phase::Optimizer, 51, 4 << 20, groupSize, false));
  return trace;
}

PredictorOptions withSystems() {
  PredictorOptions options;
  options.systemDatabase =
      std::make_shared<const SystemDatabase>(SystemDatabase::fromFile(WAVECAST_SYSTEMS_JSON));
  options.collectives = CollectiveModel::fromFile(WAVECAST_COLLECTIVES_JSON);
  return options;
}

const LineTimes& lineOn(const Prediction& prediction, int line) {
  for (const auto& l : prediction.lines)
    if (l.loc.line == line)
      return l.perGpu[0];
  throw std::runtime_error("no line " + std::to_string(line));
}

TEST(Predictor, CollectivesRunOnNcclsStreamBesideCompute) {
  const PredictorOptions options = withSystems();
  const DeviceSpec h100 = *db().find("H100-SXM");
  const Prediction prediction = Predictor(options).predict(ddpLikeTrace(8), {h100});
  const SystemSpec node = options.systemDatabase->defaultFor("H100-SXM");
  ASSERT_EQ(node.id, "HGX-H100");
  const auto& ops = prediction.ops[0];
  const Trace trace = ddpLikeTrace(8);
  for (size_t i : {1u, 3u, 6u}) {
    EXPECT_EQ(ops[i].family, CostFamily::Collective);
    const auto bytes = trace.ops[i].intArg("bytes");
    EXPECT_DOUBLE_EQ(ops[i].timeMs, estimateCollective(CollectiveKind::AllReduce, *bytes, {8, 8},
                                                       node, options.collectives)
                                        .ms);
  }
  // The bucket hides behind the second mm (milliseconds of FP32 work).
  ASSERT_GT(ops[2].timeMs, 10 * ops[1].timeMs);
  EXPECT_DOUBLE_EQ(ops[1].commHiddenMs, ops[1].timeMs);
  EXPECT_DOUBLE_EQ(ops[1].wallMs, 0);
  // The 1 GiB all-reduce has only a small add and the optimizer's host time after it.
  EXPECT_GT(ops[3].commHiddenMs, 0);
  EXPECT_LT(ops[3].commHiddenMs, 0.2 * ops[3].timeMs);
  EXPECT_NEAR(ops[3].wallMs + ops[3].commHiddenMs, ops[3].timeMs, 1e-9);
  // The synchronous one is exposed at once.
  EXPECT_DOUBLE_EQ(ops[6].commHiddenMs, 0);
  EXPECT_GE(ops[6].wallMs, ops[6].timeMs - 1e-12);

  EXPECT_DOUBLE_EQ(lineOn(prediction, 40).commMs, ops[1].timeMs);
  EXPECT_DOUBLE_EQ(lineOn(prediction, 40).commHiddenMs, ops[1].timeMs);
  EXPECT_DOUBLE_EQ(lineOn(prediction, 40).gpuMs, 0) << "communication is not kernel time";
  EXPECT_NEAR(lineOn(prediction, 41).backwardMs, ops[3].wallMs, 1e-12);
  const GpuSummary& summary = prediction.summaries[0];
  EXPECT_NEAR(summary.commMs, ops[1].timeMs + ops[3].timeMs + ops[6].timeMs, 1e-9);
  EXPECT_NEAR(summary.commHiddenMs, ops[1].timeMs + ops[3].commHiddenMs, 1e-9);
  EXPECT_FALSE(summary.hostBound) << "exposed communication is not the GPU idling";

  const auto doc = resultsJson(prediction, traceFacts(trace));
  EXPECT_EQ(doc["ops"][1]["family"], "collective");
  // Times are written to the nanosecond.
  EXPECT_NEAR(doc["summaries"][0]["comm_ms"].get<double>(), summary.commMs, 0.5e-6);
  EXPECT_TRUE(doc["ops"][1]["per_gpu"][0].contains("comm_hidden_ms"));
  EXPECT_FALSE(doc["ops"][0]["per_gpu"][0].contains("comm_hidden_ms"));

  const auto bucketLine =
      std::find_if(prediction.lines.begin(), prediction.lines.end(),
                   [](const LineBreakdown& line) { return line.loc.line == 40; });
  ASSERT_NE(bucketLine, prediction.lines.end());
  const std::string hover = lineHover(prediction, *bucketLine);
  EXPECT_NE(hover.find("**Communication** (NCCL collectives): H100-SXM: all-reduce " +
                       formatMs(ops[1].timeMs) + ", " + formatMs(ops[1].timeMs) +
                       " of it hidden behind backward"),
            std::string::npos)
      << hover;
}

TEST(Predictor, OneRankCommunicatesNothing) {
  const DeviceSpec h100 = *db().find("H100-SXM");
  const Prediction one = Predictor(withSystems()).predict(ddpLikeTrace(1), {h100});
  EXPECT_DOUBLE_EQ(one.summaries[0].commMs, 0);
  // Without the collectives at all, the same iteration.
  Trace alone = ddpLikeTrace(1);
  alone.ops.erase(alone.ops.begin() + 6);
  alone.ops.erase(alone.ops.begin() + 3);
  alone.ops.erase(alone.ops.begin() + 1);
  const Prediction without = Predictor(withSystems()).predict(alone, {h100});
  const double hostOfThree = 3 * HostOptions{}.opUs * 1e-3;
  EXPECT_NEAR(one.summaries[0].iterationMs, without.summaries[0].iterationMs, hostOfThree);
}

} // namespace
} // namespace wavecast
