// A fully connected ReLU network evaluated in plain C++: the fitted models are
// tiny, so predicting needs no LibTorch (which would cost the daemon ~150 MB
// of resident memory and a slow start). Training writes this format.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace wavecast::learned {

struct DenseLayer {
  int inputs = 0;
  int outputs = 0;
  std::vector<float> weight; // row-major, outputs x inputs
  std::vector<float> bias;   // outputs
};

class DenseNetwork {
public:
  // {"layers": [{"inputs", "outputs", "weight": [...], "bias": [...]}, ...]};
  // ReLU between layers, none after the last. Throws with the file's name.
  static DenseNetwork fromFile(const std::string& path);
  static DenseNetwork fromJson(const nlohmann::json& doc, const std::string& where);

  int inputs() const { return layers_.empty() ? 0 : layers_.front().inputs; }
  // `rows` is row-major, rows x inputs(); returns one output per row.
  std::vector<float> forward(const std::vector<float>& rows, size_t count) const;

private:
  std::vector<DenseLayer> layers_;
};

nlohmann::json denseLayersToJson(const std::vector<DenseLayer>& layers);

} // namespace wavecast::learned
