// Each stage of Predictor::predict on its own (wavecast/predictor/prediction_stages.h).
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/prediction_stages.h"

#include <gtest/gtest.h>

namespace wavecast::stages {
namespace {

const GpuDatabase& db() {
  static const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  return database;
}

OpRecord op(int64_t id, std::string name, std::vector<int64_t> shape) {
  OpRecord record;
  record.id = id;
  record.name = std::move(name);
  record.loc = {"/p/model.py", 3 + static_cast<int>(id), "forward"};
  TensorMeta t;
  t.shape = std::move(shape);
  record.inputs = {t, t};
  record.outputs = {t};
  return record;
}

TEST(PredictionStages, PrecisionIsTheScriptsWithTheCallersOverrides) {
  Trace trace;
  EXPECT_FALSE(effectivePrecision(trace, {}).matmulTf32) << "torch's default";
  EXPECT_TRUE(effectivePrecision(trace, {}).cudnnTf32);
  trace.precision = FloatPrecision{true, false, ScalarType::BFloat16};
  PredictorOptions options;
  EXPECT_TRUE(effectivePrecision(trace, options).matmulTf32);
  options.matmulTf32 = false;
  options.convTf32 = true;
  const FloatPrecision overridden = effectivePrecision(trace, options);
  EXPECT_FALSE(overridden.matmulTf32);
  EXPECT_TRUE(overridden.cudnnTf32);
  EXPECT_EQ(overridden.autocast, ScalarType::BFloat16) << "only the TF32 flags are overridden";
}

TEST(PredictionStages, CostingGroupsApproximateOpsByName) {
  Trace trace;
  trace.ops = {op(0, "aten::frobnicate", {1024}), op(1, "aten::add", {1024}),
               op(2, "aten::frobnicate", {1024})};
  const CostedOps costed = costOps(trace, {});
  ASSERT_EQ(costed.costs.size(), 3u);
  ASSERT_EQ(costed.info.size(), 3u);
  EXPECT_EQ(costed.info[1].name, "aten::add");
  EXPECT_EQ(costed.info[1].loc.line, 4);
  ASSERT_EQ(costed.approximate.size(), 1u);
  EXPECT_EQ(costed.approximate[0].op, "aten::frobnicate");
  EXPECT_EQ(costed.approximate[0].count, 2);
}

TEST(PredictionStages, ShapeTracesUseNoKernelsAndRooflineTimesEveryOp) {
  Trace trace;
  trace.ops = {op(0, "aten::add", {1 << 20}), op(1, "aten::mul", {1 << 20})};
  CostedOps costed = costOps(trace, {});
  const auto gpus = db().resolve({"H100", "T4"});
  const MeasuredKernels kernels = useMeasuredKernels(trace, gpus, {}, costed.costs);
  EXPECT_FALSE(kernels.measured);
  EXPECT_TRUE(kernels.advisories.empty());
  const auto learned = askLearnedModel(trace, costed.costs, gpus, kernels, {});
  ASSERT_EQ(learned.size(), 4u) << "a slot per op and GPU";
  EXPECT_FALSE(learned[0]) << "no learned model given";
  OpTimes times = timeOps(trace, costed.costs, gpus, kernels, learned, {});
  ASSERT_EQ(times.ops.size(), 2u);
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_TRUE(times.methods[g].uses(PredictionMethod::Roofline));
    EXPECT_FALSE(times.methods[g].uses(PredictionMethod::Learned));
    EXPECT_EQ(times.methods[g].origin, "") << "no measured GPU";
    EXPECT_GT(times.ops[g][0].timeMs, 0);
  }
  EXPECT_GT(times.ops[1][0].timeMs, times.ops[0][0].timeMs) << "the T4 has less bandwidth";

  const HostTimelines host = playIterations(trace, costed.costs, gpus, PredictorOptions{}, times);
  ASSERT_EQ(host.hostMs.size(), 2u);
  ASSERT_EQ(host.timelines.size(), 2u);
  for (size_t g = 0; g < 2; ++g)
    EXPECT_GE(times.ops[g][1].wallMs, 0) << "wall time set by the host model";
}

TEST(PredictionStages, ABf16GroupedGemmLoopsAndWaitsOnlyWhereTheGpuHasNoGroupedKernel) {
  Trace trace;
  OpRecord grouped;
  grouped.id = 0;
  grouped.name = "aten::_grouped_mm";
  TensorMeta a, b, offsets, out;
  a.shape = {16384, 1024};
  b.shape = {8, 1024, 4096};
  out.shape = {16384, 4096};
  a.dtype = b.dtype = out.dtype = ScalarType::BFloat16;
  offsets.shape = {8};
  offsets.dtype = ScalarType::Int32;
  grouped.inputs = {a, b, offsets};
  grouped.outputs = {out};
  trace.ops = {grouped, op(1, "aten::add", {1024})};
  const auto gpus = db().resolve({"H100", "A100"});
  CostedOps costed = costOps(trace, {});
  const MeasuredKernels kernels = useMeasuredKernels(trace, gpus, {}, costed.costs);
  const auto learned = askLearnedModel(trace, costed.costs, gpus, kernels, {});
  OpTimes times = timeOps(trace, costed.costs, gpus, kernels, learned, {});
  const HostOptions host;
  const HostTimelines played = playIterations(trace, costed.costs, gpus, PredictorOptions{}, times);
  // The H100 runs one grouped kernel and issues the add while it runs.
  const IterationTimeline& h100 = played.timelines[0];
  EXPECT_NEAR(h100.hostMs, (2 * host.opUs) * 1e-3, 1e-9);
  EXPECT_LT(h100.ops[1].wallMs, times.ops[0][1].timeMs + 1e-9) << "the add waits for the kernel";
  // The A100 copies the offsets to the host, waits for the GPU, then issues an mm per
  // expert and, only after the GPU is done, the add, whose launch is then exposed.
  const IterationTimeline& a100 = played.timelines[1];
  EXPECT_NEAR(a100.hostMs, (3 * host.opUs + 7 * host.extraLaunchUs) * 1e-3, 1e-9);
  EXPECT_NEAR(a100.wallMs, a100.ops[0].wallMs + host.opUs * 1e-3 + times.ops[1][1].timeMs, 1e-6);
  EXPECT_NEAR(played.hostMs[0], host.opUs * 1e-3, 1e-9) << "per op: as the H100 issues it";
}

TEST(PredictionStages, AMeasuredTraceFromAnUnknownGpuSaysSo) {
  Trace trace;
  trace.mode = TraceMode::Cuda;
  trace.device = "Imaginary GPU 9000";
  trace.ops = {op(0, "aten::add", {1024})};
  KernelRecord kernel;
  kernel.durationMs = 0.01;
  trace.ops[0].kernels = {kernel};
  CostedOps costed = costOps(trace, {});
  const MeasuredKernels kernels =
      useMeasuredKernels(trace, db().resolve({"H100"}), {}, costed.costs);
  EXPECT_FALSE(kernels.measured);
  ASSERT_EQ(kernels.advisories.size(), 1u);
  EXPECT_EQ(kernels.advisories[0].as<advisory::UnknownMeasuredGpu>()->device, "Imaginary GPU 9000");
}

} // namespace
} // namespace wavecast::stages
