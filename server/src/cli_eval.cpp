#include "cli_eval.h"

#include "cli/command_line.h"
#include "wavecast/eval/calibration_eval.h"
#include "wavecast/eval/harness.h"
#include "wavecast/eval/kernel_eval.h"
#include "wavecast/eval/logo.h"
#include "wavecast/eval/measured_gpus.h"
#include "wavecast/learned/kernel_dataset.h"
#include "wavecast/learned/learned_models.h"
#include "wavecast/learned/learned_op_time_model.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/tensor_core_gemm.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace wavecast::cli {
namespace {

CommandSpec evalSpec() {
  return {"eval",
          "LABEL_DIR [--gpu NAME...] [--json] [--markdown FILE]\n"
          "       wavecast eval --kernels [--gpu NAME...] [--origin NAME...] [--json]\n"
          "       wavecast eval --logo [--markdown FILE] [--work DIR] [training options]\n"
          "       wavecast eval --calibration FILE [--rows] [--json] [--markdown FILE]",
          "Compares wavecast's predictions with real measurements (NeuSight's data).\n"
          "LABEL_DIR is NeuSight's labels/ folder or one GPU folder in it: every\n"
          "<model>-<mode>-<seq>-<batch>.csv row is mapped to wavecast's ops, predicted\n"
          "(forward, and backward for training labels), summed the way the label was\n"
          "measured (layer rows x num_layer) and compared with the .json e2e latency.\n"
          "--calibration FILE predicts each op a 'wavecast calibrate' file measured with the\n"
          "models alone, on the file's GPU, and compares it with its measured time by op\n"
          "family and precision (FP32, TF32, bf16, fp16).",
          {{"gpu", "NAME", "only these GPUs (folders or GPU names: \"t4\", \"a100\"; repeatable)"},
           {"weights", "DIR", "learned weights (default data/weights)"},
           {"data", "DIR",
            "NeuSight data folder for GPU specs and kernels (default ../shared/data/neusight)"},
           {"gpus", "FILE",
            "GPU database the folder names are matched against and the spec sheets come from "
            "(default data/gpus.json)"},
           {"roofline", "", "predict with the bare roofline instead of the learned models"},
           {"rows", "", "also print every mapped row: measured vs predicted"},
           {"json", "", "machine-readable output on stdout"},
           {"markdown", "FILE", "also write the report as Markdown"},
           {"kernels", "",
            "single-kernel accuracy on DATA/kernels; --origin adds the scaled mode (measured on "
            "the origin, predicted for --gpu)"},
           {"origin", "NAME", "origin GPU for --kernels (repeatable)"},
           {"calibration", "FILE",
            "the models alone against a calibration file's measured ops, by family and "
            "precision"},
           {"gemm-model", "FILE",
            "the tensor-core GEMM model the predictor prices those GEMMs with (--calibration; "
            "default data/tensor_core_gemm.json)"},
           {"logo", "",
            "leave-one-GPU-out: train on all but one GPU, evaluate it, for each labelled GPU"},
           {"work", "DIR", "where --logo keeps the fold weights (default build/logo-weights)"},
           {"epochs", "N", "as for train (--logo)"},
           {"max-rows", "N", "as for train (--logo)"},
           {"seed", "N", "as for train (--logo)"},
           {"ensemble", "N", "as for train (--logo)"},
           {"fast", "", "as for train (--logo)"}},
          0,
          1};
}

// "--gpu a100,v100 --gpu t4" -> a100, v100, t4
std::vector<std::string> splitLists(const std::vector<std::string>& lists) {
  std::vector<std::string> names;
  for (const std::string& list : lists)
    for (std::string& name : splitList(list))
      names.push_back(std::move(name));
  return names;
}

bool writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return bool(out);
}

// The predictor `wavecast predict` has for a GPU it holds no calibration of: the learned
// models of `weights` (unless --roofline) and the tensor-core GEMM model.
PredictorOptions modelsAlone(const std::string& weights, const std::string& gemmModel,
                             bool roofline) {
  PredictorOptions options;
  std::error_code ec;
  if (!gemmModel.empty() && std::filesystem::exists(gemmModel, ec))
    options.roofline.tensorCoreGemm = TensorCoreGemmModel::fromFile(gemmModel);
  if (!roofline)
    options.opTimeModel = learned::LearnedOpTimeModel::open(weights);
  return options;
}

int evalCalibration(const std::string& file, const std::string& gpuDatabase,
                    const PredictorOptions& options, bool json, bool rows,
                    const std::string& markdown) {
  const Calibration calibration = loadCalibration(file);
  const GpuDatabase database = GpuDatabase::fromFile(gpuDatabase);
  const DeviceSpec* gpu = database.find(calibration.gpuName);
  if (!gpu)
    throw std::runtime_error(file + ": its GPU \"" + calibration.gpuName + "\" is not in " +
                             gpuDatabase + "; add it (docs/gpus.md)");
  const eval::CalibrationEvalReport report = eval::evaluateCalibration(calibration, *gpu, options);
  const std::string text = eval::toMarkdown(report, rows);
  if (!markdown.empty() && !writeFile(markdown, text))
    throw std::runtime_error("cannot write " + markdown);
  std::cout << (json ? eval::toJson(report).dump(1) + "\n" : text);
  return 0;
}

} // namespace

int runEval(const std::vector<std::string>& words) {
  const CommandSpec spec = evalSpec();
  const CommandLine args = CommandLine::parse(spec, words);
  if (args.helpRequested()) {
    std::cout << formatHelp(spec);
    return 0;
  }
  const std::string labelDir = args.positional().empty() ? "" : args.positional().front();
  const std::string weights = args.value("weights").value_or("data/weights");
  const std::string data = args.value("data").value_or("../shared/data/neusight");
  const std::string markdown = args.value("markdown").value_or("");
  const std::string work = args.value("work").value_or("build/logo-weights");
  const std::string gpuDatabase = args.value("gpus").value_or("data/gpus.json");
  const std::vector<std::string> gpuNames = args.values("gpu");
  const std::vector<std::string> originNames = args.values("origin");
  const bool json = args.has("json"), kernels = args.has("kernels"), logo = args.has("logo"),
             roofline = args.has("roofline"), rows = args.has("rows");
  learned::TrainOptions training;
  training.verbose = false;
  if (args.has("fast")) {
    training.epochs = 3;
    training.maxRowsPerFile = 300;
    training.maxRowsPerElementwiseFile = 100;
  }
  training.epochs = int(args.positiveInt("epochs").value_or(training.epochs));
  training.maxRowsPerFile = args.integerAtLeast("max-rows", 0).value_or(training.maxRowsPerFile);
  if (const auto seed = args.integerAtLeast("seed", 0))
    training.seed = uint64_t(*seed);
  training.ensembleSize = int(args.positiveInt("ensemble").value_or(training.ensembleSize));
  const std::string calibration = args.value("calibration").value_or("");
  if (!kernels && !logo && labelDir.empty() && calibration.empty())
    throw UsageError("give LABEL_DIR, --kernels, --logo or --calibration; run 'wavecast eval "
                     "--help' for usage");

  try {
    if (!calibration.empty())
      return evalCalibration(
          calibration, gpuDatabase,
          modelsAlone(weights, args.value("gemm-model").value_or("data/tensor_core_gemm.json"),
                      roofline),
          json, rows, markdown);
    const GpuDatabase database = GpuDatabase::fromFile(gpuDatabase);
    const auto gpus = learned::loadSpecSheets(data, database);
    eval::MeasuredGpus measured;
    for (const auto& [stem, features] : gpus)
      measured.emplace_back(stem, database.find(stem));
    const std::vector<std::string> selected =
        eval::resolveMeasuredGpus(splitLists(gpuNames), measured, database);

    if (logo) {
      eval::LogoOptions options;
      options.labelsDir = labelDir.empty() ? data + "/labels" : labelDir;
      options.workDir = work;
      options.training = training;
      options.training.dataDir = data;
      options.training.gpuDatabase = gpuDatabase;
      options.onlyGpus = selected;
      const eval::LogoReport report = eval::runLeaveOneGpuOut(options);
      const std::string text = eval::logoMarkdown(report, options.training);
      if (!markdown.empty() && !writeFile(markdown, text))
        throw std::runtime_error("cannot write " + markdown);
      if (json)
        std::cout << eval::toJson(report.labels).dump(1) << "\n";
      else
        std::cout << text;
      return 0;
    }

    const learned::LearnedModels models = learned::LearnedModels::open(weights);
    if (kernels) {
      eval::KernelEvalOptions options;
      options.dataDir = data;
      options.gpuDatabase = gpuDatabase;
      options.targetGpus = selected.empty() ? models.trainingGpus() : selected;
      options.originGpus = eval::resolveMeasuredGpus(splitLists(originNames), measured, database);
      const eval::KernelEvalReport report = eval::evaluateKernels(models, options);
      if (report.families.empty())
        throw std::runtime_error("no kernel measurements of these GPUs under " + data +
                                 "/kernels: its <op>/<GPU>.csv files name the GPUs measured");
      std::cout << (json ? eval::toJson(report).dump(1) + "\n" : eval::toText(report));
      return 0;
    }

    const eval::LabelListing listing = eval::listLabels(labelDir, selected);
    if (listing.runs.empty())
      throw std::runtime_error("no <model>-<mode>-<seq>-<batch>.csv labels under " + labelDir);
    const eval::RooflineTimer rooflineTimer;
    const eval::LearnedTimer learnedTimer(models);
    const eval::KernelTimer& model =
        roofline ? static_cast<const eval::KernelTimer&>(rooflineTimer) : learnedTimer;
    eval::EvalReport report = eval::evaluateLabels(listing, gpus, model, rooflineTimer);
    for (const eval::GpuResult& g : report.gpus)
      if (const DeviceSpec* spec = database.find(g.gpu))
        report.databaseIds[g.gpu] = spec->id;
    if (!markdown.empty() && !writeFile(markdown, eval::toMarkdown(report)))
      throw std::runtime_error("cannot write " + markdown);
    if (rows && !json)
      for (const eval::LabelResult& l : report.labels) {
        std::cout << l.gpu << "/" << l.label << "\n";
        for (const eval::RowDetail& d : l.details)
          std::printf("  %-44s %-24s x%-3.0f %10.4f %10.4f %+7.1f%%  %s\n", d.row.c_str(),
                      d.op.c_str(), d.repeat, d.measuredMs, d.predictedMs,
                      d.measuredMs > 0 ? 100.0 * (d.predictedMs - d.measuredMs) / d.measuredMs
                                       : 0.0,
                      d.kernels.c_str());
      }
    std::cout << (json ? eval::toJson(report).dump(1) + "\n" : eval::toText(report));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "wavecast eval: " << e.what() << "\n";
    return 1;
  }
}

} // namespace wavecast::cli
