// The accuracy harness behind `wavecast eval`: predicts every label's rows,
// rebuilds the end-to-end time the way the labels were measured and compares.
#pragma once

#include "wavecast/eval/fx_mapping.h"
#include "wavecast/eval/labels.h"
#include "wavecast/learned/kernel_shape.h"

#include <array>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace wavecast::learned {
class LearnedModels;
}

namespace wavecast::eval {

// Times a batch of kernels on one GPU.
class KernelTimer {
public:
  virtual ~KernelTimer() = default;
  virtual std::vector<double> timesMs(const std::vector<learned::KernelShape>& kernels,
                                      const learned::GpuFeatures& gpu) const = 0;
  virtual std::string name() const = 0;
};

// The bare FP32 roofline bound (NeuSight's "roofline" baseline).
class RooflineTimer : public KernelTimer {
public:
  std::vector<double> timesMs(const std::vector<learned::KernelShape>& kernels,
                              const learned::GpuFeatures& gpu) const override;
  std::string name() const override { return "roofline"; }
};

// The learned models; the roofline for families they do not cover.
class LearnedTimer : public KernelTimer {
public:
  explicit LearnedTimer(const learned::LearnedModels& models) : models_(models) {}
  std::vector<double> timesMs(const std::vector<learned::KernelShape>& kernels,
                              const learned::GpuFeatures& gpu) const override;
  std::string name() const override { return "learned"; }

private:
  const learned::LearnedModels& models_;
};

struct FamilyComparison {
  double measuredMs = 0;
  double predictedMs = 0;
  double absErrorMs = 0; // sum over rows of |predicted - measured|
  // Latency-weighted error: sum |predicted - measured| / sum measured.
  double weightedErrorPercent() const;
  void add(const FamilyComparison& other);
};

// One mapped row's prediction, for `wavecast eval --rows`.
struct RowDetail {
  std::string row;
  std::string op;
  OpFamily family = OpFamily::Other;
  double repeat = 1;
  double measuredMs = 0;
  double predictedMs = 0;
  std::string kernels; // forward kernels, described
};

struct LabelResult {
  std::string gpu;
  std::string label; // "bert_large-inf-512-8"
  std::string mode;
  int numLayers = 0;
  double measuredE2eMs = 0;
  double predictedE2eMs = 0;
  double baselineE2eMs = 0;   // the roofline
  double measuredOpSumMs = 0; // label rows, layer block x num_layer
  std::array<FamilyComparison, kOpFamilyCount> families{};
  int rows = 0;
  int metadataRows = 0;
  int unmappedRows = 0;
  std::vector<RowDetail> details;      // mapped, non-metadata rows
  double errorPercent() const;         // signed, (predicted - measured) / measured
  double baselineErrorPercent() const; // signed
};

struct UnmappedRow {
  std::string label; // "<GPU>/<label>"
  std::string row;
  std::string kind;
  std::string target;
  std::string reason;
};

struct ErrorSummary {
  int count = 0;
  double mapePercent = 0;
  double medianPercent = 0;
  double biasPercent = 0; // mean signed error
  static ErrorSummary of(const std::vector<double>& signedPercents);
};

struct GpuResult {
  std::string gpu;
  ErrorSummary model;
  ErrorSummary baseline;
  std::array<FamilyComparison, kOpFamilyCount> families{};
};

struct EvalReport {
  std::string modelName;
  std::vector<LabelResult> labels;
  std::vector<GpuResult> gpus;
  ErrorSummary overall;
  ErrorSummary overallBaseline;
  std::array<FamilyComparison, kOpFamilyCount> families{};
  std::vector<UnmappedRow> unmapped;
  std::vector<std::string> labelsWithoutRows;
  // GPU folder name -> GPU database id (data/gpus.json), where the database knows it.
  std::map<std::string, std::string> databaseIds;
};

// `gpus` maps GPU folder names (device_configs stems) to their spec sheets.
// Throws std::runtime_error for a label GPU with no spec.
EvalReport evaluateLabels(const LabelListing& listing,
                          const std::map<std::string, learned::GpuFeatures>& gpus,
                          const KernelTimer& model, const KernelTimer& baseline);
// Fills `gpus`, `overall`, `overallBaseline` and `families` from `labels`.
void summarise(EvalReport& report);
// One label: rows mapped, predicted, summed as measured (layer rows x num_layer).
LabelResult evaluateLabel(const LabelRun& run, const learned::GpuFeatures& gpu,
                          const KernelTimer& model, const KernelTimer& baseline,
                          std::vector<UnmappedRow>* unmapped);

nlohmann::json toJson(const EvalReport& report);
std::string toText(const EvalReport& report);
std::string toMarkdown(const EvalReport& report);

} // namespace wavecast::eval
