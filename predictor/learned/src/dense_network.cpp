#include "dense_network.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace wavecast::learned {

DenseNetwork DenseNetwork::fromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read the learned weights " + path +
                             "; retrain with `wavecast train`");
  const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    throw std::runtime_error(path + " is not valid JSON; retrain with `wavecast train`");
  return fromJson(doc, path);
}

DenseNetwork DenseNetwork::fromJson(const nlohmann::json& doc, const std::string& where) {
  DenseNetwork network;
  const auto bad = [&](const std::string& what) {
    return std::runtime_error(where + ": " + what + "; retrain with `wavecast train`");
  };
  if (!doc.is_object() || !doc.contains("layers") || !doc.at("layers").is_array() ||
      doc.at("layers").empty())
    throw bad("no layers");
  for (const auto& entry : doc.at("layers")) {
    DenseLayer layer;
    layer.inputs = entry.value("inputs", 0);
    layer.outputs = entry.value("outputs", 0);
    layer.weight = entry.value("weight", std::vector<float>{});
    layer.bias = entry.value("bias", std::vector<float>{});
    if (layer.inputs <= 0 || layer.outputs <= 0 ||
        layer.weight.size() != size_t(layer.inputs) * size_t(layer.outputs) ||
        layer.bias.size() != size_t(layer.outputs))
      throw bad("a layer's sizes do not match its weights");
    if (!network.layers_.empty() && network.layers_.back().outputs != layer.inputs)
      throw bad("consecutive layers do not fit together");
    network.layers_.push_back(std::move(layer));
  }
  if (network.layers_.back().outputs != 1)
    throw bad("the last layer must have one output");
  return network;
}

std::vector<float> DenseNetwork::forward(const std::vector<float>& rows, size_t count) const {
  std::vector<float> current = rows;
  std::vector<float> next;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const DenseLayer& layer = layers_[l];
    next.assign(count * size_t(layer.outputs), 0.0f);
    for (size_t r = 0; r < count; ++r) {
      const float* x = &current[r * size_t(layer.inputs)];
      float* y = &next[r * size_t(layer.outputs)];
      for (int o = 0; o < layer.outputs; ++o) {
        const float* w = &layer.weight[size_t(o) * size_t(layer.inputs)];
        float sum = layer.bias[size_t(o)];
        for (int i = 0; i < layer.inputs; ++i)
          sum += w[i] * x[i];
        y[o] = (l + 1 < layers_.size()) ? std::max(sum, 0.0f) : sum;
      }
    }
    current.swap(next);
  }
  return current;
}

nlohmann::json denseLayersToJson(const std::vector<DenseLayer>& layers) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& layer : layers)
    list.push_back({{"inputs", layer.inputs},
                    {"outputs", layer.outputs},
                    {"weight", layer.weight},
                    {"bias", layer.bias}});
  return {{"layers", list}};
}

} // namespace wavecast::learned
