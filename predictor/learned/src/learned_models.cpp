#include "wavecast/learned/learned_models.h"

#include "dense_network.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace fs = std::filesystem;

namespace wavecast::learned {
namespace {

// A kernel runs at most a little faster than its spec-sheet roofline bound
// (boost clocks above the listed one) and, for the shapes the models cover, at
// no less than 0.1% of it: outside the training shapes the networks can
// extrapolate to absurd times, which this bounds.
constexpr double kMinLogRatio = -0.5;
constexpr double kMaxLogRatio = 6.9;

struct FamilyModel {
  bool present = false;
  std::vector<std::string> files; // one network each; their log outputs are averaged
  int features = 0;
  std::vector<float> mean;
  std::vector<float> scale;
  std::vector<float> lowest; // the training range of each feature
  std::vector<float> highest;
  double timingFloorMs = 0;
  std::once_flag loaded;
  std::vector<DenseNetwork> nets;
};

// Below a few thousand elements (eight 512-element blocks) a memory-bound kernel
// is all launch: its time no longer shrinks. The training rows that small are
// few and noisy and the fit there is not monotonic, so smaller tensors (scalar
// fills, masks) are timed as 4096 elements.
constexpr int64_t kSmallestModelledElements = 4096;

KernelShape launchBoundFloor(const KernelShape& shape) {
  const bool memoryBound = shape.family == KernelFamily::Elementwise ||
                           shape.family == KernelFamily::LayerNorm ||
                           shape.family == KernelFamily::Softmax;
  if (!memoryBound || shape.rows * shape.cols >= kSmallestModelledElements)
    return shape;
  KernelShape floor = shape;
  floor.rows = 1;
  floor.cols = kSmallestModelledElements;
  return floor;
}

} // namespace

struct LearnedModels::Impl {
  std::string directory;
  std::vector<std::string> trainingGpus;
  std::array<FamilyModel, kKernelFamilyCount> families;

  FamilyModel& loadedModel(KernelFamily family) {
    FamilyModel& model = families[size_t(family)];
    std::call_once(model.loaded, [&] {
      for (const std::string& file : model.files) {
        DenseNetwork net = DenseNetwork::fromFile((fs::path(directory) / file).string());
        if (net.inputs() != model.features)
          throw std::runtime_error(file + " does not match its manifest entry; retrain with "
                                          "`wavecast train`");
        model.nets.push_back(std::move(net));
      }
    });
    return model;
  }
};

LearnedModels::LearnedModels(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LearnedModels::LearnedModels(LearnedModels&&) noexcept = default;
LearnedModels& LearnedModels::operator=(LearnedModels&&) noexcept = default;
LearnedModels::~LearnedModels() = default;

LearnedModels LearnedModels::open(const std::string& weightsDir) {
  const fs::path manifestPath = fs::path(weightsDir) / "manifest.json";
  std::ifstream in(manifestPath);
  if (!in)
    throw std::runtime_error("no learned weights at " + manifestPath.string() +
                             ": run `wavecast train --data ../shared/data/neusight --out " +
                             weightsDir + "`");
  const nlohmann::json manifest = nlohmann::json::parse(in);
  auto impl = std::make_unique<Impl>();
  impl->directory = weightsDir;
  impl->trainingGpus = manifest.at("trainingGpus").get<std::vector<std::string>>();
  for (const auto& [name, entry] : manifest.at("families").items()) {
    const auto family = kernelFamilyFromString(name);
    if (!family)
      throw std::runtime_error(manifestPath.string() + ": unknown family '" + name + "'");
    FamilyModel& model = impl->families[size_t(*family)];
    model.present = true;
    if (!entry.contains("files") || entry.at("files").empty())
      throw std::runtime_error(manifestPath.string() + ": the " + name +
                               " entry lists no networks (an older format); retrain with "
                               "`wavecast train`");
    model.files = entry.at("files").get<std::vector<std::string>>();
    model.features = entry.at("features").get<int>();
    model.mean = entry.at("featureMean").get<std::vector<float>>();
    model.scale = entry.at("featureScale").get<std::vector<float>>();
    if (!entry.contains("featureMin") || !entry.contains("featureMax"))
      throw std::runtime_error(manifestPath.string() + ": the " + name +
                               " entry lacks the training ranges (an older format); retrain "
                               "with `wavecast train`");
    model.lowest = entry.at("featureMin").get<std::vector<float>>();
    model.highest = entry.at("featureMax").get<std::vector<float>>();
    model.timingFloorMs = entry.value("timingFloorMs", 0.0);
    if (model.features != featureCount(*family) || int(model.mean.size()) != model.features ||
        int(model.scale.size()) != model.features || int(model.lowest.size()) != model.features ||
        int(model.highest.size()) != model.features)
      throw std::runtime_error(manifestPath.string() + ": the " + name +
                               " model was trained on other features; retrain with "
                               "`wavecast train`");
  }
  return LearnedModels(std::move(impl));
}

bool LearnedModels::covers(KernelFamily family) const {
  return impl_->families[size_t(family)].present;
}

double LearnedModels::timingFloorMs(KernelFamily family) const {
  return impl_->families[size_t(family)].timingFloorMs;
}

std::vector<std::optional<double>>
LearnedModels::predictMs(const std::vector<KernelQuery>& queries) const {
  std::vector<std::optional<double>> answers(queries.size());
  std::array<std::vector<size_t>, kKernelFamilyCount> byFamily;
  for (size_t i = 0; i < queries.size(); ++i)
    if (covers(queries[i].shape.family) && queries[i].shape.valid() && queries[i].gpu.valid())
      byFamily[size_t(queries[i].shape.family)].push_back(i);

  for (int f = 0; f < kKernelFamilyCount; ++f) {
    const std::vector<size_t>& indices = byFamily[size_t(f)];
    if (indices.empty())
      continue;
    FamilyModel& model = impl_->loadedModel(KernelFamily(f));
    // A model's repeated layers ask for the same kernel again and again: each distinct
    // row runs through the networks once (a row's answer does not depend on the batch).
    std::vector<float> rows;
    std::unordered_map<std::string, size_t> distinct;
    std::vector<size_t> rowOf;
    std::vector<double> bounds;
    std::vector<float> row(size_t(model.features));
    for (size_t i : indices) {
      const KernelShape shape = launchBoundFloor(queries[i].shape);
      const std::vector<float> x = kernelFeatures(shape, queries[i].gpu);
      // Inputs are held to the range training saw: a ReLU network extrapolates
      // linearly, so a GPU or shape beyond it (H100's 132 SMs, a 7x7 stem) would
      // otherwise get an unbounded answer rather than that of its nearest kin.
      for (size_t j = 0; j < size_t(model.features); ++j)
        row[j] =
            (std::clamp(x[j], model.lowest[j], model.highest[j]) - model.mean[j]) / model.scale[j];
      const auto [it, added] = distinct.try_emplace(
          std::string(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float)),
          distinct.size());
      if (added)
        rows.insert(rows.end(), row.begin(), row.end());
      rowOf.push_back(it->second);
      bounds.push_back(rooflineCost(shape, queries[i].gpu).boundMs());
    }
    std::vector<float> logRatio(distinct.size(), 0.0f);
    for (const DenseNetwork& net : model.nets) {
      const std::vector<float> out = net.forward(rows, distinct.size());
      for (size_t r = 0; r < distinct.size(); ++r)
        logRatio[r] += out[r] / float(model.nets.size());
    }
    for (size_t r = 0; r < indices.size(); ++r)
      answers[indices[r]] =
          bounds[r] * std::exp(std::clamp(double(logRatio[rowOf[r]]), kMinLogRatio, kMaxLogRatio));
  }
  return answers;
}

std::vector<std::string> LearnedModels::trainingGpus() const {
  return impl_->trainingGpus;
}

const std::string& LearnedModels::directory() const {
  return impl_->directory;
}

} // namespace wavecast::learned
