#include "wavecast/learned/kernel_dataset.h"

#include "wavecast/learned/csv_table.h"
#include "wavecast/learned/learned_op_time_model.h"
#include "wavecast/predictor/calibration.h"
#include "wavecast/predictor/gpu_database.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <stdexcept>

namespace fs = std::filesystem;

namespace wavecast::learned {
namespace {

// kernels/ folders holding each family's measurements.
std::vector<std::string> folderNames(KernelFamily family) {
  switch (family) {
  case KernelFamily::Linear:
    return {"linear"};
  case KernelFamily::Bmm:
    return {"bmm"};
  case KernelFamily::Conv2d:
    return {"conv"};
  case KernelFamily::LayerNorm:
    return {"ln"};
  case KernelFamily::Softmax:
    return {"softmax"};
  case KernelFamily::Elementwise: {
    std::vector<std::string> names;
    for (int i = 0; i < kElementwiseOpCount; ++i)
      names.emplace_back(folderName(ElementwiseOp(i)));
    return names;
  }
  }
  return {};
}

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

KernelShape shapeOfRow(const std::string& folder, const CsvTable& table,
                       const std::vector<std::string>& row) {
  auto get = [&](const char* column) { return std::stoll(row[table.requireColumn(column)]); };
  if (folder == "linear")
    return KernelShape::linear(get("M"), get("N"), get("K"));
  if (folder == "bmm")
    return KernelShape::bmm(get("B"), get("M"), get("N"), get("K"));
  if (folder == "conv")
    return KernelShape::conv2d(get("B"), get("Input_Channel"), get("Output_Channel"),
                               get("Kernel_Szie"), get("Input_Size"), get("Stride"),
                               get("Padding"));
  if (folder == "ln")
    return KernelShape::layerNorm(get("B"), get("H"));
  if (folder == "softmax")
    return KernelShape::softmax(get("B"), get("H"));
  return KernelShape::elementwise(*elementwiseOpFromFolder(folder), get("B"), get("H"));
}

// DATA/device_configs, or an error naming the folder that is not there.
fs::path deviceConfigsDir(const std::string& dataDir) {
  const fs::path dir = fs::path(dataDir) / "device_configs";
  if (!fs::is_directory(dir))
    throw std::runtime_error(dir.string() +
                             " not found: pass the NeuSight data folder (--data DIR)");
  return dir;
}

} // namespace

std::map<std::string, GpuFeatures> loadSpecSheets(const std::string& dataDir,
                                                  const std::string& gpuDatabase) {
  deviceConfigsDir(dataDir); // a missing data folder is named before the database
  if (gpuDatabase.empty())
    throw std::invalid_argument("no GPU database given: pass data/gpus.json (--gpus FILE)");
  return loadSpecSheets(dataDir, GpuDatabase::fromFile(gpuDatabase));
}

std::map<std::string, GpuFeatures> loadSpecSheets(const std::string& dataDir,
                                                  const GpuDatabase& database) {
  const fs::path dir = deviceConfigsDir(dataDir);
  std::map<std::string, GpuFeatures> gpus;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".json")
      if (const DeviceSpec* spec = database.find(entry.path().stem().string()))
        gpus[entry.path().stem().string()] = GpuFeatures::fromDeviceSpec(*spec);
  return gpus;
}

KernelDataset loadKernelDataset(const std::string& dataDir, const KernelDatasetOptions& options) {
  KernelDataset data;
  data.gpus = loadSpecSheets(dataDir, options.gpuDatabase);
  std::mt19937_64 rng(options.seed);
  for (KernelFamily family : options.families) {
    for (const std::string& folder : folderNames(family)) {
      const fs::path dir = fs::path(dataDir) / "kernels" / folder;
      if (!fs::is_directory(dir))
        throw std::runtime_error(dir.string() + " not found: is " + dataDir +
                                 " the NeuSight data folder?");
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().extension() == ".csv")
          files.push_back(entry.path());
      std::sort(files.begin(), files.end()); // directory order is not deterministic
      for (const fs::path& file : files) {
        const std::string gpu = file.stem().string();
        if (contains(options.excludeGpus, gpu) ||
            (!options.onlyGpus.empty() && !contains(options.onlyGpus, gpu)))
          continue;
        if (!data.gpus.count(gpu))
          throw std::runtime_error(file.string() + ": GPU '" + gpu + "' is not in " +
                                   options.gpuDatabase + "; add it (docs/gpus.md)");
        const CsvTable table = CsvTable::readFile(file.string());
        const size_t latency = table.requireColumn("Latency");
        std::vector<size_t> order(table.rows().size());
        for (size_t i = 0; i < order.size(); ++i)
          order[i] = i;
        const int64_t cap = family == KernelFamily::Elementwise ? options.maxRowsPerElementwiseFile
                                                                : options.maxRowsPerFile;
        if (cap > 0 && int64_t(order.size()) > cap) {
          std::shuffle(order.begin(), order.end(), rng);
          order.resize(size_t(cap));
          std::sort(order.begin(), order.end());
        }
        for (size_t index : order) {
          const auto& row = table.rows()[index];
          KernelSample sample{shapeOfRow(folder, table, row), gpu, std::stod(row[latency])};
          if (sample.shape.valid() && sample.latencyMs > 0)
            data.samples.push_back(std::move(sample));
        }
      }
    }
  }
  return data;
}

CalibrationSamples addCalibrationSamples(KernelDataset& data, const std::string& path,
                                         const GpuDatabase& database,
                                         const std::vector<KernelFamily>& families) {
  Calibration calibration;
  try {
    calibration = loadCalibration(path);
  } catch (const CalibrationError& e) {
    throw std::runtime_error(e.what());
  }
  const DeviceSpec* gpu = database.find(calibration.gpuName);
  if (!gpu)
    throw std::runtime_error(path + ": the GPU it measured, '" + calibration.gpuName +
                             "', is not in the GPU database; add it (docs/gpus.md) to train "
                             "on this file");
  CalibrationSamples added;
  added.gpu = gpu->id;
  for (const CalibrationEntry& entry : calibration.entries) {
    const std::optional<KernelShape> shape = entry.tf32 ? std::nullopt : kernelShapeOf(entry.op);
    if (!shape || std::find(families.begin(), families.end(), shape->family) == families.end() ||
        !(entry.medianMs > 0)) {
      ++added.skipped;
      continue;
    }
    data.samples.push_back({*shape, gpu->id, entry.medianMs});
    ++added.samples;
  }
  if (added.samples > 0)
    data.gpus[gpu->id] = GpuFeatures::fromDeviceSpec(*gpu);
  return added;
}

} // namespace wavecast::learned
