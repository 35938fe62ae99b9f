#include "wavecast/predictor/calibration.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>
#include <variant>

namespace wavecast {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw CalibrationError("calibration file " + path + ": " + what);
}

std::string stringField(const json& doc, const char* key) {
  const auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

double number(const json& object, const char* key, const std::string& where,
              const std::string& path, bool required) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    if (required)
      fail(path, where + "." + key + " is missing");
    return 0;
  }
  if (!it->is_number() || it->get<double>() < 0 || !std::isfinite(it->get<double>()))
    fail(path, where + "." + key + " must be a non-negative number");
  return it->get<double>();
}

CalibrationEntry entryFromJson(const json& j, size_t index, const std::string& path) {
  const std::string where = "entries[" + std::to_string(index) + "]";
  CalibrationEntry entry;
  try {
    entry.op = opRecordFromJson(j, where);
  } catch (const TraceFormatError& e) {
    fail(path, e.what());
  }
  entry.caseName = stringField(j, "case");
  entry.precision = stringField(j, "precision");
  if (const auto tf32 = j.find("tf32"); tf32 != j.end()) {
    if (!tf32->is_boolean())
      fail(path, where + ".tf32 must be true or false");
    entry.tf32 = tf32->get<bool>();
  }
  entry.medianMs = number(j, "median_ms", where, path, true);
  entry.spreadMs = number(j, "spread_ms", where, path, false);
  entry.repeats = static_cast<int>(number(j, "repeats", where, path, false));
  entry.transientBytes = static_cast<int64_t>(number(j, "transient_bytes", where, path, false));
  return entry;
}

// The canonical text of an argument: an integral float reads as the integer.
void appendArg(std::ostringstream& out, const ArgValue& value) {
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out << '[';
          for (const int64_t e : v)
            out << e << ',';
          out << ']';
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::floor(v) == v && std::abs(v) < 1e15)
            out << static_cast<int64_t>(v);
          else
            out << v;
        } else if constexpr (std::is_same_v<T, bool>) {
          out << (v ? "true" : "false");
        } else {
          out << v;
        }
      },
      value);
}

// What two ops must share to be timed alike, with or without their exact dimensions:
// name, phase, TF32, arguments, and per input its dtype, layout and rank (exact: its
// shape; near, for matrix work: whether each dimension is a multiple of 8). A
// non-contiguous input's layout says whether its last dimension is unit-stride (a kernel
// reads whole rows) or not (it reads across rows, as a copy of a transposed view does).
std::string opKey(const OpRecord& op, const OpCost& cost, bool exact) {
  const bool tf32 = cost.tf32;
  const bool alignment = cost.unit == ComputeUnit::Matrix;
  std::ostringstream out;
  out << op.name << '|' << toString(op.phase) << '|' << tf32 << '|';
  for (const auto& [key, value] : op.args) {
    out << key << '=';
    appendArg(out, value);
    out << ';';
  }
  out << '|';
  for (const auto& input : op.inputs) {
    if (!input) {
      out << "-,";
      continue;
    }
    out << toString(input->dtype) << (input->contiguous ? 'c' : 'n');
    if (!input->strides.empty())
      out << (input->strides.back() == 1 ? 'r' : 't');
    out << '[';
    for (const int64_t d : input->shape)
      if (exact)
        out << d << ' ';
      else if (alignment)
        out << (d % 8 == 0 ? 'a' : 'u');
      else
        out << 'd';
    out << "],";
  }
  return out.str();
}

bool near(double x, double y) {
  return x <= y * kNearWorkRatio && y <= x * kNearWorkRatio;
}

// Matrix work: the GEMM's rows (batch included), columns and K each within the near
// ratio, as its tiles, waves and slices follow them; equal FLOPs are not enough (a
// 1,024 x 64 output over a K of 16,384 is not a 1,536 x 512 one over 800).
bool nearGemm(const OpCost& traced, const OpCost& measured) {
  const GemmShape& a = traced.gemm;
  const GemmShape& b = measured.gemm;
  if (a.m <= 0 || a.n <= 0 || a.k <= 0 || b.m <= 0 || b.n <= 0 || b.k <= 0)
    return true;
  return near(std::max(1.0, a.batch) * a.m, std::max(1.0, b.batch) * b.m) && near(a.n, b.n) &&
         near(a.k, b.k);
}

// Norms, softmax, reductions, pooling and losses: their blocks follow the shape, not the
// bytes alone (a batch norm runs a block per channel over the rest), so a
// [8, 256, 56, 56] batch norm is not timed as a [32, 192, 35, 35] one. Elementwise work
// and copies stream their bytes whatever the shape.
bool shapedFamily(CostFamily family) {
  return family == CostFamily::Norm || family == CostFamily::Softmax ||
         family == CostFamily::Reduction || family == CostFamily::Pooling ||
         family == CostFamily::Loss;
}

// Sum over the dimensions of the inputs both ops have of |log(traced / measured)|; none
// where a dimension is beyond the near ratio.
std::optional<double> shapeDistance(const OpRecord& traced, const OpRecord& measured) {
  double distance = 0;
  const size_t inputs = std::min(traced.inputs.size(), measured.inputs.size());
  for (size_t i = 0; i < inputs; ++i) {
    const auto& a = traced.inputs[i];
    const auto& b = measured.inputs[i];
    if (!a || !b || a->shape.size() != b->shape.size())
      continue;
    for (size_t d = 0; d < a->shape.size(); ++d) {
      const double x = static_cast<double>(std::max<int64_t>(1, a->shape[d]));
      const double y = static_cast<double>(std::max<int64_t>(1, b->shape[d]));
      if (!near(x, y))
        return std::nullopt;
      distance += std::abs(std::log(x / y));
    }
  }
  return distance;
}

double work(const OpCost& cost) {
  return cost.unit == ComputeUnit::Matrix && cost.flops > 0 ? cost.flops : cost.dramBytes();
}

// How far a measured near shape is from the traced one: for matrix work its rows, columns
// and K, for the shaped families every input dimension, else the work. The nearest one's
// kernels are likeliest to be the traced op's (the same blocks per channel, the same tiles).
std::optional<double> nearDistance(const OpRecord& op, const OpCost& cost,
                                   const OpRecord& measuredOp, const OpCost& measured) {
  if (cost.unit == ComputeUnit::Matrix) {
    if (!nearGemm(cost, measured))
      return std::nullopt;
    const GemmShape& a = cost.gemm;
    const GemmShape& b = measured.gemm;
    if (a.m <= 0 || a.n <= 0 || a.k <= 0 || b.m <= 0 || b.n <= 0 || b.k <= 0)
      return std::abs(std::log(work(cost) / work(measured)));
    return std::abs(std::log(std::max(1.0, a.batch) * a.m / (std::max(1.0, b.batch) * b.m))) +
           std::abs(std::log(a.n / b.n)) + std::abs(std::log(a.k / b.k));
  }
  if (shapedFamily(cost.family))
    return shapeDistance(op, measuredOp);
  return std::abs(std::log(work(cost) / work(measured)));
}

} // namespace

Calibration calibrationFromJson(const json& doc, const std::string& path) {
  if (!doc.is_object())
    fail(path, "expected a JSON object");
  if (stringField(doc, "format") != kCalibrationFormat)
    fail(path, std::string("\"format\" must be \"") + kCalibrationFormat +
                   "\"; is this a file written by 'wavecast calibrate'?");
  const auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer())
    fail(path, "\"version\" is missing");
  if (version->get<int>() != kCalibrationFormatVersion)
    fail(path, "\"version\" is " + std::to_string(version->get<int>()) +
                   " but this wavecast reads version " + std::to_string(kCalibrationFormatVersion) +
                   "; calibrate again or use a wavecast of that version");
  Calibration out;
  out.path = path;
  const auto gpu = doc.find("gpu");
  if (gpu == doc.end() || !gpu->is_object() || stringField(*gpu, "name").empty())
    fail(path, "gpu.name is missing");
  out.gpuName = stringField(*gpu, "name");
  out.computeCapability = stringField(*gpu, "compute_capability");
  out.smCount = static_cast<int>(number(*gpu, "sm_count", "gpu", path, false));
  out.memoryBytes = static_cast<int64_t>(number(*gpu, "memory_bytes", "gpu", path, false));
  out.driver = stringField(doc, "driver");
  out.torch = stringField(doc, "torch");
  out.cuda = stringField(doc, "cuda");
  out.date = stringField(doc, "date");
  out.timer = stringField(doc, "timer");
  const auto complete = doc.find("complete");
  if (complete == doc.end() || !complete->is_boolean())
    fail(path, "\"complete\" must be true or false");
  out.complete = complete->get<bool>();
  if (const auto host = doc.find("host"); host != doc.end() && !host->is_null()) {
    if (!host->is_object())
      fail(path, "host must be an object");
    HostCalibration h;
    h.opUs = number(*host, "op_us", "host", path, true);
    h.launchUs = number(*host, "launch_us", "host", path, false);
    for (auto [field, rates] : {std::pair{"host_to_device_gbs", &h.toDevice},
                                std::pair{"device_to_host_gbs", &h.toHost}}) {
      const auto copies = host->find(field);
      if (copies == host->end())
        continue;
      const std::string where = std::string("host.") + field;
      if (!copies->is_object())
        fail(path, where + " must be an object {\"pinned\", \"pageable\"}");
      for (auto [key, rate] :
           {std::pair{"pinned", &rates->pinned}, std::pair{"pageable", &rates->pageable}})
        if (const double gbs = number(*copies, key, where, path, false); gbs > 0)
          *rate = gbs;
    }
    if (h.opUs > 0)
      out.host = h;
  }
  const auto entries = doc.find("entries");
  if (entries == doc.end() || !entries->is_array())
    fail(path, "\"entries\" must be a list");
  out.entries.reserve(entries->size());
  for (size_t i = 0; i < entries->size(); ++i)
    out.entries.push_back(entryFromJson((*entries)[i], i, path));
  // A GPU's calibration always has ops that hold a workspace (convolutions, attention), so
  // a file where none does is one that did not read the allocator.
  out.measuresTransientMemory =
      std::any_of(out.entries.begin(), out.entries.end(),
                  [](const CalibrationEntry& e) { return e.transientBytes > 0; });
  return out;
}

Calibration loadCalibration(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw CalibrationError("cannot read calibration file " + path);
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    fail(path, "not valid JSON");
  return calibrationFromJson(doc, path);
}

CalibrationTable::CalibrationTable(Calibration calibration) : calibration_(std::move(calibration)) {
  costs_.reserve(calibration_.entries.size());
  for (size_t i = 0; i < calibration_.entries.size(); ++i) {
    const CalibrationEntry& entry = calibration_.entries[i];
    costs_.push_back(estimateOpCost(entry.op));
    OpCost& cost = costs_.back();
    cost.tf32 = runsInTf32(cost, FloatPrecision{entry.tf32, entry.tf32, std::nullopt});
    if (cost.metadataOnly())
      continue;
    exact_.emplace(opKey(entry.op, cost, true), i); // the first of equal entries wins
    byName_[opKey(entry.op, cost, false)].push_back(i);
  }
}

std::optional<int64_t> CalibrationTable::transient(const CalibrationEntry& entry,
                                                   double ratio) const {
  if (!calibration_.measuresTransientMemory)
    return std::nullopt;
  return static_cast<int64_t>(static_cast<double>(entry.transientBytes) * ratio);
}

std::optional<CalibratedTime> CalibrationTable::find(const OpRecord& op, const OpCost& cost) const {
  if (cost.metadataOnly() || op.onHost)
    return std::nullopt;
  if (const auto it = exact_.find(opKey(op, cost, true)); it != exact_.end()) {
    const CalibrationEntry& entry = calibration_.entries[it->second];
    return CalibratedTime{entry.medianMs, nullptr, 1.0, transient(entry, 1.0)};
  }
  const auto sameKind = byName_.find(opKey(op, cost, false));
  const double traced = work(cost);
  if (sameKind == byName_.end() || traced <= 0)
    return std::nullopt;
  std::optional<CalibratedTime> best;
  double bestDistance = 0;
  for (const size_t i : sameKind->second) {
    const double measured = work(costs_[i]);
    if (measured <= 0 || !near(traced, measured))
      continue;
    const auto distance = nearDistance(op, cost, calibration_.entries[i].op, costs_[i]);
    if (!distance)
      continue;
    const double ratio = traced / measured;
    if (!best || *distance < bestDistance) {
      const CalibrationEntry& entry = calibration_.entries[i];
      best = CalibratedTime{entry.medianMs, &costs_[i], ratio, transient(entry, ratio)};
      bestDistance = *distance;
    }
  }
  return best;
}

} // namespace wavecast
