#include "cli_train.h"

#include "cli/command_line.h"
#include "wavecast/learned/trainer.h"

#include <cstdio>
#include <iostream>
#include <stdexcept>

namespace wavecast::cli {
namespace {

CommandSpec trainSpec() {
  return {"train",
          "[--data DIR] [--out DIR] [options]",
          "Fits the learned per-op models (linear, bmm, conv2d, elementwise, layernorm,\n"
          "softmax) on NeuSight's single-kernel measurements and writes manifest.json and\n"
          "<family>.<member>.json per network (--ensemble). Seeded and deterministic.\n"
          "Calibration files (--calibration) add their GPU's measured FP32 ops.",
          {{"data", "DIR", "NeuSight data folder (default ../shared/data/neusight)"},
           {"out", "DIR", "output folder (default data/weights)"},
           {"gpus", "FILE",
            "GPU database the spec sheets come from, as when predicting (default "
            "data/gpus.json)"},
           {"seed", "N", "random seed (default 20250)"},
           {"epochs", "N", "passes over the data (default 25)"},
           {"ensemble", "N", "networks per family, each from its own seed (default 1)"},
           {"max-rows", "N",
            "rows per (op, GPU) file, seeded subsample; 0 = all (default 2500; 300 for each "
            "elementwise op)"},
           {"family", "NAME", "train only this family (repeatable)"},
           {"exclude-gpu", "STEM", "leave this GPU's files out, e.g. Tesla_T4 (repeatable)"},
           {"calibration", "FILE",
            "also train on a file written by 'wavecast calibrate': its FP32 ops, as "
            "measurements of the GPU it names (repeatable)"},
           {"threads", "N", "torch threads (default 1: faster for these small networks)"},
           {"fast", "", "reduced run for tests: 3 epochs, 300 rows per file (100 elementwise)"},
           {"quiet", "", "no progress on stderr"}},
          0,
          0};
}

} // namespace

int runTrain(const std::vector<std::string>& words) {
  const CommandSpec spec = trainSpec();
  const CommandLine args = CommandLine::parse(spec, words);
  if (args.helpRequested()) {
    std::cout << formatHelp(spec);
    return 0;
  }
  learned::TrainOptions options;
  options.dataDir = args.value("data").value_or("../shared/data/neusight");
  options.outDir = args.value("out").value_or("data/weights");
  options.gpuDatabase = args.value("gpus").value_or("data/gpus.json");
  options.verbose = !args.has("quiet");
  if (const auto seed = args.integerAtLeast("seed", 0))
    options.seed = uint64_t(*seed);
  if (args.has("fast")) {
    options.epochs = 3;
    options.maxRowsPerFile = 300;
    options.maxRowsPerElementwiseFile = 100;
  }
  options.epochs = int(args.positiveInt("epochs").value_or(options.epochs));
  options.ensembleSize = int(args.positiveInt("ensemble").value_or(options.ensembleSize));
  options.maxRowsPerFile = args.integerAtLeast("max-rows", 0).value_or(options.maxRowsPerFile);
  options.threads = int(args.positiveInt("threads").value_or(options.threads));
  std::vector<learned::KernelFamily> families;
  for (const auto& name : args.values("family")) {
    auto family = learned::kernelFamilyFromString(name);
    if (!family)
      throw UsageError("unknown family '" + name +
                       "' (linear, bmm, conv2d, elementwise, layernorm, softmax)");
    families.push_back(*family);
  }
  if (!families.empty())
    options.families = families;
  options.excludeGpus = args.values("exclude-gpu");
  options.calibrationFiles = args.values("calibration");

  try {
    const learned::TrainReport report = learned::trainLearnedModels(options);
    std::printf("%-12s %8s %10s %10s %11s %13s %8s\n", "family", "rows", "loss0", "loss",
                "train MAPE", "roofline MAPE", "seconds");
    for (const auto& f : report.families)
      std::printf("%-12s %8lld %10.4f %10.4f %10.1f%% %12.1f%% %8.1f\n", toString(f.family),
                  static_cast<long long>(f.samples), f.firstEpochLoss, f.finalLoss,
                  f.trainMapePercent, f.rooflineMapePercent, f.seconds);
    for (size_t i = 0; i < report.calibrations.size(); ++i)
      std::printf("%s: %lld FP32 ops of %s (%lld entries no learned model covers)\n",
                  options.calibrationFiles[i].c_str(),
                  static_cast<long long>(report.calibrations[i].samples),
                  report.calibrations[i].gpu.c_str(),
                  static_cast<long long>(report.calibrations[i].skipped));
    std::printf("wrote %s/manifest.json in %.1f s\n", options.outDir.c_str(), report.seconds);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "wavecast train: " << e.what() << "\n";
    return 1;
  }
}

} // namespace wavecast::cli
