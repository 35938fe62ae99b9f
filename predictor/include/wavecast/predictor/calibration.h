// Calibration files: one GPU's measured op times, written by `wavecast calibrate`
// (docs/calibration.md), and how a traced op finds its measurement in one.
#pragma once

#include "wavecast/predictor/op_cost.h"
#include "wavecast/trace.h"

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace wavecast {

inline constexpr const char* kCalibrationFormat = "wavecast-calibration";
inline constexpr int kCalibrationFormatVersion = 1;

// A file that is not a calibration this build reads; the message names the file and field.
class CalibrationError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// One measured op: the op as a trace records it, the precision it ran in, its time.
struct CalibrationEntry {
  OpRecord op;           // name, phase, inputs, outputs, args
  std::string caseName;  // the suite's case that ran it ("linear 8192x768 -> 768")
  std::string precision; // "fp32", "tf32", "bf16", "fp16": the case's, for people
  bool tf32 = false;     // float32 matrix math ran on TF32 tensor cores
  double medianMs = 0;
  double spreadMs = 0; // interquartile range of the samples
  int repeats = 0;
  // Memory the op held only while it ran (cuDNN's workspace, its temporaries): the
  // allocator's peak during the op above what stayed allocated after it.
  int64_t transientBytes = 0;
};

// This machine's CPU cost per op, on the CPU clock.
struct HostCalibration {
  double opUs = 0;     // an op with autograd bookkeeping and one launch
  double launchUs = 0; // an in-place op: dispatch and launch only
  // Copies over the host link, 10^9 B/s: page-locked memory's (the DMA), and pageable
  // memory's as `x.to("cuda")` and `x.cpu()` make them (the call to its return: staging and
  // DMA). Absent in a file from before calibrate measured them.
  struct CopyRates {
    std::optional<double> pinned;
    std::optional<double> pageable;
  };
  CopyRates toDevice;
  CopyRates toHost;

  const CopyRates& copies(TransferDirection direction) const {
    return direction == TransferDirection::ToDevice ? toDevice : toHost;
  }
};

struct Calibration {
  std::string path;
  std::string gpuName; // as torch reports it: "NVIDIA H100 80GB HBM3"
  std::string computeCapability;
  int smCount = 0;
  int64_t memoryBytes = 0;
  std::string driver, torch, cuda, date, timer;
  bool complete = false;
  // Whether the file has each op's transient memory: a file from before calibrate read the
  // allocator (or from the fake timer) has none, and its ops' workspaces are not known.
  bool measuresTransientMemory = false;
  std::optional<HostCalibration> host;
  std::vector<CalibrationEntry> entries;
};

Calibration calibrationFromJson(const nlohmann::json& doc, const std::string& path);
// Throws CalibrationError naming `path` and the field (a wrong format or version included).
Calibration loadCalibration(const std::string& path);

// A measured time for a traced op: its own shape's, or the nearest near shape's, which the
// predictor scales to the traced shape by the roofline's ratio (prediction_stages.cpp).
struct CalibratedTime {
  double measuredMs = 0;
  // The near shape's cost; null when the traced shape itself was measured. Owned by the
  // table.
  const OpCost* measuredCost = nullptr;
  double ratio = 1; // traced work / measured work (FLOPs for matrix work, else bytes)
  // The measured op's transient memory, scaled by the ratio for a near shape; absent when
  // the file has none.
  std::optional<int64_t> transientBytes;

  bool exact() const { return measuredCost == nullptr; }
  // The measured time scaled by the ratio of work (the roofline's ratio aside).
  double timeMs() const { return measuredMs * ratio; }
};

// Near shapes: the same op, phase, arguments, dtypes, ranks and layouts, for matrix work
// the same alignment of every dimension (a multiple of 8 or not, as cuBLAS and cuDNN pick
// kernels by it) and the GEMM's rows, columns and K each within kNearWorkRatio, for norms,
// softmax, reductions, pooling and losses each input dimension within it, and a work ratio
// within [1 / kNearWorkRatio, kNearWorkRatio].
inline constexpr double kNearWorkRatio = 2.0;

// One GPU's calibration, indexed for lookups: entries by their exact key, and by op name
// for near shapes. Entries that launch no work (views) are left out.
class CalibrationTable {
public:
  explicit CalibrationTable(Calibration calibration);
  const Calibration& calibration() const { return calibration_; }
  // `cost` is the op's, with `tf32` set as it runs (costOps).
  std::optional<CalibratedTime> find(const OpRecord& op, const OpCost& cost) const;

private:
  std::optional<int64_t> transient(const CalibrationEntry& entry, double ratio) const;

  Calibration calibration_;
  std::vector<OpCost> costs_; // [entry]
  std::map<std::string, size_t> exact_;
  std::map<std::string, std::vector<size_t>> byName_;
};

} // namespace wavecast
