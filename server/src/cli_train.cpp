#include "cli_train.h"

#include "wavecast/learned/trainer.h"

#include <cstdio>
#include <iostream>
#include <stdexcept>

namespace wavecast::cli {
namespace {

constexpr const char* kTrainUsage =
    R"(usage: wavecast train [--data DIR] [--out DIR] [options]

Fits the learned per-op models (linear, bmm, conv2d, elementwise, layernorm,
softmax) on NeuSight's single-kernel measurements and writes manifest.json and
<family>.<member>.json per network (--ensemble). Seeded and deterministic.

  --data DIR          NeuSight data folder (default ../shared/data/neusight)
  --out DIR           output folder (default data/weights)
  --gpus FILE         GPU database the spec sheets come from, as when predicting
                      (default data/gpus.json)
  --seed N            random seed (default 20250)
  --epochs N          passes over the data (default 25)
  --ensemble N        networks per family, each from its own seed (default 1)
  --max-rows N        rows per (op, GPU) file, seeded subsample; 0 = all (default 2500;
                      300 for each elementwise op)
  --family NAME       train only this family (repeatable)
  --exclude-gpu STEM  leave this GPU's files out, e.g. Tesla_T4 (repeatable)
  --threads N         torch threads (default 1: faster for these small networks)
  --fast              reduced run for tests: 3 epochs, 300 rows per file (100 elementwise)
  --quiet             no progress on stderr
)";

int parseInt(const std::string& flag, const std::string& value) {
  try {
    return std::stoi(value);
  } catch (const std::exception&) {
    throw std::invalid_argument(flag + " expects a number, got '" + value + "'");
  }
}

} // namespace

int runTrain(const std::vector<std::string>& args) {
  learned::TrainOptions options;
  options.dataDir = "../shared/data/neusight";
  options.outDir = "data/weights";
  options.gpuDatabase = "data/gpus.json";
  options.verbose = true;
  std::vector<learned::KernelFamily> families;
  try {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& flag = args[i];
      auto value = [&]() -> const std::string& {
        if (i + 1 >= args.size())
          throw std::invalid_argument(flag + " needs a value");
        return args[++i];
      };
      if (flag == "--help" || flag == "-h") {
        std::cout << kTrainUsage;
        return 0;
      } else if (flag == "--data") {
        options.dataDir = value();
      } else if (flag == "--out") {
        options.outDir = value();
      } else if (flag == "--gpus") {
        options.gpuDatabase = value();
      } else if (flag == "--seed") {
        options.seed = uint64_t(std::stoull(value()));
      } else if (flag == "--epochs") {
        options.epochs = parseInt(flag, value());
      } else if (flag == "--ensemble") {
        options.ensembleSize = parseInt(flag, value());
      } else if (flag == "--max-rows") {
        options.maxRowsPerFile = parseInt(flag, value());
      } else if (flag == "--threads") {
        options.threads = parseInt(flag, value());
      } else if (flag == "--family") {
        const std::string& name = value();
        auto family = learned::kernelFamilyFromString(name);
        if (!family)
          throw std::invalid_argument("unknown family '" + name +
                                      "' (linear, bmm, conv2d, elementwise, layernorm, softmax)");
        families.push_back(*family);
      } else if (flag == "--exclude-gpu") {
        options.excludeGpus.push_back(value());
      } else if (flag == "--fast") {
        options.epochs = 3;
        options.maxRowsPerFile = 300;
        options.maxRowsPerElementwiseFile = 100;
      } else if (flag == "--quiet") {
        options.verbose = false;
      } else {
        throw std::invalid_argument("unknown option '" + flag + "'");
      }
    }
    if (!families.empty())
      options.families = families;
    if (options.epochs <= 0 || options.threads <= 0 || options.ensembleSize <= 0)
      throw std::invalid_argument("--epochs, --threads and --ensemble must be positive");
  } catch (const std::exception& e) {
    std::cerr << "wavecast train: " << e.what() << "\n\n" << kTrainUsage;
    return 2;
  }

  try {
    const learned::TrainReport report = learned::trainLearnedModels(options);
    std::printf("%-12s %8s %10s %10s %11s %13s %8s\n", "family", "rows", "loss0", "loss",
                "train MAPE", "roofline MAPE", "seconds");
    for (const auto& f : report.families)
      std::printf("%-12s %8lld %10.4f %10.4f %10.1f%% %12.1f%% %8.1f\n", toString(f.family),
                  static_cast<long long>(f.samples), f.firstEpochLoss, f.finalLoss,
                  f.trainMapePercent, f.rooflineMapePercent, f.seconds);
    std::printf("wrote %s/manifest.json in %.1f s\n", options.outDir.c_str(), report.seconds);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "wavecast train: " << e.what() << "\n";
    return 1;
  }
}

} // namespace wavecast::cli
