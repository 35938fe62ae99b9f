#include "cli/shared.h"

#include "cli/commands.h"
#include "cli/terminal.h"
#include "presentation.h"
#include "script_device.h"
#include "wavecast/learned/learned_op_time_model.h"
#include "wavecast/profiler/profiler.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

namespace wavecast::cli {
namespace fs = std::filesystem;

OptionSpec worldSizeOption() {
  return {"world-size", "N",
          "ranks of a torch.distributed script's launch; it is traced as rank 0 of them "
          "(default 8)"};
}

OptionSpec compileOption() {
  return {"compile", "MODE",
          "predict the script as if the modules its iteration calls were passed through "
          "torch.compile(mode=MODE): " +
              compileModeChoices() + " (a script that compiles is predicted compiled anyway)"};
}

OptionSpec pythonEnvOption() {
  return {"python-env", "DIR",
          "a virtualenv whose torch the worker uses; 'system': the system python3's "
          "packages (default: $WAVECAST_PYTHON_ENV, else the venv wavecast was built with if "
          "it exists, else system)"};
}

OptionSpec verboseOption() {
  return {"verbose", "",
          "show torch's own log messages, and the Python traceback of a script that fails"};
}

GpuDatabase loadGpuDatabase(const InstallLayout& layout, const CommandLine& args) {
  if (!fs::exists(layout.gpuDatabasePath()))
    throw CommandError("wavecast's GPU database " + layout.gpuDatabasePath() + " is missing; " +
                       layout.repairAdvice() + " or set WAVECAST_DATA_DIR");
  try {
    auto database = GpuDatabase::fromFile(layout.gpuDatabasePath());
    if (const auto userFile = args.value("gpu-file")) {
      if (!fs::exists(*userFile))
        throw CommandError("GPU file '" + *userFile + "' does not exist");
      database.mergeFile(*userFile);
    } else if (!layout.userGpuFile.empty() && fs::exists(layout.userGpuFile)) {
      database.mergeFile(layout.userGpuFile);
    }
    return database;
  } catch (const GpuDatabaseError& e) {
    throw CommandError(e.what());
  }
}

std::vector<OptionSpec> precisionOptions() {
  return {{"tf32", "",
           "run float32 matmuls and convolutions on TF32 tensor cores, whatever the "
           "script sets"},
          {"tf32-matmul", "on|off",
           "override the script's float32 matmul setting (torch default: off)"},
          {"tf32-conv", "on|off",
           "override the script's cuDNN convolution/RNN setting (torch default: on)"}};
}

namespace {

std::optional<bool> onOff(const CommandLine& args, const std::string& name) {
  const auto value = args.value(name);
  if (!value)
    return std::nullopt;
  if (*value == "on")
    return true;
  if (*value == "off")
    return false;
  throw UsageError("--" + name + " wants on or off, not '" + *value + "'");
}

} // namespace

OptionSpec calibrationOption() {
  return {"calibration", "FILE",
          "a calibration file written by 'wavecast calibrate' (repeatable; also read: "
          "data/calibration/ and ~/.config/wavecast/calibration/)"};
}

OptionSpec noCalibrationOption() {
  return {"no-calibration", "",
          "read no calibration file: the models alone, as for a GPU never calibrated"};
}

namespace {

// The .json files of `folder` in name order; none when it does not exist.
std::vector<std::string> jsonFilesIn(const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  if (folder.empty() || !fs::is_directory(folder, ec))
    return files;
  for (const auto& item : fs::directory_iterator(folder, ec))
    if (item.path().extension() == ".json" && item.is_regular_file(ec))
      files.push_back(item.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

std::map<std::string, std::shared_ptr<const CalibrationTable>>
loadCalibrations(const InstallLayout& layout, const CommandLine& args,
                 const GpuDatabase& database) {
  std::vector<std::string> files = args.values("calibration");
  if (args.has("no-calibration")) {
    if (!files.empty())
      throw UsageError("--no-calibration reads no calibration file: drop --calibration " +
                       files.front() + " or --no-calibration");
    return {};
  }
  for (const auto& file : files)
    if (!fs::exists(file))
      throw CommandError("calibration file '" + file + "' does not exist");
  // --roofline is the analytic model alone: the calibrations installed (wavecast's and the
  // user's) are not read, so what it says does not depend on which GPUs were calibrated;
  // files named with --calibration still are.
  if (!args.has("roofline"))
    for (const auto& folder : {layout.userCalibrationDir, layout.calibrationDir()})
      for (auto& file : jsonFilesIn(folder))
        files.push_back(std::move(file));
  std::map<std::string, std::shared_ptr<const CalibrationTable>> tables;
  for (const auto& file : files) {
    Calibration calibration;
    try {
      calibration = loadCalibration(file);
    } catch (const CalibrationError& e) {
      throw CommandError(e.what());
    }
    const DeviceSpec* gpu = database.find(calibration.gpuName);
    if (!gpu) {
      std::cerr << "wavecast: note: " << calibrationUnknownGpuNote(file, calibration.gpuName)
                << "\n";
      continue;
    }
    if (!tables.count(gpu->id))
      tables.emplace(gpu->id, std::make_shared<const CalibrationTable>(std::move(calibration)));
  }
  return tables;
}

PredictorOptions predictorOptions(const InstallLayout& layout, const CommandLine& args,
                                  const GpuDatabase& database) {
  PredictorOptions options;
  options.calibrations = loadCalibrations(layout, args, database);
  if (args.has("tf32"))
    options.matmulTf32 = options.convTf32 = true;
  if (auto matmul = onOff(args, "tf32-matmul"))
    options.matmulTf32 = matmul;
  if (auto conv = onOff(args, "tf32-conv"))
    options.convTf32 = conv;
  // Part of the analytic model, so also under --roofline. A data folder without it
  // (bench/tensor_core_gemm/report.py's baseline) prices those GEMMs by the roofline alone.
  if (fs::exists(layout.tensorCoreGemmPath())) {
    try {
      options.roofline.tensorCoreGemm = TensorCoreGemmModel::fromFile(layout.tensorCoreGemmPath());
    } catch (const TensorCoreGemmModelError& e) {
      throw CommandError(std::string(e.what()) + "; " + layout.repairAdvice());
    }
  }
  // Collectives are priced on the target GPU's node: NCCL's model, the systems and what
  // NCCL sustains on them (docs/collectives.md).
  if (fs::exists(layout.systemDatabasePath())) {
    try {
      auto systems = SystemDatabase::fromFile(layout.systemDatabasePath());
      if (!layout.userSystemFile.empty() && fs::exists(layout.userSystemFile))
        systems.mergeFile(layout.userSystemFile);
      options.systemDatabase = std::make_shared<const SystemDatabase>(std::move(systems));
      options.collectives = CollectiveModel::fromFile(layout.collectivesPath());
    } catch (const SystemDatabaseError& e) {
      throw CommandError(e.what());
    } catch (const CollectiveModelError& e) {
      throw CommandError(std::string(e.what()) + "; " + layout.repairAdvice());
    }
  }
  if (args.has("roofline"))
    return options;
  try {
    options.opTimeModel = learned::LearnedOpTimeModel::open(layout.dataDir + "/weights");
  } catch (const std::exception& e) {
    throw CommandError(std::string(e.what()) +
                       " (or pass --roofline to predict with the analytic model only)");
  }
  return options;
}

namespace {

Trace readSavedTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw CommandError("cannot read '" + path + "'");
  const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    throw CommandError("'" + path +
                       "' is not valid JSON; pass a .py training script or a trace "
                       "written by 'wavecast trace'");
  try {
    return traceFromJson(doc);
  } catch (const TraceFormatError& e) {
    throw CommandError(path + ": " + e.what());
  }
}

} // namespace

ProfilerOptions profilerOptions(const InstallLayout& layout, const CommandLine& args) {
  ProfilerOptions options;
  options.workerPath = layout.workerPath;
  options.pythonPath = layout.pythonDir;
  options.defaultPythonEnv = layout.pythonEnv;
  options.missingPythonEnv = layout.missingPythonEnv;
  options.torchLogs = args.has("verbose") ? TorchLogs::Shown : TorchLogs::Hidden;
  return options;
}

Trace ScriptTracer::trace(const std::string& path, std::optional<int64_t> batchSize,
                          const DeviceSpec* firstTarget) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw CommandError("'" + path +
                       "' is a directory; pass the path of a training script (.py) in it");
  if (!fs::is_regular_file(path, ec))
    throw CommandError("no such file '" + path + "'; pass the path of a training script (.py)");
  if (fs::path(path).extension() == ".json")
    return readSavedTrace(path);
  if (fs::path(path).extension() != ".py")
    throw CommandError("'" + path +
                       "' is not a Python file; pass a training script (.py) that "
                       "defines wavecast_model, wavecast_input and wavecast_iteration");
  if (!fs::exists(layout_.workerPath))
    throw CommandError("the profiler worker '" + layout_.workerPath + "' is missing; " +
                       layout_.repairAdvice() + " or set WAVECAST_WORKER");

  if (!profiler_) {
    ProfilerOptions options = profilerOptions(layout_, args_);
    options.pythonEnv = args_.value("python-env").value_or("");
    options.progress = [this](const std::string& status) { progress_.update(status); };
    profiler_ = std::make_unique<Profiler>(std::move(options));
  }

  TraceRequest request;
  request.file = fs::absolute(path).lexically_normal().string();
  request.batchSize = batchSize;
  const std::string mode = args_.value("mode").value_or("shape");
  const auto parsed = traceModeFromString(mode);
  if (!parsed)
    throw UsageError("--mode must be shape, cpu or cuda, not '" + mode + "'");
  request.mode = *parsed;
  if (const auto seconds = args_.positiveInt("timeout"))
    request.timeout = std::chrono::seconds(*seconds);
  request.scriptArgs = args_.rest();
  request.workingDirectory = fs::current_path().string(); // as `python FILE` run from here
  if (const auto ranks = args_.positiveInt("world-size"))
    request.worldSize = static_cast<int>(*ranks);
  if (const auto compile = args_.value("compile")) {
    request.compile = compileModeFromString(*compile);
    if (!request.compile)
      throw UsageError("--compile must be " + compileModeChoices() + ", not '" + *compile + "'");
  }
  if (firstTarget)
    request.device = scriptDevice(*firstTarget);

  auto result = profiler_->trace(request);
  progress_.clear();
  if (auto* error = std::get_if<ProfileError>(&result)) {
    if (args_.has("verbose"))
      for (const std::string* text : {&error->output, &error->traceback})
        if (!text->empty())
          std::cerr << *text << (text->back() == '\n' ? "" : "\n");
    throw CommandError(errorLine(*error));
  }
  return std::get<Trace>(std::move(result));
}

Trace obtainTrace(const InstallLayout& layout, const std::string& path,
                  std::optional<int64_t> batchSize, const CommandLine& args,
                  const DeviceSpec* firstTarget) {
  return ScriptTracer(layout, args).trace(path, batchSize, firstTarget);
}

} // namespace wavecast::cli
