// Fits the per-family models on NeuSight's kernel measurements (`wavecast train`).
#pragma once

#include "wavecast/learned/kernel_dataset.h"
#include "wavecast/learned/kernel_shape.h"

#include <cstdint>
#include <string>
#include <vector>

namespace wavecast::learned {

struct TrainOptions {
  std::string dataDir;     // the NeuSight folder (kernels/, device_configs/)
  std::string outDir;      // receives manifest.json and <family>.<member>.json
  std::string gpuDatabase; // spec sheets (KernelDatasetOptions::gpuDatabase)
  uint64_t seed = 20250;
  int epochs = 25;
  int hiddenWidth = 128;
  // Networks per family, each from its own seed; their log outputs are averaged,
  // which damps the seed-to-seed spread of the extrapolation to unseen GPUs.
  int ensembleSize = 1;
  int batchSize = 512;
  double learningRate = 2e-3;
  int threads = 1; // small MLPs: a second thread costs more in sync than it gains
  // Per (op, GPU) file cap, a seeded subsample; 0 = every row.
  int64_t maxRowsPerFile = 2500;
  // The same for each of the eleven elementwise files (they are alike; fewer rows
  // keep the run short).
  int64_t maxRowsPerElementwiseFile = 300;
  std::vector<KernelFamily> families = allKernelFamilies();
  std::vector<std::string> excludeGpus; // leave-one-GPU-out
  // Files written by `wavecast calibrate`: their FP32 entries train beside NeuSight's rows
  // (addCalibrationSamples).
  std::vector<std::string> calibrationFiles;
  bool verbose = false;
};

struct FamilyTrainReport {
  KernelFamily family = KernelFamily::Linear;
  int64_t samples = 0;
  double firstEpochLoss = 0;      // mean squared error of log(time / bound)
  double finalLoss = 0;           // mean over the family's networks
  double trainMapePercent = 0;    // the same, of each network on its training rows
  double rooflineMapePercent = 0; // of the bare roofline bound on the same rows
  double seconds = 0;             // all networks
};

struct TrainReport {
  std::vector<FamilyTrainReport> families;
  std::vector<std::string> trainingGpus;
  std::vector<CalibrationSamples> calibrations; // per calibration file, in order
  double seconds = 0;
};

// Deterministic for a given seed and thread count. Throws std::runtime_error on
// missing data or an unwritable output folder.
TrainReport trainLearnedModels(const TrainOptions& options);

} // namespace wavecast::learned
