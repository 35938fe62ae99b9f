// Predictions from a measured trace (tests/predictor/fixtures/measured_small_cnn.json,
// synthetic): the measurements on the GPU they were taken on, wave scaling elsewhere,
// learned models only for kernel-varying ops.
#include "presentation.h"
#include "results_json.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/measured_trace.h"
#include "wavecast/predictor/predictor.h"

#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace wavecast {
namespace {

const GpuDatabase& db() {
  static const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  return database;
}

Trace measuredTrace() {
  std::ifstream in(std::string(WAVECAST_PREDICTOR_FIXTURES) + "/measured_small_cnn.json");
  return traceFromJson(nlohmann::json::parse(in));
}

double kernelSum(const OpRecord& op) {
  double sum = 0;
  for (const auto& kernel : op.kernels)
    sum += kernel.durationMs;
  return sum;
}

size_t opIndex(const Trace& trace, const std::string& name) {
  for (size_t i = 0; i < trace.ops.size(); ++i)
    if (trace.ops[i].name == name)
      return i;
  ADD_FAILURE() << name << " not in the fixture";
  return 0;
}

// Answers 7 ms for every op it is asked about and remembers what it was asked.
class FixedModel : public OpTimeModel {
public:
  std::vector<std::optional<double>>
  predictMs(const std::vector<OpTimeQuery>& queries) const override {
    for (const auto& query : queries)
      asked.push_back({query.op->name, query.gpu->id});
    return std::vector<std::optional<double>>(queries.size(), 7.0);
  }
  std::string name() const override { return "fixed"; }
  mutable std::vector<std::pair<std::string, std::string>> asked;
};

PredictorOptions measuredOptions(const Trace& trace) {
  PredictorOptions options;
  options.originGpu = measuredOrigin(trace, db());
  return options;
}

TEST(MeasuredTrace, DeviceNameResolvesToTheOriginGpu) {
  Trace trace = measuredTrace();
  ASSERT_TRUE(measuredOrigin(trace, db()));
  EXPECT_EQ(measuredOrigin(trace, db())->id, "H100-SXM") << "torch's name of the H100 SXM";
  trace.device = "NVIDIA A100-SXM4-80GB";
  EXPECT_EQ(measuredOrigin(trace, db())->id, "A100-SXM4-80GB");
  trace.device = "Imaginary GPU 9000";
  EXPECT_FALSE(measuredOrigin(trace, db()));
  trace.device.reset();
  EXPECT_FALSE(measuredOrigin(trace, db()));
  Trace shape = measuredTrace();
  shape.mode = TraceMode::Shape;
  EXPECT_FALSE(measuredOrigin(shape, db())) << "only a cuda-mode trace has an origin";
}

TEST(MeasuredTrace, OnTheOriginGpuThePredictionIsTheMeasurements) {
  const Trace trace = measuredTrace();
  const auto h100 = db().resolve({"H100"});
  const Prediction p = Predictor(measuredOptions(trace)).predict(trace, h100);
  double total = 0;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    EXPECT_EQ(p.ops[0][i].method, PredictionMethod::Measured) << trace.ops[i].name;
    EXPECT_DOUBLE_EQ(p.ops[0][i].timeMs, kernelSum(trace.ops[i])) << trace.ops[i].name;
    total += kernelSum(trace.ops[i]);
  }
  EXPECT_NEAR(total, 0.1491, 1e-12) << "the fixture's kernels";
  EXPECT_NEAR(p.summaries[0].gpuMs, total, 1e-9) << "GPU busy = the kernels' sum";
  EXPECT_TRUE(p.summaries[0].methods.uses(PredictionMethod::Measured));
  EXPECT_EQ(p.summaries[0].methods.origin, "H100-SXM");
  EXPECT_EQ(gpuMethodText(p.summaries[0].methods), "measured on H100-SXM");
  EXPECT_EQ(predictionMethodText(p), "H100-SXM: measured on H100-SXM");
  EXPECT_DOUBLE_EQ(p.ops[0][opIndex(trace, "aten::view")].timeMs, 0) << "no kernel, no time";
}

TEST(MeasuredTrace, OtherGpusWaveScaleEachKernel) {
  const Trace trace = measuredTrace();
  const auto gpus = db().resolve({"H100", "A100-SXM4-80GB"});
  const Prediction p = Predictor(measuredOptions(trace)).predict(trace, gpus);
  // relu: 2048 blocks of 128 threads, 16 registers: 16 blocks/SM on both GPUs, so one
  // wave of 2112 on the H100 and two of 1728 on the A100. gamma = 1 - 0.5 * x / R with
  // x = 1/8 FLOP/byte and R = 19.5 TFLOPS / 2039 GB/s:
  // 2 * (3350/2039 * 1728/2048)^0.99346 * (1980/1410)^0.00654 * 0.0118 ms.
  const size_t relu = opIndex(trace, "aten::relu");
  EXPECT_EQ(p.ops[1][relu].method, PredictionMethod::WaveScaling);
  EXPECT_NEAR(p.ops[1][relu].timeMs, 0.0327182, 0.0327182 * 0.01);
  // The memset streams memory: bandwidth ratio only.
  const size_t zero = opIndex(trace, "aten::zero_");
  EXPECT_NEAR(p.ops[1][zero].timeMs, 0.0015 * 3350 / 2039, 1e-12);
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    EXPECT_EQ(p.ops[1][i].method, trace.ops[i].name == "aten::view" ? PredictionMethod::Roofline
                                                                    : PredictionMethod::WaveScaling)
        << trace.ops[i].name << ": without learned models every op with kernels is scaled";
    if (!trace.ops[i].kernels.empty()) {
      EXPECT_GT(p.ops[1][i].timeMs, p.ops[0][i].timeMs) << trace.ops[i].name << ": A100 slower";
    }
  }
  EXPECT_EQ(gpuMethodText(p.summaries[1].methods), "scaled from H100-SXM");
  EXPECT_EQ(predictionMethodText(p),
            "H100-SXM: measured on H100-SXM; A100-SXM4-80GB: scaled from H100-SXM "
            "(Habitat's wave scaling of each measured kernel)");
}

TEST(MeasuredTrace, LearnedModelsOnlyForKernelVaryingOpsOffTheOrigin) {
  const Trace trace = measuredTrace();
  const auto gpus = db().resolve({"H100", "A100-SXM4-80GB"});
  auto model = std::make_shared<FixedModel>();
  PredictorOptions options = measuredOptions(trace);
  options.opTimeModel = model;
  const Prediction p = Predictor(options).predict(trace, gpus);
  // Asked about the convolution (fp32, TF32 is off on neither: the A100's cuDNN TF32
  // keeps convolutions from the FP32-trained models), the linear layer's addmm, and
  // nothing on the H100 where the measurements are the answer.
  for (const auto& [name, gpu] : model->asked) {
    EXPECT_EQ(gpu, "A100-SXM4-80GB") << name;
    EXPECT_TRUE(name == "aten::addmm" || name == "aten::convolution" ||
                name == "aten::convolution_backward")
        << name << " is kernel-alike: wave scaling, not a learned model";
  }
  const size_t addmm = opIndex(trace, "aten::addmm");
  EXPECT_EQ(p.ops[0][addmm].method, PredictionMethod::Measured);
  EXPECT_EQ(p.ops[1][addmm].method, PredictionMethod::Learned);
  EXPECT_DOUBLE_EQ(p.ops[1][addmm].timeMs, 7.0);
  EXPECT_EQ(p.ops[1][opIndex(trace, "aten::relu")].method, PredictionMethod::WaveScaling);
  EXPECT_EQ(gpuMethodText(p.summaries[1].methods),
            "scaled from H100-SXM + learned models for kernel-varying ops");
  EXPECT_NE(predictionMethodText(p).find(
                "convolutions, matmuls and RNNs by the learned per-op model (fixed)"),
            std::string::npos)
      << predictionMethodText(p);
}

TEST(MeasuredTrace, KernelVaryingOpsAreHabitatsFour) {
  const Trace trace = measuredTrace();
  for (const auto& op : trace.ops) {
    const bool varying = isKernelVarying(estimateOpCost(op));
    const bool expected = op.name == "aten::convolution" || op.name == "aten::addmm" ||
                          op.name == "aten::convolution_backward";
    EXPECT_EQ(varying, expected) << op.name;
  }
  OpRecord lstm;
  lstm.name = "aten::_cudnn_rnn";
  EXPECT_TRUE(isKernelVarying(estimateOpCost(lstm)));
  OpRecord bmm;
  bmm.name = "aten::bmm";
  EXPECT_TRUE(isKernelVarying(estimateOpCost(bmm)));
}

TEST(MeasuredTrace, JsonNamesTheMethodPerGpuAndOp) {
  const Trace trace = measuredTrace();
  const auto gpus = db().resolve({"H100", "T4"});
  const auto doc =
      resultsJson(Predictor(measuredOptions(trace)).predict(trace, gpus), traceFacts(trace));
  EXPECT_EQ(doc["summaries"][0]["method"], "measured on H100-SXM");
  EXPECT_EQ(doc["summaries"][1]["method"], "scaled from H100-SXM");
  EXPECT_EQ(doc["ops"][0]["per_gpu"][0]["method"], "measured");
  EXPECT_EQ(doc["ops"][0]["per_gpu"][1]["method"], "wave_scaling");
}

TEST(MeasuredTrace, SavedTraceKeepsWhatThePredictionNeeds) {
  const Trace trace = measuredTrace();
  const Trace saved = traceFromJson(traceToJson(trace));
  const auto gpus = db().resolve({"H100", "T4"});
  const auto before = Predictor(measuredOptions(trace)).predict(trace, gpus);
  const auto after = Predictor(measuredOptions(saved)).predict(saved, gpus);
  ASSERT_EQ(after.summaries.size(), 2u);
  for (size_t g = 0; g < 2; ++g)
    EXPECT_DOUBLE_EQ(after.summaries[g].gpuMs, before.summaries[g].gpuMs);
  EXPECT_EQ(predictionMethodText(after), predictionMethodText(before));
}

TEST(MeasuredTrace, UnknownDeviceOrNoKernelsFallBackAndSaySo) {
  Trace unknown = measuredTrace();
  unknown.device = "Imaginary GPU 9000";
  const auto gpus = db().resolve({"H100"});
  const Prediction p = Predictor(measuredOptions(unknown)).predict(unknown, gpus);
  EXPECT_EQ(p.ops[0][0].method, PredictionMethod::Roofline);
  ASSERT_FALSE(p.advisories.empty());
  const auto* unknownGpu = p.advisories[0].as<advisory::UnknownMeasuredGpu>();
  ASSERT_NE(unknownGpu, nullptr);
  EXPECT_EQ(unknownGpu->device, "Imaginary GPU 9000");

  Trace empty = measuredTrace(); // what measured mode returned before it recorded kernels
  for (auto& op : empty.ops)
    op.kernels.clear();
  const Prediction q = Predictor(measuredOptions(empty)).predict(empty, gpus);
  EXPECT_EQ(q.ops[0][0].method, PredictionMethod::Roofline);
  EXPECT_GT(q.ops[0][0].timeMs, 0);
  ASSERT_FALSE(q.advisories.empty());
  EXPECT_EQ(q.advisories[0].kind(), AdvisoryKind::MeasuredWithoutKernels);
}

TEST(MeasuredTrace, HostModelIssuesTheMeasuredLaunches) {
  // Two kernels measured for the convolution: the host pays one extra launch for it.
  const Trace trace = measuredTrace();
  const auto gpus = db().resolve({"H100"});
  const Prediction p = Predictor(measuredOptions(trace)).predict(trace, gpus);
  const HostOptions host;
  EXPECT_NEAR(p.opInfo[0].hostMs, (host.opUs + host.extraLaunchUs) * 1e-3, 1e-12);
  EXPECT_NEAR(p.opInfo[opIndex(trace, "aten::relu")].hostMs, host.opUs * 1e-3, 1e-12);
}

} // namespace
} // namespace wavecast
