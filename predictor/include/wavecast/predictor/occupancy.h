// CUDA's occupancy rules (the CUDA Occupancy Calculator / cuda_occupancy.h): how
// many thread blocks of a kernel fit on one SM at once.
#pragma once

#include "wavecast/predictor/cost_family.h"
#include "wavecast/predictor/device_spec.h"

#include <optional>
#include <string>

namespace wavecast {

struct KernelResources {
  int threadsPerBlock = 0;
  int registersPerThread = 0;
  int sharedMemoryPerBlockBytes = 0; // static + dynamic
};

struct Occupancy {
  int blocksPerSm = 0; // 0 only when the kernel cannot launch on this GPU
  int activeWarpsPerSm = 0;
  double occupancy = 0;                 // active warps / max warps per SM
  int sharedMemoryCarveoutBytes = 0;    // smallest carveout giving blocksPerSm
  std::string limiter;                  // "warps", "registers", "shared memory", "blocks"
  std::optional<LaunchProblem> problem; // why the kernel cannot launch, when blocksPerSm == 0

  bool launchable() const { return blocksPerSm > 0; }
};

// Blocks per SM with the largest shared-memory carveout (the driver picks the carveout
// per kernel; the smallest one that keeps this occupancy is reported).
Occupancy computeOccupancy(const SmLimits& limits, const KernelResources& kernel);

} // namespace wavecast
