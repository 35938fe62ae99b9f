// The models alone against a calibration file's measured ops (wavecast/eval/calibration_eval.h).
#include "wavecast/eval/calibration_eval.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/roofline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace wavecast::eval {
namespace {

using nlohmann::json;

json tensor(std::vector<int64_t> shape, const std::string& dtype) {
  return {{"shape", shape}, {"dtype", dtype}, {"contiguous", true}};
}

json entry(const std::string& name, const std::string& phase, json inputs,
           const std::string& precision, bool tf32, double ms) {
  return {{"name", name},           {"phase", phase},
          {"inputs", inputs},       {"outputs", json::array()},
          {"args", json::object()}, {"precision", precision},
          {"tf32", tf32},           {"case", "case of " + name},
          {"median_ms", ms},        {"repeats", 10}};
}

Calibration h100(const json& entries) {
  return calibrationFromJson({{"format", "wavecast-calibration"},
                              {"version", 1},
                              {"complete", true},
                              {"date", "2026-11-28T04:27:23Z"},
                              {"gpu", {{"name", "NVIDIA H100 80GB HBM3"}, {"sm_count", 132}}},
                              {"timer", "cuda_events"},
                              {"entries", entries}},
                             "h100.json");
}

const DeviceSpec& h100Spec() {
  static const GpuDatabase database =
      GpuDatabase::fromFile(WAVECAST_SOURCE_ROOT_DIR "/data/gpus.json");
  return *database.find("NVIDIA H100 80GB HBM3");
}

TEST(CalibrationEval, EachOpIsPredictedAloneInItsPrecisionAndGroupedByFamily) {
  const json mm = {tensor({4096, 4096}, "bfloat16"), tensor({4096, 4096}, "bfloat16")};
  const json mm32 = {tensor({4096, 4096}, "float32"), tensor({4096, 4096}, "float32")};
  const json add = {tensor({1 << 24}, "float32"), tensor({1 << 24}, "float32")};
  const Calibration calibration =
      h100(json::array({entry("aten::mm", "forward", mm, "bf16", false, 0.2),
                        entry("aten::mm", "forward", mm32, "tf32", true, 0.5),
                        entry("aten::mm", "forward", mm32, "fp32", false, 3.0),
                        entry("aten::add", "forward", add, "fp32", false, 0.1),
                        entry("aten::view", "forward", add, "fp32", false, 0.001)}));
  PredictorOptions options; // the roofline: each op's time is rooflineTime's
  const CalibrationEvalReport report = evaluateCalibration(calibration, h100Spec(), options);

  ASSERT_EQ(report.rows.size(), 4u) << "a view launches nothing: no row";
  EXPECT_EQ(report.gpuId, h100Spec().id);
  EXPECT_EQ(report.rows[0].caseName, "case of aten::mm");
  EXPECT_EQ(report.rows[0].family, CostFamily::Gemm);
  const auto roofline = [&](const CalibrationEntry& e, bool tf32) {
    OpCost cost = estimateOpCost(e.op);
    cost.tf32 = tf32;
    return rooflineTime(cost, h100Spec(), options.roofline).timeMs;
  };
  EXPECT_DOUBLE_EQ(report.rows[0].predictedMs, roofline(calibration.entries[0], false));
  // TF32 and plain FP32 are the same op in another precision: TF32 runs on tensor cores.
  EXPECT_DOUBLE_EQ(report.rows[1].predictedMs, roofline(calibration.entries[1], true));
  EXPECT_DOUBLE_EQ(report.rows[2].predictedMs, roofline(calibration.entries[2], false));
  EXPECT_LT(report.rows[1].predictedMs * 3, report.rows[2].predictedMs);

  // Groups: gemm in fp32, tf32 and bf16, elementwise in fp32, then every family per precision.
  ASSERT_EQ(report.groups.size(), 4u + 3u);
  EXPECT_EQ(report.groups[0].family, CostFamily::Gemm);
  EXPECT_EQ(report.groups[0].precision, "fp32");
  EXPECT_EQ(report.groups[1].precision, "tf32");
  EXPECT_EQ(report.groups[2].precision, "bf16");
  EXPECT_EQ(report.groups[3].family, CostFamily::Elementwise);
  const CalibrationGroup& allFp32 = report.groups[4];
  EXPECT_FALSE(allFp32.family.has_value());
  EXPECT_EQ(allFp32.errors.samples, 2);
  EXPECT_DOUBLE_EQ(allFp32.predictedOverMeasured,
                   (report.rows[2].predictedMs + report.rows[3].predictedMs) / 3.1);
  const double bf16Error = std::abs(report.rows[0].predictedMs - 0.2) / 0.2 * 100;
  EXPECT_DOUBLE_EQ(report.groups[2].errors.mapePercent, bf16Error);

  const json doc = toJson(report);
  EXPECT_EQ(doc["rows"].size(), 4u);
  EXPECT_EQ(doc["groups"][4]["family"], nullptr);
  EXPECT_EQ(doc["rows"][1]["precision"], "tf32");
  const std::string text = toMarkdown(report, true);
  EXPECT_NE(text.find("| gemm | bf16 | 1 |"), std::string::npos) << text;
  EXPECT_NE(text.find("| case of aten::add | aten::add | forward | fp32 |"), std::string::npos);
}

TEST(CalibrationEval, RefusesAPredictorThatHoldsTheFilesOwnMeasurements) {
  const Calibration calibration = h100(json::array());
  PredictorOptions options;
  options.calibrations[h100Spec().id] = std::make_shared<const CalibrationTable>(calibration);
  EXPECT_THROW(evaluateCalibration(calibration, h100Spec(), options), std::invalid_argument);
}

} // namespace
} // namespace wavecast::eval
