#include "wavecast/predictor/wave_scaling.h"

#include "wavecast/predictor/occupancy.h"

#include <algorithm>
#include <cmath>

namespace wavecast {
namespace {

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (const auto d : dims)
    p *= std::max<int64_t>(1, d);
  return dims.empty() ? 0 : p;
}

// Blocks of `kernel` in flight on the whole GPU; one per SM when the destination's
// limits reject the kernel (it would be recompiled for that GPU).
double waveSize(const KernelRecord& kernel, const DeviceSpec& gpu,
                std::optional<UnlaunchableKernel>& problem) {
  KernelResources resources;
  resources.threadsPerBlock = static_cast<int>(product(kernel.block));
  resources.registersPerThread = kernel.registersPerThread;
  resources.sharedMemoryPerBlockBytes =
      static_cast<int>(kernel.staticSharedBytes + kernel.dynamicSharedBytes);
  const Occupancy occupancy = computeOccupancy(gpu.limits, resources);
  if (!occupancy.launchable()) {
    problem = UnlaunchableKernel{gpu.id, occupancy.problem.value_or(LaunchProblem{})};
    return std::max(1, gpu.smCount);
  }
  return static_cast<double>(occupancy.blocksPerSm) * std::max(1, gpu.smCount);
}

} // namespace

double waveScalingGamma(double intensity, double ridgePoint) {
  if (intensity < 0 || ridgePoint <= 0)
    return 1.0;
  if (intensity < ridgePoint)
    return -0.5 / ridgePoint * intensity + 1.0;
  return 0.5 * ridgePoint / intensity;
}

WaveScaledKernel waveScaleKernel(const KernelRecord& kernel, const DeviceSpec& origin,
                                 const DeviceSpec& destination, double gamma) {
  WaveScaledKernel result;
  if (kernel.kind != GpuActivityKind::Kernel) {
    // No grid: a copy or fill streams through DRAM (γ = 1), except a copy to or from the
    // host, which the PCIe/NVLink link bounds and the spec sheets do not describe.
    const bool hostLink = kernel.name.find("HtoD") != std::string::npos ||
                          kernel.name.find("DtoH") != std::string::npos;
    result.timeMs =
        hostLink ? kernel.durationMs
                 : kernel.durationMs * origin.memoryBandwidthGBs / destination.memoryBandwidthGBs;
    return result;
  }
  result.gamma = std::clamp(gamma, 0.0, 1.0);
  const double blocks = static_cast<double>(std::max<int64_t>(1, product(kernel.grid)));
  result.originWaveSize = waveSize(kernel, origin, result.problem);
  result.destinationWaveSize = waveSize(kernel, destination, result.problem);
  const double wavesOrigin = std::ceil(blocks / result.originWaveSize);
  const double wavesDestination = std::ceil(blocks / result.destinationWaveSize);
  const double inFlightOrigin = std::min(blocks, result.originWaveSize);
  const double inFlightDestination = std::min(blocks, result.destinationWaveSize);
  const double bandwidthRatio = origin.memoryBandwidthGBs / destination.memoryBandwidthGBs;
  const double clockRatio = origin.boostClockMHz / destination.boostClockMHz;
  result.timeMs = wavesDestination *
                  std::pow(bandwidthRatio * inFlightDestination / inFlightOrigin, result.gamma) *
                  std::pow(clockRatio, 1.0 - result.gamma) / wavesOrigin * kernel.durationMs;
  return result;
}

} // namespace wavecast
