// torch.compile's regions as Inductor runs them (wavecast/predictor/compiled_fusion.h).
#include "compiled_trace.h"
#include "wavecast/predictor/compiled_fusion.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/host_model.h"
#include "wavecast/predictor/prediction_stages.h"
#include "wavecast/predictor/predictor.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace wavecast::compiled {
namespace {

const GpuDatabase& db() {
  static const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  return database;
}

using testing::from;
using testing::record;
using testing::tensor;

constexpr int64_t kRows = 4096, kWidth = 1024;
constexpr double kActivation = 4.0 * kRows * kWidth; // float32 bytes of one [rows, width]

// A transformer block's tail as the tracer records it under torch.compile: a projection,
// GELU, the residual add, layer norm, and the next layer's GEMM reading the norm.
Trace blockTail(bool compiled) {
  const std::vector<int64_t> act{kRows, kWidth};
  Trace trace;
  trace.ops = {
      record(0, "aten::mm", {tensor(act), tensor({kWidth, kWidth})}, {tensor(act)}, compiled),
      record(1, "aten::gelu", {tensor(act, ScalarType::Float32, from(0))}, {tensor(act)}, compiled),
      record(2, "aten::add", {tensor(act, ScalarType::Float32, from(1)), tensor(act)},
             {tensor(act)}, compiled),
      record(3, "aten::native_layer_norm",
             {tensor(act, ScalarType::Float32, from(2)), tensor({kWidth}), tensor({kWidth})},
             {tensor(act), tensor({kRows, 1}), tensor({kRows, 1})}, compiled),
      record(4, "aten::mm", {tensor(act, ScalarType::Float32, from(3)), tensor({kWidth, kWidth})},
             {tensor(act)}, compiled),
  };
  trace.ops[3].args["normalized_shape"] = std::vector<int64_t>{kWidth};
  return trace;
}

TEST(CompiledFusion, AChainBetweenTwoGemmsIsOneKernelOfItsOutsideTraffic) {
  const Trace trace = blockTail(true);
  const auto costed = stages::costOps(trace, {});
  const auto& costs = costed.costs;
  // GELU and the add fuse into the norm's kernel: the norm carries it.
  EXPECT_TRUE(costs[1].fused && costs[2].fused && costs[3].fused);
  EXPECT_EQ(costs[1].kernels, 0);
  EXPECT_EQ(costs[2].kernels, 0);
  EXPECT_EQ(costs[3].kernels, 1) << "a row-wise norm forward: one kernel";
  // It reads the projection's output and the residual (and the norm's weight and bias),
  // writes the norm's output for the GEMM and its statistics (read by no op: kept); GELU's
  // and the add's outputs stay on chip.
  const double expected = 3 * kActivation + 2 * 4.0 * kWidth + 2 * 4.0 * kRows;
  EXPECT_DOUBLE_EQ(costs[1].bytes + costs[2].bytes + costs[3].bytes, expected);
  EXPECT_DOUBLE_EQ(costs[3].bytes, expected);
  // The GEMMs are library calls: their costs are eager's.
  EXPECT_FALSE(costs[0].fused);
  EXPECT_FALSE(costs[4].fused);

  const auto eager = stages::costOps(blockTail(false), {}).costs;
  EXPECT_FALSE(eager[3].fused);
  EXPECT_EQ(eager[1].kernels + eager[2].kernels + eager[3].kernels, 3);
  EXPECT_GT(eager[1].dramBytes() + eager[2].dramBytes() + eager[3].dramBytes(), 1.6 * expected);
  EXPECT_DOUBLE_EQ(eager[0].bytes, costs[0].bytes);
}

TEST(CompiledFusion, WithoutDataflowCompiledOpsKeepTheirEagerCosts) {
  Trace trace = blockTail(true);
  for (auto& op : trace.ops)
    for (auto& input : op.inputs)
      if (input)
        input->source.reset();
  const auto costs = stages::costOps(trace, {}).costs;
  for (const auto& cost : costs)
    EXPECT_FALSE(cost.fused);
}

TEST(CompiledFusion, OutputsReadAfterALibraryCallAreWritten) {
  // The add's output is also the next residual: read past the GEMM, it is written.
  Trace trace = blockTail(true);
  const std::vector<int64_t> act{kRows, kWidth};
  trace.ops.push_back(
      record(5, "aten::add",
             {tensor(act, ScalarType::Float32, from(4)), tensor(act, ScalarType::Float32, from(2))},
             {tensor(act)}));
  const auto costs = stages::costOps(trace, {}).costs;
  EXPECT_DOUBLE_EQ(costs[3].bytes, 4 * kActivation + 2 * 4.0 * kWidth + 2 * 4.0 * kRows);
  EXPECT_EQ(costs[5].kernels, 1) << "after the GEMM: a kernel of its own";
  EXPECT_DOUBLE_EQ(costs[5].bytes, 3 * kActivation);
}

TEST(CompiledFusion, ReductionsWithFewOutputsSplit) {
  // A bias gradient: 1024 sums over 4096 rows, too few outputs to fill a GPU.
  Trace trace;
  trace.ops = {record(0, "aten::threshold_backward",
                      {tensor({kRows, kWidth}), tensor({kRows, kWidth})},
                      {tensor({kRows, kWidth})}),
               record(1, "aten::sum", {tensor({kRows, kWidth}, ScalarType::Float32, from(0))},
                      {tensor({kWidth})})};
  trace.ops[0].phase = trace.ops[1].phase = Phase::Backward;
  const auto costs = stages::costOps(trace, {}).costs;
  EXPECT_EQ(costs[0].kernels, 0);
  EXPECT_EQ(costs[1].kernels, 2) << "partial sums, then their sum";
  // Reads both inputs of the threshold and writes the sums: the threshold's output is
  // read by the sum alone.
  EXPECT_DOUBLE_EQ(costs[1].bytes, 2 * kActivation + 4.0 * kWidth);
  EXPECT_DOUBLE_EQ(costs[1].parallelElements, kRows * kWidth) << "spread over the GPU";
}

TEST(CompiledFusion, RandomDrawsCostTritonsPhiloxPerElement) {
  // Attention probabilities and their dropout: one generated kernel, whose random draws
  // are one Philox each (10 rounds of 6 integer instructions at 64 per SM per clock).
  const std::vector<int64_t> scores{kRows, kWidth};
  Trace trace;
  trace.ops = {record(0, "aten::_softmax", {tensor(scores)}, {tensor(scores)}),
               record(1, "aten::native_dropout", {tensor(scores, ScalarType::Float32, from(0))},
                      {tensor(scores), tensor(scores, ScalarType::Bool)})};
  trace.ops[0].args["dim"] = int64_t{-1};
  trace.ops[1].args["train"] = true;
  const auto costs = stages::costOps(trace, {}).costs;
  EXPECT_EQ(costs[0].kernels, 1);
  EXPECT_DOUBLE_EQ(costs[0].smCycles, 60.0 / 64 * kRows * kWidth);
  trace.ops[1].args["train"] = false; // evaluation: no draws
  EXPECT_DOUBLE_EQ(stages::costOps(trace, {}).costs[0].smCycles, 0);
}

TEST(CompiledFusion, ACompiledStepWritesTheTensorsItUpdatesInPlace) {
  // SGD with momentum over two parameters, compiled: buf.add_(grad), then
  // param.add_(buf, alpha=-lr). The foreach ops return nothing (no writer the dataflow
  // follows) and write their first list.
  const auto list = [] {
    return std::vector<std::optional<TensorMeta>>{tensor({kWidth, kWidth}), tensor({kWidth})};
  };
  const auto pair = [&](int64_t id) {
    auto op = record(id, "aten::_foreach_add_", list(), {});
    for (const auto& t : list())
      op.inputs.push_back(t);
    op.phase = Phase::Optimizer;
    op.args["num_tensors"] = int64_t{2};
    return op;
  };
  Trace trace;
  trace.ops = {pair(0), pair(1)};
  trace.ops[1].inputs[0]->source = from(7); // dataflow traced: a parameter written before
  const auto costs = stages::costOps(trace, {}).costs;
  const double parameters = 4.0 * (kWidth * kWidth + kWidth);
  for (const auto& cost : costs) {
    EXPECT_TRUE(cost.fused);
    EXPECT_EQ(cost.kernels, 1);
    EXPECT_DOUBLE_EQ(cost.bytes, 3 * parameters) << "two lists read, the first written";
  }
}

TEST(CompiledFusion, PadMmPadsComputeBoundUnalignedGemmsOnTensorCores) {
  const DeviceSpec h100 = db().resolve({"H100"})[0];
  // GPT-2's head in bf16: 8184 tokens x 768 -> 50257 words.
  OpRecord head = record(
      0, "aten::mm",
      {tensor({8184, 768}, ScalarType::BFloat16), tensor({768, 50257}, ScalarType::BFloat16)},
      {tensor({8184, 50257}, ScalarType::BFloat16)});
  // Attention scores over 1023 tokens: K = 64, memory-bound.
  OpRecord scores = record(
      1, "aten::bmm",
      {tensor({96, 1023, 64}, ScalarType::BFloat16), tensor({96, 64, 1023}, ScalarType::BFloat16)},
      {tensor({96, 1023, 1023}, ScalarType::BFloat16)});
  Trace trace;
  trace.ops = {head, scores};
  const auto costs = stages::costOps(trace, {}).costs;
  const auto variants = inductorVariants(trace, costs);
  ASSERT_TRUE(variants[0]);
  EXPECT_EQ(variants[0]->kind, InductorVariant::Kind::PaddedGemm);
  EXPECT_EQ(variants[0]->op.inputs[1]->shape, (std::vector<int64_t>{768, 50264}));
  EXPECT_EQ(variants[0]->op.outputs[0]->shape, (std::vector<int64_t>{8184, 50264}));
  EXPECT_EQ(variants[0]->copyKernels, 1) << "the weight; the activations are aligned";
  EXPECT_DOUBLE_EQ(variants[0]->copyBytes, 2.0 * (768 * 50257 + 768 * 50264));
  EXPECT_EQ(variants[0]->cost.gemm.leadingDimAlignmentBytes, 16);
  EXPECT_LT(costs[0].gemm.leadingDimAlignmentBytes, 16);
  EXPECT_TRUE(runsOn(*variants[0], costs[0], h100));
  ASSERT_TRUE(variants[1]);
  EXPECT_FALSE(runsOn(*variants[1], costs[1], h100)) << "not compute-bound: pad_mm leaves it";

  // Predicted as Inductor runs it: the padded head is faster than the align1 kernels.
  PredictorOptions options;
  options.roofline.tensorCoreGemm = TensorCoreGemmModel::fromFile(WAVECAST_TENSOR_CORE_GEMM_JSON);
  const stages::MeasuredKernels none{false, {false}, {}};
  const std::vector<std::optional<double>> unlearned(2);
  const auto compiledTimes = stages::timeOps(trace, costs, {h100}, none, unlearned, options);
  trace.ops[0].compiled.reset();
  const auto eagerTimes =
      stages::timeOps(trace, stages::costOps(trace, {}).costs, {h100}, none, unlearned, options);
  EXPECT_LT(compiledTimes.ops[0][0].timeMs, 0.5 * eagerTimes.ops[0][0].timeMs);
  EXPECT_DOUBLE_EQ(compiledTimes.ops[0][1].timeMs, eagerTimes.ops[0][1].timeMs);

  // Float32 off tensor cores: alignment does not pick the kernel.
  Trace fp32;
  fp32.ops = {
      record(0, "aten::mm", {tensor({8184, 768}), tensor({768, 50257})}, {tensor({8184, 50257})})};
  const auto fp32Costs = stages::costOps(fp32, {}).costs;
  const auto fp32Variant = inductorVariants(fp32, fp32Costs)[0];
  ASSERT_TRUE(fp32Variant);
  EXPECT_FALSE(runsOn(*fp32Variant, fp32Costs[0], h100));
}

OpRecord convolution(int64_t id, int64_t in, int64_t out, int64_t kernel, int64_t groups = 1) {
  OpRecord op = record(id, "aten::convolution",
                       {tensor({32, in, 56, 56}), tensor({out, in / groups, kernel, kernel})},
                       {tensor({32, out, 56, 56})});
  op.args["groups"] = groups;
  op.args["stride"] = std::vector<int64_t>{1, 1};
  op.args["padding"] = std::vector<int64_t>{kernel / 2, kernel / 2};
  op.args["dilation"] = std::vector<int64_t>{1, 1};
  op.args["transposed"] = false;
  return op;
}

TEST(CompiledFusion, LayoutOptimizationRunsConvolutionsInChannelsLast) {
  Trace trace;
  trace.ops = {convolution(0, 64, 256, 1), convolution(1, 256, 256, 3)};
  auto costs = stages::costOps(trace, {}).costs;
  auto variants = inductorVariants(trace, costs);
  ASSERT_TRUE(variants[1]);
  EXPECT_EQ(variants[1]->kind, InductorVariant::Kind::ChannelsLast);
  const TensorMeta& input = *variants[1]->op.inputs[0];
  EXPECT_FALSE(input.contiguous);
  EXPECT_EQ(input.strides, (std::vector<int64_t>{256 * 56 * 56, 1, 56 * 256, 256}));
  EXPECT_TRUE(runsOn(*variants[1], costs[1], db().resolve({"H100"})[0]));

  // decide_layout_opt keeps NCHW with a grouped convolution of several channels per group,
  // or one that narrows its channels by half or more with a spatial kernel.
  trace.ops.push_back(convolution(2, 256, 256, 3, 32));
  costs = stages::costOps(trace, {}).costs;
  EXPECT_FALSE(inductorVariants(trace, costs)[1]);
  trace.ops.back() = convolution(2, 256, 128, 3);
  costs = stages::costOps(trace, {}).costs;
  EXPECT_FALSE(inductorVariants(trace, costs)[1]);
}

TEST(CompiledFusion, TheHostLaunchesEachGeneratedKernel) {
  const HostOptions options;
  const Trace trace = blockTail(true);
  const auto costs = stages::costOps(trace, {}).costs;
  EXPECT_DOUBLE_EQ(hostOpUs(trace.ops[1], costs[1], options), 0) << "fused into the norm";
  EXPECT_DOUBLE_EQ(hostOpUs(trace.ops[3], costs[3], options), options.opUs);
  EXPECT_DOUBLE_EQ(hostOpUs(trace.ops[0], costs[0], options), options.opUs);
  OpRecord graphed = trace.ops[3];
  graphed.compiled = CompileMode::ReduceOverhead;
  EXPECT_DOUBLE_EQ(hostOpUs(graphed, costs[3], options), options.extraLaunchUs)
      << "replayed in a CUDA graph";
}

TEST(CompiledFusion, APredictionSaysWhatCompilingChanges) {
  const auto gpus = db().resolve({"H100", "T4"});
  const Prediction compiled = Predictor().predict(blockTail(true), gpus);
  const Prediction eager = Predictor().predict(blockTail(false), gpus);
  std::vector<advisory::CompiledAgainstEager> against;
  for (const Advisory& advisory : compiled.advisories)
    if (const auto* facts = advisory.as<advisory::CompiledAgainstEager>())
      against.push_back(*facts);
  ASSERT_EQ(against.size(), 2u) << "one per GPU";
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_EQ(against[g].gpu, compiled.summaries[g].gpuId);
    EXPECT_DOUBLE_EQ(against[g].compiledMs, compiled.summaries[g].iterationMs);
    // The same ops unmarked: the eager prediction of the same script.
    EXPECT_DOUBLE_EQ(against[g].eagerMs, eager.summaries[g].iterationMs);
    EXPECT_EQ(against[g].eagerPeakBytes, eager.summaries[g].memory.allocatedPeakBytes());
    EXPECT_LT(against[g].compiledMs, against[g].eagerMs) << "GELU, the add and the norm fused";
  }
  EXPECT_TRUE(std::none_of(eager.advisories.begin(), eager.advisories.end(), [](const Advisory& a) {
    return a.kind() == AdvisoryKind::CompiledAgainstEager;
  }));
}

TEST(CompiledFusion, TraceJsonCarriesTheModeAndTheWriters) {
  const auto document = nlohmann::json::parse(R"({
    "format": "wavecast-trace", "version": 2, "batch_size": 8, "mode": "shape",
    "ops": [{"id": 0, "name": "aten::relu", "phase": "forward", "compiled": "reduce-overhead",
             "inputs": [{"shape": [4], "dtype": "float32", "from": [7, 1]}],
             "outputs": [{"shape": [4], "dtype": "float32"}]}]})");
  const Trace trace = traceFromJson(document);
  ASSERT_EQ(trace.ops.size(), 1u);
  EXPECT_EQ(trace.ops[0].compiled, CompileMode::ReduceOverhead);
  ASSERT_TRUE(trace.ops[0].inputs[0]->source);
  EXPECT_EQ(trace.ops[0].inputs[0]->source->op, 7);
  EXPECT_EQ(trace.ops[0].inputs[0]->source->output, 1);
  const auto written = traceToJson(trace);
  EXPECT_EQ(written["ops"][0]["compiled"], "reduce-overhead");
  EXPECT_EQ(written["ops"][0]["inputs"][0]["from"], nlohmann::json::parse("[7, 1]"));

  auto bad = document;
  bad["ops"][0]["compiled"] = "fast";
  EXPECT_THROW(traceFromJson(bad), TraceFormatError);
  bad = document;
  bad["ops"][0]["inputs"][0]["from"] = 7;
  EXPECT_THROW(traceFromJson(bad), TraceFormatError);
}

} // namespace
} // namespace wavecast::compiled
