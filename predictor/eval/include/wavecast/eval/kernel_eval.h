// Kernel-level accuracy on NeuSight's single-op measurements, in both modes:
// from specs alone, and scaled from a time measured on an origin GPU
// (Habitat's way: time_B = measured_A x model(B) / model(A)).
#pragma once

#include "wavecast/learned/kernel_shape.h"

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace wavecast::learned {
class LearnedModels;
}

namespace wavecast::eval {

struct KernelErrors {
  int64_t samples = 0;
  double mapePercent = 0;
  double medianPercent = 0;
  double weightedErrorPercent = 0; // sum |pred - meas| / sum meas
};

struct KernelFamilyAccuracy {
  learned::KernelFamily family = learned::KernelFamily::Linear;
  std::string gpu;
  KernelErrors model;    // from specs alone
  KernelErrors roofline; // bare roofline bound
};

struct CrossGpuAccuracy {
  learned::KernelFamily family = learned::KernelFamily::Linear;
  std::string origin;
  std::string target;
  KernelErrors scaledByModel;    // measured_A x model(B) / model(A)
  KernelErrors scaledByRoofline; // measured_A x roofline(B) / roofline(A)
};

struct KernelEvalReport {
  std::vector<KernelFamilyAccuracy> families;
  std::vector<CrossGpuAccuracy> crossGpu;
};

struct KernelEvalOptions {
  std::string dataDir;
  std::string gpuDatabase;             // spec sheets, as learned::KernelDatasetOptions::gpuDatabase
  std::vector<std::string> targetGpus; // device_configs stems evaluated
  std::vector<std::string> originGpus; // for the scaled mode; empty = none
  std::vector<learned::KernelFamily> families = learned::allKernelFamilies();
};

KernelEvalReport evaluateKernels(const learned::LearnedModels& models,
                                 const KernelEvalOptions& options);
KernelErrors kernelErrors(const std::vector<double>& predicted,
                          const std::vector<double>& measured);

nlohmann::json toJson(const KernelEvalReport& report);
std::string toText(const KernelEvalReport& report);

} // namespace wavecast::eval
