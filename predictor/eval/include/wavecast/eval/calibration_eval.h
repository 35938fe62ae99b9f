// How the cost model alone does on a GPU's measured ops: each entry of a calibration file
// (`wavecast calibrate`) predicted as a trace of that one op on the file's GPU, without the
// file, against its measured time, by op family and precision. Held out by construction,
// and in every precision the suite runs (TF32, bf16, fp16), where NeuSight's kernels are
// FP32 alone.
#pragma once

#include "wavecast/eval/kernel_eval.h"
#include "wavecast/predictor/calibration.h"
#include "wavecast/predictor/predictor.h"

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace wavecast::eval {

struct CalibrationRow {
  std::string caseName; // the suite's case that ran the op
  std::string op;
  Phase phase = Phase::Forward;
  std::string precision; // "fp32", "tf32", "bf16", "fp16"
  CostFamily family = CostFamily::Elementwise;
  PredictionMethod method = PredictionMethod::Roofline;
  double measuredMs = 0;
  double predictedMs = 0;
};

// One family in one precision, or (family unset) every family in one precision.
struct CalibrationGroup {
  std::optional<CostFamily> family;
  std::string precision;
  KernelErrors errors;
  double predictedOverMeasured = 0; // summed predicted / summed measured time
};

struct CalibrationEvalReport {
  std::string path;
  std::string gpuName; // as the file names it
  std::string gpuId;   // wavecast's
  std::string date;
  std::vector<CalibrationRow> rows;     // the file's order; ops that launch nothing left out
  std::vector<CalibrationGroup> groups; // by family, then precision; then all families
};

// `options` must not hold a calibration of `gpu`: the models alone are what is measured.
// Throws std::invalid_argument when it does.
CalibrationEvalReport evaluateCalibration(const Calibration& calibration, const DeviceSpec& gpu,
                                          const PredictorOptions& options);

nlohmann::json toJson(const CalibrationEvalReport& report);
// The groups' table; with `rows`, each op's measured and predicted time after it.
std::string toMarkdown(const CalibrationEvalReport& report, bool rows);

} // namespace wavecast::eval
