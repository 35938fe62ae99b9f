// Habitat's wave scaling (Yu et al., USENIX ATC'21, Eq. 1 and 3): scales a kernel
// measured on an origin GPU to a destination GPU (docs/predictor.md).
#pragma once

#include "wavecast/predictor/cost_family.h"
#include "wavecast/predictor/device_spec.h"
#include "wavecast/trace.h"

#include <optional>
#include <string>

namespace wavecast {

// Eq. 3: memory-boundedness of a kernel of arithmetic intensity `intensity` (FLOP/byte)
// on a GPU whose ridge point is `ridgePoint` (peak FLOP/s / bandwidth). Returns 1 (fully
// memory bound, the paper's choice without metrics) when the intensity is unknown (< 0).
double waveScalingGamma(double intensity, double ridgePoint);

// A recorded kernel whose launch `gpu`'s limits reject: one block per SM is assumed.
struct UnlaunchableKernel {
  std::string gpu;
  LaunchProblem problem;
};

struct WaveScaledKernel {
  double timeMs = 0;
  double originWaveSize = 0;      // W_o: blocks per SM x SMs
  double destinationWaveSize = 0; // W_d
  double gamma = 1;
  std::optional<UnlaunchableKernel> problem;
};

// Eq. 1 with ceil(B / W): T_d = ceil(B/W_d) (D_o/D_d * W'_d/W'_o)^g (C_o/C_d)^(1-g)
// / ceil(B/W_o) * T_o, where W'_i = min(B, W_i) is the wave actually in flight.
// Copies and fills (no grid) scale with the DRAM bandwidth; host copies do not scale.
WaveScaledKernel waveScaleKernel(const KernelRecord& kernel, const DeviceSpec& origin,
                                 const DeviceSpec& destination, double gamma);

} // namespace wavecast
