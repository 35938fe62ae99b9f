#include "wavecast/eval/calibration_eval.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace wavecast::eval {
namespace {

// The suite's precisions in its own order, unknown ones after.
int precisionRank(const std::string& precision) {
  static const std::vector<std::string> order{"fp32", "tf32", "bf16", "fp16"};
  const auto it = std::find(order.begin(), order.end(), precision);
  return static_cast<int>(it - order.begin());
}

CalibrationGroup group(std::optional<CostFamily> family, const std::string& precision,
                       const std::vector<const CalibrationRow*>& rows) {
  std::vector<double> predicted, measured;
  double predictedSum = 0, measuredSum = 0;
  for (const CalibrationRow* row : rows) {
    predicted.push_back(row->predictedMs);
    measured.push_back(row->measuredMs);
    predictedSum += row->predictedMs;
    measuredSum += row->measuredMs;
  }
  return {family, precision, kernelErrors(predicted, measured),
          measuredSum > 0 ? predictedSum / measuredSum : 0};
}

std::string number(double value, const char* format) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

} // namespace

CalibrationEvalReport evaluateCalibration(const Calibration& calibration, const DeviceSpec& gpu,
                                          const PredictorOptions& options) {
  if (options.calibrations.count(gpu.id))
    throw std::invalid_argument("the models alone are evaluated: the predictor's options hold " +
                                gpu.id + "'s calibration");
  const Predictor predictor(options);
  CalibrationEvalReport report;
  report.path = calibration.path;
  report.gpuName = calibration.gpuName;
  report.gpuId = gpu.id;
  report.date = calibration.date;
  for (const CalibrationEntry& entry : calibration.entries) {
    // The op alone, in the precision it ran in: its own trace, as a script of that one op.
    Trace trace;
    trace.batchSize = 1;
    trace.ops = {entry.op};
    trace.ops[0].id = 0;
    trace.precision = FloatPrecision{entry.tf32, entry.tf32, std::nullopt};
    const Prediction prediction = predictor.predict(trace, {gpu});
    const OpPrediction& predicted = prediction.ops.at(0).at(0);
    if (predicted.family == CostFamily::Metadata || predicted.timeMs <= 0 || entry.medianMs <= 0)
      continue;
    report.rows.push_back({entry.caseName, entry.op.name, entry.op.phase, entry.precision,
                           predicted.family, predicted.method, entry.medianMs, predicted.timeMs});
  }
  std::map<std::tuple<int, int, std::string>, std::vector<const CalibrationRow*>> byFamily;
  std::map<std::pair<int, std::string>, std::vector<const CalibrationRow*>> byPrecision;
  for (const CalibrationRow& row : report.rows) {
    const int rank = precisionRank(row.precision);
    byFamily[{static_cast<int>(row.family), rank, row.precision}].push_back(&row);
    byPrecision[{rank, row.precision}].push_back(&row);
  }
  for (const auto& [key, rows] : byFamily)
    report.groups.push_back(
        group(static_cast<CostFamily>(std::get<0>(key)), std::get<2>(key), rows));
  for (const auto& [key, rows] : byPrecision)
    report.groups.push_back(group(std::nullopt, key.second, rows));
  return report;
}

nlohmann::json toJson(const CalibrationEvalReport& report) {
  nlohmann::json groups = nlohmann::json::array(), rows = nlohmann::json::array();
  for (const CalibrationGroup& g : report.groups)
    groups.push_back({{"family", g.family ? nlohmann::json(toString(*g.family)) : nullptr},
                      {"precision", g.precision},
                      {"ops", g.errors.samples},
                      {"mape_percent", g.errors.mapePercent},
                      {"median_percent", g.errors.medianPercent},
                      {"predicted_over_measured", g.predictedOverMeasured}});
  for (const CalibrationRow& r : report.rows)
    rows.push_back({{"case", r.caseName},
                    {"op", r.op},
                    {"phase", toString(r.phase)},
                    {"precision", r.precision},
                    {"family", toString(r.family)},
                    {"method", toString(r.method)},
                    {"measured_ms", r.measuredMs},
                    {"predicted_ms", r.predictedMs}});
  return {{"calibration", report.path}, {"gpu", report.gpuName}, {"gpu_id", report.gpuId},
          {"date", report.date},        {"groups", groups},      {"rows", rows}};
}

std::string toMarkdown(const CalibrationEvalReport& report, bool rows) {
  std::ostringstream out;
  out << "The models alone on `" << report.path << "` (" << report.gpuName << ", " << report.date
      << "): " << report.rows.size() << " measured ops, each predicted as a trace of that op on "
      << report.gpuId << " without the file.\n\n"
      << "| family | precision | ops | MAPE | median error | predicted / measured |\n"
      << "|---|---|---|---|---|---|\n";
  for (const CalibrationGroup& g : report.groups)
    out << "| " << (g.family ? toString(*g.family) : "all") << " | " << g.precision << " | "
        << g.errors.samples << " | " << number(g.errors.mapePercent, "%.1f%%") << " | "
        << number(g.errors.medianPercent, "%.1f%%") << " | "
        << number(g.predictedOverMeasured, "%.2f") << " |\n";
  if (!rows)
    return out.str();
  out << "\n| case | op | phase | precision | method | measured ms | predicted ms |\n"
      << "|---|---|---|---|---|---|---|\n";
  for (const CalibrationRow& r : report.rows)
    out << "| " << r.caseName << " | " << r.op << " | " << toString(r.phase) << " | " << r.precision
        << " | " << toString(r.method) << " | " << number(r.measuredMs, "%.4f") << " | "
        << number(r.predictedMs, "%.4f") << " |\n";
  return out.str();
}

} // namespace wavecast::eval
