// NeuSight's whole-model labels: labels/<GPU>/<model>-<mode>-<seq>-<batch>.csv
// (one row per torch.fx node of a one-layer copy) and .json (full-depth times).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wavecast::eval {

struct FxRow {
  std::string name;        // fx node name
  std::string kind;        // placeholder, get_attr, call_function, call_method, call_module, output
  std::string target;      // printed callable, method name or module path
  std::string moduleClass; // last nn_module_stack class, short ("Linear")
  bool inRepeatedLayer = false; // belongs to layer 0 (h.0 / layer.0 / layers.0)
  std::vector<std::vector<int64_t>> inputShapes;
  std::vector<int64_t> outputShape;
  std::string dtype;
  double forwardMs = 0;
  double backwardMs = 0;
  double accumulateMs = 0; // weight-gradient accumulation

  double measuredMs() const { return forwardMs + backwardMs + accumulateMs; }
};

struct LabelRun {
  std::string gpu;   // GPU folder name = device_configs stem
  std::string model; // "bert_large"
  std::string mode;  // "inf" or "train"
  int64_t sequence = 0;
  int64_t batch = 0;
  int numLayers = 0;
  double e2eMs = 0; // measured, full depth
  std::vector<FxRow> rows;

  bool training() const { return mode == "train"; }
  std::string id() const; // "bert_large-inf-512-8"
};

// Parses one label pair; `csvPath` ends in .csv and its .json sits beside it.
// Throws std::runtime_error naming the file and the problem.
LabelRun readLabelRun(const std::string& gpu, const std::string& csvPath);

// Parses "[[8, 512], [1]]" and "(8, 512)" / "(1,)" shape texts; throws on junk.
std::vector<std::vector<int64_t>> parseShapeList(const std::string& text);
std::vector<int64_t> parseShape(const std::string& text);

struct LabelFile {
  std::string gpu;
  std::string csvPath;
};

struct LabelListing {
  std::vector<LabelFile> runs;          // csv + json pairs, sorted
  std::vector<std::string> withoutRows; // .json labels with no per-op .csv (not evaluable)
};

// `dir` is a labels/ folder of GPU folders or one GPU folder. `gpus` keeps only
// those folder names when non-empty.
LabelListing listLabels(const std::string& dir, const std::vector<std::string>& gpus);

} // namespace wavecast::eval
