#include "wavecast/learned/trainer.h"

#include "dense_network.h"
#include "mlp.h"
#include "wavecast/learned/kernel_dataset.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>

namespace fs = std::filesystem;

namespace wavecast::learned {
namespace {

// Saves the fitted network in the plain format predicting reads (dense_network.h),
// so nothing but training needs LibTorch.
void writeDenseNetwork(torch::nn::Sequential& net, const std::string& path) {
  std::vector<DenseLayer> layers;
  for (const auto& module : net->children()) {
    const auto* linear = module->as<torch::nn::LinearImpl>();
    if (!linear)
      continue; // ReLU: implied between dense layers
    const torch::Tensor weight = linear->weight.detach().contiguous().to(torch::kFloat);
    const torch::Tensor bias = linear->bias.detach().contiguous().to(torch::kFloat);
    DenseLayer layer;
    layer.outputs = int(weight.size(0));
    layer.inputs = int(weight.size(1));
    layer.weight.assign(weight.data_ptr<float>(), weight.data_ptr<float>() + weight.numel());
    layer.bias.assign(bias.data_ptr<float>(), bias.data_ptr<float>() + bias.numel());
    layers.push_back(std::move(layer));
  }
  std::ofstream out(path);
  out << denseLayersToJson(layers).dump();
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct FamilyFit {
  FamilyTrainReport report;
  std::vector<float> mean;
  std::vector<float> scale;
  std::vector<float> lowest; // each feature's range over the training rows
  std::vector<float> highest;
  torch::nn::Sequential net{nullptr};
};

FamilyFit fitFamily(KernelFamily family, const KernelDataset& data, const TrainOptions& options,
                    uint64_t seed) {
  const auto start = Clock::now();
  const int width = featureCount(family);
  std::vector<float> features;
  std::vector<float> targets;
  for (const KernelSample& sample : data.samples) {
    if (sample.shape.family != family)
      continue;
    const GpuFeatures& gpu = data.gpus.at(sample.gpu);
    const std::vector<float> x = kernelFeatures(sample.shape, gpu);
    features.insert(features.end(), x.begin(), x.end());
    targets.push_back(
        float(std::log(sample.latencyMs / rooflineCost(sample.shape, gpu).boundMs())));
  }
  const int64_t n = int64_t(targets.size());
  if (n == 0)
    throw std::runtime_error(std::string("no training rows for ") + toString(family));

  torch::Tensor x = torch::from_blob(features.data(), {n, width}, torch::kFloat).clone();
  const torch::Tensor y = torch::from_blob(targets.data(), {n, 1}, torch::kFloat).clone();
  const torch::Tensor mean = x.mean(0);
  const torch::Tensor scale = x.std(0).clamp_min(1e-3);
  const torch::Tensor lowest = std::get<0>(x.min(0));
  const torch::Tensor highest = std::get<0>(x.max(0));
  x = (x - mean) / scale;

  FamilyFit fit;
  fit.report.family = family;
  fit.report.samples = n;
  fit.mean.assign(mean.data_ptr<float>(), mean.data_ptr<float>() + width);
  fit.scale.assign(scale.data_ptr<float>(), scale.data_ptr<float>() + width);
  fit.lowest.assign(lowest.data_ptr<float>(), lowest.data_ptr<float>() + width);
  fit.highest.assign(highest.data_ptr<float>(), highest.data_ptr<float>() + width);

  torch::manual_seed(seed + uint64_t(family));
  fit.net = makeMlp(width, options.hiddenWidth);
  torch::optim::Adam optimizer(fit.net->parameters(),
                               torch::optim::AdamOptions(options.learningRate));
  std::mt19937_64 rng(seed * 31 + uint64_t(family));
  std::vector<int64_t> order(size_t(n), 0);
  std::iota(order.begin(), order.end(), 0);
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    // Cosine decay: large steps early, fine ones at the end.
    const double lr = options.learningRate * 0.5 *
                      (1.0 + std::cos(M_PI * double(epoch) / double(options.epochs)));
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    std::shuffle(order.begin(), order.end(), rng);
    const torch::Tensor perm = torch::from_blob(order.data(), {n}, torch::kLong);
    double lossSum = 0;
    for (int64_t begin = 0; begin < n; begin += options.batchSize) {
      const torch::Tensor idx = perm.slice(0, begin, std::min(n, begin + options.batchSize));
      const torch::Tensor loss =
          torch::mse_loss(fit.net->forward(x.index_select(0, idx)), y.index_select(0, idx));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      lossSum += loss.item<double>() * double(idx.size(0));
    }
    const double epochLoss = lossSum / double(n);
    if (epoch == 0)
      fit.report.firstEpochLoss = epochLoss;
    if (options.verbose)
      std::cerr << toString(family) << " epoch " << epoch + 1 << "/" << options.epochs << " loss "
                << epochLoss << "\n";
  }

  torch::NoGradGuard noGrad;
  fit.net->eval();
  const torch::Tensor predicted = fit.net->forward(x);
  fit.report.finalLoss = torch::mse_loss(predicted, y).item<double>();
  fit.report.trainMapePercent = 100.0 * (predicted - y).exp().sub(1.0).abs().mean().item<double>();
  fit.report.rooflineMapePercent = 100.0 * (-y).exp().sub(1.0).abs().mean().item<double>();
  fit.report.seconds = secondsSince(start);
  return fit;
}

} // namespace

TrainReport trainLearnedModels(const TrainOptions& options) {
  const auto start = Clock::now();
  if (options.ensembleSize < 1)
    throw std::invalid_argument("the ensemble needs at least one network per family");
  torch::set_num_threads(options.threads);
  KernelDatasetOptions dataOptions;
  dataOptions.families = options.families;
  dataOptions.excludeGpus = options.excludeGpus;
  dataOptions.maxRowsPerFile = options.maxRowsPerFile;
  dataOptions.maxRowsPerElementwiseFile = options.maxRowsPerElementwiseFile;
  dataOptions.seed = options.seed;
  dataOptions.gpuDatabase = options.gpuDatabase;
  KernelDataset data = loadKernelDataset(options.dataDir, dataOptions);
  TrainReport report;
  if (!options.calibrationFiles.empty()) {
    const GpuDatabase database = GpuDatabase::fromFile(options.gpuDatabase);
    for (const std::string& file : options.calibrationFiles)
      report.calibrations.push_back(addCalibrationSamples(data, file, database, options.families));
  }

  std::error_code error;
  fs::create_directories(options.outDir, error);
  if (!fs::is_directory(options.outDir))
    throw std::runtime_error("cannot create the output folder " + options.outDir);

  std::set<std::string> gpus;
  for (const KernelSample& sample : data.samples)
    gpus.insert(sample.gpu);
  report.trainingGpus.assign(gpus.begin(), gpus.end());

  nlohmann::json manifest;
  manifest["format"] = 2;
  manifest["target"] = "log(measured latency / FP32 roofline bound); utilisation = exp(-target); "
                       "the mean over the family's networks";
  manifest["source"] = "Fitted on the NeuSight kernel measurements (github.com/sitar-lab/NeuSight, "
                       "MIT licence, see NOTICE)";
  manifest["trainingGpus"] = report.trainingGpus;
  manifest["calibrations"] = nlohmann::json::array();
  for (size_t i = 0; i < report.calibrations.size(); ++i)
    manifest["calibrations"].push_back(
        {{"file", fs::path(options.calibrationFiles[i]).filename().string()},
         {"gpu", report.calibrations[i].gpu},
         {"samples", report.calibrations[i].samples}});
  manifest["specSheets"] = "wavecast GPU database (data/gpus.json)";
  manifest["seed"] = options.seed;
  manifest["epochs"] = options.epochs;
  manifest["ensembleSize"] = options.ensembleSize;
  manifest["maxRowsPerFile"] = options.maxRowsPerFile;
  manifest["maxRowsPerElementwiseFile"] = options.maxRowsPerElementwiseFile;
  manifest["families"] = nlohmann::json::object();
  for (KernelFamily family : options.families) {
    // Each row was timed with CUDA events around one call, which adds the launch and
    // the timer itself: the fastest row on any GPU is that overhead, not a kernel, and
    // marks where a row stops telling the kernel's time.
    double timingFloorMs = std::numeric_limits<double>::infinity();
    for (const KernelSample& sample : data.samples)
      if (sample.shape.family == family)
        timingFloorMs = std::min(timingFloorMs, sample.latencyMs);
    if (!std::isfinite(timingFloorMs))
      timingFloorMs = 0;
    std::vector<std::string> files;
    std::vector<FamilyFit> fits;
    for (int member = 0; member < options.ensembleSize; ++member) {
      // Members differ only in their seed (initial weights and batch order).
      fits.push_back(fitFamily(family, data, options, options.seed + 7919 * uint64_t(member)));
      files.push_back(std::string(toString(family)) + "." + std::to_string(member) + ".json");
      writeDenseNetwork(fits.back().net, (fs::path(options.outDir) / files.back()).string());
    }
    FamilyTrainReport r = fits.front().report;
    for (size_t i = 1; i < fits.size(); ++i) {
      r.seconds += fits[i].report.seconds;
      r.finalLoss += fits[i].report.finalLoss;
      r.trainMapePercent += fits[i].report.trainMapePercent;
    }
    r.finalLoss /= double(fits.size());
    r.trainMapePercent /= double(fits.size());
    manifest["families"][toString(family)] = {{"files", files},
                                              {"features", featureCount(family)},
                                              {"hidden", options.hiddenWidth},
                                              {"featureMean", fits.front().mean},
                                              {"featureScale", fits.front().scale},
                                              {"featureMin", fits.front().lowest},
                                              {"featureMax", fits.front().highest},
                                              {"samples", r.samples},
                                              {"finalLoss", r.finalLoss},
                                              {"trainMapePercent", r.trainMapePercent},
                                              {"rooflineMapePercent", r.rooflineMapePercent},
                                              {"timingFloorMs", timingFloorMs}};
    if (options.verbose)
      std::cerr << toString(family) << ": " << r.samples << " rows, " << fits.size()
                << " networks, loss " << r.firstEpochLoss << " -> " << r.finalLoss
                << ", train MAPE " << r.trainMapePercent << "% (roofline " << r.rooflineMapePercent
                << "%), " << r.seconds << " s\n";
    report.families.push_back(r);
  }
  std::ofstream out(fs::path(options.outDir) / "manifest.json");
  out << manifest.dump(1) << "\n";
  if (!out)
    throw std::runtime_error("cannot write " +
                             (fs::path(options.outDir) / "manifest.json").string());
  report.seconds = secondsSince(start);
  return report;
}

} // namespace wavecast::learned
