// How the predictor prices each op on each GPU: roofline floors, per-family kernels, the
// precision it runs in, which ops the learned models answer, and measured kernels scaled.
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

TEST(Predictor, LaunchFloorAndRoofline) {
  const auto gpus = db().resolve({"A100"});
  Trace trace;
  trace.batchSize = 1;
  trace.ops.push_back(
      op(0, "aten::add", Phase::Forward, 1, {tensor({10}), tensor({10})}, {tensor({10})}));
  // 64M floats: memory bound, 3 * 256 MiB at 85 % of 1555 GB/s.
  trace.ops.push_back(op(1, "aten::add", Phase::Forward, 2,
                         {tensor({64 << 20}), tensor({64 << 20})}, {tensor({64 << 20})}));
  const Prediction p = Predictor().predict(trace, gpus);
  EXPECT_DOUBLE_EQ(p.ops[0][0].timeMs, RooflineOptions{}.launchFloorUs * 1e-3); // 2 us
  EXPECT_NEAR(p.ops[0][1].timeMs, 3.0 * 4 * (64 << 20) / (1555e9 * 0.85) * 1e3, 1e-9);
  EXPECT_EQ(p.ops[0][1].method, PredictionMethod::Roofline);
}

TEST(Predictor, BatchNormWithFewChannelsLeavesSmsIdle) {
  // The same 64M elements in 33 or 132 channels: the reduction runs one block per
  // channel, so 33 channels keep a quarter of the H100's SMs busy; the elementwise pass
  // after it spreads over the whole GPU either way.
  const auto gpus = db().resolve({"H100"});
  const auto bn = [](int64_t channels) {
    const auto x = tensor({64, channels, (int64_t{1} << 20) / channels, 1});
    auto record =
        op(0, "aten::native_batch_norm", Phase::Forward, 1,
           {x, tensor({channels}), tensor({channels}), tensor({channels}), tensor({channels})},
           {x, tensor({channels}), tensor({channels})});
    record.args = {{"training", true}};
    Trace trace;
    trace.ops.push_back(record);
    return trace;
  };
  const double elementwiseMs =
      estimateOpCost(bn(132).ops[0]).helperBytes /
      (gpus[0].memoryBandwidthGBs * 1e9 * RooflineOptions().memoryEfficiency) * 1e3;
  const double wide = Predictor().predict(bn(132), gpus).ops[0][0].timeMs - elementwiseMs;
  const double narrow = Predictor().predict(bn(33), gpus).ops[0][0].timeMs - elementwiseMs;
  EXPECT_GT(elementwiseMs, 0);
  EXPECT_NEAR(narrow / wide, 4.0, 0.01);
}

TEST(Predictor, LayerNormRowsTakeTheSameTimeWhateverTheBandwidth) {
  // Real kernel times (bench/truth/data/h100 and h200, the small transformer at batch 256):
  // 16,384 rows of 128 take 25.5 us forward and 61 us backward on an H100 and an H200
  // alike, though the H200 has 43% more bandwidth: each row's block waits on its loads.
  const auto gpus = db().resolve({"H100", "H200"});
  const auto layerNorm = [](bool backward) {
    const auto x = tensor({256, 64, 128});
    const auto stats = tensor({256, 64, 1});
    auto record = backward ? op(0, "aten::native_layer_norm_backward", Phase::Backward, 1,
                                {x, x, stats, stats, tensor({128}), tensor({128})},
                                {x, tensor({128}), tensor({128})})
                           : op(0, "aten::native_layer_norm", Phase::Forward, 1,
                                {x, tensor({128}), tensor({128})}, {x, stats, stats});
    record.args = {{"normalized_shape", std::vector<int64_t>{128}}};
    Trace trace;
    trace.ops.push_back(record);
    return trace;
  };
  const Prediction forward = Predictor().predict(layerNorm(false), gpus);
  const Prediction backward = Predictor().predict(layerNorm(true), gpus);
  for (size_t g = 0; g < gpus.size(); ++g) {
    EXPECT_NEAR(forward.ops[g][0].timeMs, 0.0255, 0.0255 * 0.1) << gpus[g].name;
    EXPECT_NEAR(backward.ops[g][0].timeMs, 0.061, 0.061 * 0.1) << gpus[g].name;
  }
  EXPECT_DOUBLE_EQ(forward.ops[0][0].timeMs, forward.ops[1][0].timeMs);
}

TEST(Predictor, CublasSplitsTheLongKOfASmallFloat32WeightGradient) {
  // The small transformer's weight gradient at batch 256: a 128 x 128 output over a K of
  // 16,384, one tile of 128 x 128. cuBLAS cuts K into slices to fill the GPU; it took
  // 22.5 us on an H200 (bench/truth/data/h200), not the 176 us of one tile's worth. Priced
  // at 28 us: the GEMM's fixed 6 us on top of slices at least as long as the tensor-core
  // fit's (about 1,000), where cuBLAS cuts this one shorter.
  const auto gpus = db().resolve({"H200"});
  Trace trace;
  trace.ops.push_back(op(0, "aten::mm", Phase::Backward, 1,
                         {tensor({128, 16384}), tensor({16384, 128})}, {tensor({128, 128})}));
  PredictorOptions options; // the shortest slice is the one fitted on cuBLAS's tensor-core GEMMs
  options.roofline.tensorCoreGemm = TensorCoreGemmModel::fromFile(WAVECAST_TENSOR_CORE_GEMM_JSON);
  const Prediction p = Predictor(options).predict(trace, gpus);
  EXPECT_GT(p.ops[0][0].timeMs, 0.0225);
  EXPECT_LT(p.ops[0][0].timeMs, 0.0225 * 1.3);
}

TEST(Predictor, ABiasGradientSumCostsItsRowsThenItsBytes) {
  // sum(dim=0) of 16,384 rows of 128 (the small transformer's bias gradients): 23.7 us on
  // an H100 and 23.2 on an H200 (bench/truth/data), for 8 MB that stream in 3.
  const auto gpus = db().resolve({"H100", "H200"});
  Trace trace;
  trace.ops.push_back(
      op(0, "aten::sum", Phase::Backward, 1, {tensor({16384, 128})}, {tensor({1, 128})}));
  trace.ops.back().args = {{"dim", std::vector<int64_t>{0}}, {"keepdim", true}};
  const Prediction p = Predictor().predict(trace, gpus);
  EXPECT_NEAR(p.ops[0][0].timeMs, 0.0237, 0.0237 * 0.1);
  EXPECT_NEAR(p.ops[1][0].timeMs, 0.0232, 0.0232 * 0.1);
}

TEST(Predictor, LayoutTransformsAddToTheConvolutionBeforeHopper) {
  // A layout transform is a kernel of its own: on an A100 its bytes add to an NCHW bf16
  // convolution's time; an H100 runs the convolution on NCHW as it is.
  const auto gpus = db().resolve({"A100", "H100"});
  Trace trace;
  trace.ops.push_back(op(0, "aten::convolution", Phase::Forward, 1,
                         {tensor({64, 64, 56, 56}), tensor({64, 64, 3, 3})},
                         {tensor({64, 64, 56, 56})}));
  trace.ops.back().args = {{"padding", std::vector<int64_t>{1, 1}}};
  const Prediction fp32 = Predictor().predict(trace, gpus);
  for (auto& t : trace.ops[0].inputs)
    t->dtype = ScalarType::BFloat16;
  trace.ops[0].outputs[0]->dtype = ScalarType::BFloat16;
  const Prediction p = Predictor().predict(trace, gpus);
  OpCost cost = estimateOpCost(trace.ops[0]);
  ASSERT_GT(cost.layoutTransformBytes, 0);
  const double layoutMs = cost.layoutTransformBytes /
                          (gpus[0].memoryBandwidthGBs * 1e9 * RooflineOptions().memoryEfficiency) *
                          1e3;
  EXPECT_TRUE(layoutTransformsOn(gpus[0]));
  EXPECT_FALSE(layoutTransformsOn(gpus[1]));
  OpCost withoutTransforms = cost;
  withoutTransforms.layoutTransformBytes = 0;
  withoutTransforms.layoutTransformKernels = 0;
  EXPECT_NEAR(p.ops[0][0].timeMs, rooflineTime(withoutTransforms, gpus[0], {}).timeMs + layoutMs,
              1e-12);
  EXPECT_DOUBLE_EQ(p.ops[1][0].timeMs, rooflineTime(withoutTransforms, gpus[1], {}).timeMs);
  for (size_t g = 0; g < gpus.size(); ++g)
    EXPECT_LT(p.ops[g][0].timeMs, fp32.ops[g][0].timeMs)
        << "bf16 tensor cores still beat cuDNN's TF32 on " << gpus[g].id;
}

TEST(Predictor, Tf32OptionSpeedsUpFloat32Matmuls) {
  const auto gpus = db().resolve({"A100"});
  Trace trace;
  trace.ops.push_back(op(0, "aten::mm", Phase::Forward, 1,
                         {tensor({4096, 4096}), tensor({4096, 4096})}, {tensor({4096, 4096})}));
  const double fp32 = Predictor().predict(trace, gpus).ops[0][0].timeMs;
  PredictorOptions options;
  options.matmulTf32 = true;
  const double tf32 = Predictor(options).predict(trace, gpus).ops[0][0].timeMs;
  // 2*4096^3 FLOP at 75 % of 19.5 TFLOP/s vs 156 TFLOP/s (full waves: 1024 tiles on 108 SMs
  // -> 10 waves of which the last is partial), and cuBLAS's fixed time on CUDA cores.
  const double fixedMs = RooflineOptions{}.cublasFp32GemmLatencyUs * 1e-3;
  EXPECT_NEAR((fp32 - fixedMs) / tf32, 156.0 / 19.5, 1e-9);
  EXPECT_GT(fp32, 2.0 * 4096 * 4096 * 4096 / (19.5e12 * 0.75) * 1e3);
}

// A convolution and a matmul that are compute-bound on an A100.
Trace convAndMatmul() {
  Trace trace;
  trace.ops.push_back(op(0, "aten::convolution", Phase::Forward, 1,
                         {tensor({64, 256, 56, 56}), tensor({256, 256, 3, 3})},
                         {tensor({64, 256, 56, 56})}));
  trace.ops.back().args = {{"stride", std::vector<int64_t>{1, 1}},
                           {"padding", std::vector<int64_t>{1, 1}}};
  trace.ops.push_back(op(1, "aten::mm", Phase::Forward, 2,
                         {tensor({4096, 4096}), tensor({4096, 4096})}, {tensor({4096, 4096})}));
  return trace;
}

TEST(Predictor, PrecisionFollowsTheScriptWithTorchsDefaults) {
  const auto gpus = db().resolve({"A100"});
  Trace trace = convAndMatmul();
  // No precision in the trace: torch's defaults, TF32 for cuDNN only.
  Prediction p = Predictor().predict(trace, gpus);
  ASSERT_EQ(p.precisions.size(), 2u);
  EXPECT_EQ(p.precisions[0].family, CostFamily::Conv) << "the conv has more FLOPs";
  EXPECT_EQ(p.precisions[0].precision, "tf32");
  EXPECT_EQ(p.precisions[1].family, CostFamily::Gemm);
  EXPECT_EQ(p.precisions[1].precision, "float32");
  const double convTf32 = p.ops[0][0].timeMs;
  const double mmFp32 = p.ops[0][1].timeMs;

  // The script turned TF32 on for matmuls and off for cuDNN.
  trace.precision = FloatPrecision{true, false, std::nullopt};
  p = Predictor().predict(trace, gpus);
  EXPECT_EQ(p.precisions[0].precision, "float32");
  EXPECT_EQ(p.precisions[1].precision, "tf32");
  // cuDNN's TF32 reaches 0.28 of its peak, FP32 three quarters of its own.
  const RooflineOptions roofline;
  EXPECT_NEAR(p.ops[0][0].timeMs / convTf32,
              156.0 * roofline.cudnnTf32ConvEfficiency / (19.5 * roofline.matrixEfficiency), 1e-9);
  EXPECT_NEAR((mmFp32 - roofline.cublasFp32GemmLatencyUs * 1e-3) / p.ops[0][1].timeMs, 156.0 / 19.5,
              1e-9);

  // The command line overrides the script.
  PredictorOptions options;
  options.convTf32 = true;
  options.matmulTf32 = false;
  p = Predictor(options).predict(trace, gpus);
  EXPECT_DOUBLE_EQ(p.ops[0][0].timeMs, convTf32);
  EXPECT_DOUBLE_EQ(p.ops[0][1].timeMs, mmFp32);

  // bf16 (autocast) work runs on bf16 tensor cores whatever the TF32 flags say.
  for (auto& record : trace.ops)
    for (auto& t : record.inputs)
      t->dtype = ScalarType::BFloat16;
  p = Predictor().predict(trace, gpus);
  EXPECT_EQ(p.precisions[0].precision, "bfloat16");
  EXPECT_EQ(p.precisions[1].precision, "bfloat16");
}

class CountingModel : public OpTimeModel {
public:
  mutable int calls = 0;
  mutable size_t queries = 0;
  std::vector<std::optional<double>>
  predictMs(const std::vector<OpTimeQuery>& batch) const override {
    ++calls;
    queries = batch.size();
    std::vector<std::optional<double>> answers;
    for (const auto& q : batch)
      answers.push_back(q.op->name == "aten::convolution" ? std::optional<double>(1.5)
                                                          : std::nullopt);
    return answers;
  }
  std::string name() const override { return "counting"; }
  bool measuredOn(const DeviceSpec& gpu) const override { return gpu.id == "T4"; }
};

TEST(Predictor, PluggedModelIsAskedOnceAndFallsBackToRoofline) {
  auto model = std::make_shared<CountingModel>();
  PredictorOptions options;
  options.opTimeModel = model;
  options.convTf32 = false; // the learned models know FP32 without TF32 only
  const auto gpus = db().resolve({"T4,L4"});
  const Prediction p = Predictor(options).predict(smallTrace(), gpus);
  EXPECT_EQ(model->calls, 1);
  EXPECT_EQ(model->queries, 2u * 6) << "6 ops that do work, on 2 GPUs";
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_EQ(p.ops[g][0].method, PredictionMethod::Learned);
    EXPECT_DOUBLE_EQ(p.ops[g][0].timeMs, 1.5);
    EXPECT_EQ(p.ops[g][2].method, PredictionMethod::Roofline);
  }
  EXPECT_EQ(p.learnedModel, "counting");
  EXPECT_NE(predictionMethodText(p).find("learned per-op model (counting)"), std::string::npos)
      << predictionMethodText(p);
  // The L4 was never measured: the user is told its figures rest on its spec sheet.
  ASSERT_EQ(p.advisories.size(), 1u);
  const auto* untrained = p.advisories[0].as<advisory::UntrainedGpus>();
  ASSERT_NE(untrained, nullptr);
  EXPECT_EQ(untrained->gpus, std::vector<std::string>{"L4"});
}

// A float32 grouped GEMM runs as one mm per group: the learned models are asked one group's
// mm (8 experts of 256 of the 2,048 routed rows, 512 -> 1024) and it counts 8 times.
TEST(Predictor, GroupedGemmLoopsAskTheLearnedModelsOneGroupsMm) {
  class OneGroup : public OpTimeModel {
  public:
    mutable std::vector<std::vector<int64_t>> asked;
    std::vector<std::optional<double>>
    predictMs(const std::vector<OpTimeQuery>& batch) const override {
      std::vector<std::optional<double>> answers;
      for (const auto& q : batch) {
        const bool mm = q.op->name == "aten::mm";
        if (mm)
          asked.push_back(q.op->input(0)->shape);
        answers.push_back(mm ? std::optional<double>(0.25) : std::nullopt);
      }
      return answers;
    }
    std::string name() const override { return "one-group"; }
    bool measuredOn(const DeviceSpec&) const override { return true; }
  };
  Trace trace;
  trace.batchSize = 1;
  OpRecord grouped;
  grouped.id = 0;
  grouped.name = "aten::_grouped_mm";
  grouped.phase = Phase::Forward;
  grouped.inputs = {TensorMeta{{2048, 512}}, TensorMeta{{8, 512, 1024}},
                    TensorMeta{{8}, ScalarType::Int32}};
  grouped.outputs = {TensorMeta{{2048, 1024}}};
  trace.ops = {grouped};
  auto model = std::make_shared<OneGroup>();
  PredictorOptions options;
  options.opTimeModel = model;
  const Prediction p = Predictor(options).predict(trace, db().resolve({"H100"}));
  EXPECT_EQ(model->asked, (std::vector<std::vector<int64_t>>{{256, 512}}));
  EXPECT_EQ(p.ops[0][0].method, PredictionMethod::Learned);
  EXPECT_DOUBLE_EQ(p.ops[0][0].timeMs, 8 * 0.25);
}

// GEMVs and outer products are not the tiled GEMMs the learned models were fitted on: the
// roofline prices them, the GEMV at the bandwidth (GNMT's score layer on the H100 and the
// H200: 0.85 and 0.59 ms real, FP32; 0.46 and 0.31 ms, bf16) and the outer product at
// its output's element rate, alike on both (0.97 ms real, FP32 and bf16).
TEST(Predictor, GemvAndOuterProductsArePricedByTheirOwnKernelsNotTheLearnedModels) {
  class EveryMm : public OpTimeModel {
  public:
    mutable int asked = 0;
    std::vector<std::optional<double>>
    predictMs(const std::vector<OpTimeQuery>& batch) const override {
      asked += static_cast<int>(batch.size());
      return std::vector<std::optional<double>>(batch.size(), 2.0);
    }
    std::string name() const override { return "every-mm"; }
    bool measuredOn(const DeviceSpec&) const override { return true; }
  };
  const auto model = std::make_shared<EveryMm>();
  PredictorOptions options;
  options.opTimeModel = model;
  for (const ScalarType dtype : {ScalarType::Float32, ScalarType::BFloat16}) {
    const auto t = [dtype](std::vector<int64_t> shape) { return tensor(std::move(shape), dtype); };
    Trace trace;
    trace.batchSize = 256;
    trace.ops.push_back(
        op(0, "aten::mm", Phase::Forward, 1, {t({640000, 1024}), t({1024, 1})}, {t({640000, 1})}));
    trace.ops.push_back(
        op(1, "aten::mm", Phase::Backward, 1, {t({1, 640000}), t({640000, 1024})}, {t({1, 1024})}));
    trace.ops.push_back(
        op(2, "aten::mm", Phase::Backward, 1, {t({640000, 1}), t({1, 1024})}, {t({640000, 1024})}));
    model->asked = 0;
    const auto gpus = db().resolve({"H100,H200"});
    const Prediction p = Predictor(options).predict(trace, gpus);
    EXPECT_EQ(model->asked, 0);
    const bool fp32 = dtype == ScalarType::Float32;
    const double gemvReal[2] = {fp32 ? 0.848 : 0.457, fp32 ? 0.589 : 0.312};
    for (size_t g = 0; g < 2; ++g) {
      for (size_t i = 0; i < 3; ++i)
        EXPECT_EQ(p.ops[g][i].method, PredictionMethod::Roofline) << gpus[g].id << " op " << i;
      EXPECT_NEAR(p.ops[g][0].timeMs, gemvReal[g], 0.1 * gemvReal[g]) << gpus[g].id;
      EXPECT_NEAR(p.ops[g][1].timeMs, p.ops[g][0].timeMs, 0.01 * p.ops[g][0].timeMs);
      EXPECT_NEAR(p.ops[g][2].timeMs, fp32 ? 0.965 : 1.023, 0.08) << gpus[g].id;
    }
  }
}

TEST(Predictor, Tf32WorkIsNotAskedOfTheLearnedModels) {
  auto model = std::make_shared<CountingModel>();
  PredictorOptions options;
  options.opTimeModel = model;
  const auto gpus = db().resolve({"A100"});
  const Prediction p = Predictor(options).predict(smallTrace(), gpus); // cuDNN TF32: default
  EXPECT_EQ(model->queries, 4u) << "the forward and backward convolutions run in TF32";
  EXPECT_EQ(p.ops[0][0].method, PredictionMethod::Roofline);
}

TEST(Predictor, GpusWithoutTf32KeepFloat32OnCudaCores) {
  // A T4 (Turing) has no TF32 units: cuDNN's TF32 setting changes nothing there.
  const auto gpus = db().resolve({"T4"});
  Trace trace = convAndMatmul();
  const double tf32Default = Predictor().predict(trace, gpus).ops[0][0].timeMs;
  PredictorOptions options;
  options.convTf32 = false;
  EXPECT_DOUBLE_EQ(Predictor(options).predict(trace, gpus).ops[0][0].timeMs, tf32Default);
  auto model = std::make_shared<CountingModel>();
  PredictorOptions learned;
  learned.opTimeModel = model;
  Predictor(learned).predict(smallTrace(), gpus);
  EXPECT_EQ(model->queries, 6u) << "the learned models answer the T4's float32 convolutions";
}

TEST(Predictor, MeasuredKernelsAreWaveScaledFromTheOrigin) {
  Trace trace = smallTrace();
  trace.mode = TraceMode::Cuda;
  KernelRecord kernel;
  kernel.name = "relu_kernel";
  kernel.grid = {1024, 1, 1};
  kernel.block = {512, 1, 1};
  kernel.registersPerThread = 16;
  kernel.durationMs = 0.2;
  trace.ops[2].kernels = {kernel};
  trace.ops[2].measuredMs = 0.2;
  PredictorOptions options;
  options.originGpu = *db().find("T4");
  const auto gpus = db().resolve({"T4,A100"});
  const Prediction p = Predictor(options).predict(trace, gpus);
  EXPECT_EQ(p.ops[0][2].method, PredictionMethod::Measured);
  EXPECT_DOUBLE_EQ(p.ops[0][2].timeMs, 0.2) << "same GPU: the measurement";
  EXPECT_EQ(p.ops[1][2].method, PredictionMethod::WaveScaling);
  EXPECT_LT(p.ops[1][2].timeMs, 0.2);
  EXPECT_DOUBLE_EQ(p.ops[1][0].timeMs, 0) << "measured without kernels: no GPU work";
  EXPECT_EQ(predictionMethodText(p),
            "T4: measured on T4; A100-SXM4-40GB: scaled from T4 (Habitat's wave "
            "scaling of each measured kernel)");

  options.originGpu.reset();
  const Prediction unknownOrigin = Predictor(options).predict(trace, gpus);
  ASSERT_FALSE(unknownOrigin.advisories.empty());
  EXPECT_EQ(unknownOrigin.advisories[0].kind(), AdvisoryKind::UnknownMeasuredGpu);
}

TEST(Predictor, GpusWithoutTheTracedAttentionKernelSaySoAndPriceTheirOwn) {
  Trace trace;
  trace.batchSize = 2;
  TensorMeta q = tensor({2, 8, 2048, 64});
  q.dtype = ScalarType::BFloat16;
  trace.ops.push_back(
      op(0, "aten::_scaled_dot_product_flash_attention", Phase::Forward, 5, {q, q, q}, {q}));
  const Prediction p = Predictor().predict(trace, db().resolve({"A100", "T4"}));
  ASSERT_EQ(p.advisories.size(), 1u); // the A100 has flash attention
  const auto* substituted = p.advisories[0].as<advisory::AttentionSubstituted>();
  ASSERT_NE(substituted, nullptr);
  EXPECT_EQ(substituted->gpu, "T4");
  EXPECT_EQ(substituted->computeCapability, "7.5");
  EXPECT_EQ(substituted->traced, AttentionBackend::Flash);
  EXPECT_EQ(substituted->runs, AttentionBackend::Math);
  EXPECT_EQ(substituted->count, 1);
  // The T4 writes and reads 2 x 8 x 2048 x 2048 bfloat16 scores: memory-bound.
  EXPECT_GT(p.ops[1][0].timeMs, 4 * 2.0 * 8 * 2048 * 2048 * 2 / 320e9 * 1e3);
}

} // namespace
} // namespace wavecast
