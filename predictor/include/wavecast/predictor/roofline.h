// Dtype-aware roofline for one op on one GPU: max(compute, memory) time with wave
// quantisation and a kernel-launch floor (docs/predictor.md).
#pragma once

#include "wavecast/predictor/device_spec.h"
#include "wavecast/predictor/op_cost.h"

#include <string>

namespace wavecast {

struct RooflineOptions {
  bool allowTf32 = false; // float32 matmuls/convs on TF32 tensor cores
  // Fractions of the spec-sheet peaks real kernels reach (typical of public
  // micro-benchmarks: STREAM-like copies, cuBLAS SGEMM/HGEMM); not fitted to any data.
  double memoryEfficiency = 0.85;
  double vectorEfficiency = 0.85;
  double matrixEfficiency = 0.75;
  // Smallest GPU time of one kernel launch as CUDA events see it.
  double launchFloorUs = 4.0;
};

// Peak TFLOP/s that runs this kind of work in this dtype (falls back to FP32 when the
// GPU has no unit for the dtype).
double peakTflops(const DeviceSpec& gpu, ComputeUnit unit, const std::string& dtype,
                  bool allowTf32);

struct RooflineTime {
  double computeMs = 0;
  double memoryMs = 0;
  double waveEfficiency = 1; // fraction of the GPU the op's blocks keep busy
  double timeMs = 0;         // max(compute, memory), at least the launch floor
};

RooflineTime rooflineTime(const OpCost& cost, const DeviceSpec& gpu,
                          const RooflineOptions& options);

} // namespace wavecast
