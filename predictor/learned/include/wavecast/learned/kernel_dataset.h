// NeuSight's single-kernel measurements (kernels/<op>/<GPU>.csv) as training
// and evaluation samples, with each GPU's spec sheet from the GPU database.
#pragma once

#include "wavecast/learned/kernel_shape.h"
#include "wavecast/predictor/gpu_database.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wavecast::learned {

struct KernelSample {
  KernelShape shape;
  std::string gpu; // device_configs file stem, e.g. "Tesla_T4"
  double latencyMs = 0;
};

struct KernelDatasetOptions {
  std::vector<KernelFamily> families = allKernelFamilies();
  std::vector<std::string> excludeGpus; // file stems left out (leave-one-GPU-out)
  std::vector<std::string> onlyGpus;    // when non-empty, only these stems
  // At most this many rows per (op, GPU) file, a seeded uniform subsample; 0 = all.
  int64_t maxRowsPerFile = 0;
  int64_t maxRowsPerElementwiseFile = 0; // the same for the elementwise files
  uint64_t seed = 1;
  // wavecast's GPU database (data/gpus.json): every GPU's spec sheet comes from
  // there, so training sees the specs predicting will use.
  std::string gpuDatabase;
};

struct KernelDataset {
  std::vector<KernelSample> samples;
  std::map<std::string, GpuFeatures> gpus; // every device_configs stem the database knows
};

// Throws std::runtime_error naming the folder or file when the data is missing
// or malformed.
KernelDataset loadKernelDataset(const std::string& dataDir, const KernelDatasetOptions& options);
// Spec sheets per device_configs stem (NeuSight's GPU folder names), from the GPU
// database at `gpuDatabase`: the specs predicting uses. NeuSight's own configs are
// not used: their Tesla P4, for one, counts 40 SMs of 64 lanes where the chip has
// 20 of 128. Stems the database does not know are left out.
std::map<std::string, GpuFeatures> loadSpecSheets(const std::string& dataDir,
                                                  const std::string& gpuDatabase);
std::map<std::string, GpuFeatures> loadSpecSheets(const std::string& dataDir,
                                                  const GpuDatabase& database);

// What a calibration file added to a dataset.
struct CalibrationSamples {
  std::string gpu;     // the database id of the GPU it measured
  int64_t samples = 0; // its entries the families took
  int64_t skipped = 0; // entries no FP32 model covers (TF32, 16-bit, other ops)
};

// Adds the measured ops of a calibration file (`wavecast calibrate`) that the learned
// models cover, in `families`, as samples of the GPU it names, with that GPU's spec
// sheet from `database`. The models are FP32's: TF32 and 16-bit entries are left out.
// Each entry was timed as NeuSight's rows were (CUDA events around one call). Throws
// std::runtime_error naming the file when it is unreadable or its GPU is unknown.
CalibrationSamples addCalibrationSamples(KernelDataset& data, const std::string& path,
                                         const GpuDatabase& database,
                                         const std::vector<KernelFamily>& families);

} // namespace wavecast::learned
