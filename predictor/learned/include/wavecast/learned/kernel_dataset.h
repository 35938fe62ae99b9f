// NeuSight's single-kernel measurements (kernels/<op>/<GPU>.csv) and spec
// sheets (device_configs/<GPU>.json), as training and evaluation samples.
#pragma once

#include "wavecast/learned/kernel_shape.h"

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
};

struct KernelDataset {
  std::vector<KernelSample> samples;
  std::map<std::string, GpuFeatures> gpus; // every device_configs stem
};

// Throws std::runtime_error naming the folder or file when the data is missing
// or malformed.
KernelDataset loadKernelDataset(const std::string& dataDir, const KernelDatasetOptions& options);
std::map<std::string, GpuFeatures> loadNeuSightGpus(const std::string& dataDir);

} // namespace wavecast::learned
