#include "wavecast/predictor/occupancy.h"

#include <algorithm>
#include <climits>

namespace wavecast {
namespace {

int divideRoundUp(int a, int b) {
  return (a + b - 1) / b;
}
int roundUp(int a, int b) {
  return divideRoundUp(a, b) * b;
}

// Blocks that fit in `sharedPerSm` bytes of shared memory.
int sharedMemoryBlockLimit(int allocatedPerBlock, int sharedPerSm) {
  return allocatedPerBlock > 0 ? sharedPerSm / allocatedPerBlock : INT_MAX;
}

} // namespace

Occupancy computeOccupancy(const SmLimits& limits, const KernelResources& kernel) {
  Occupancy result;
  if (kernel.threadsPerBlock <= 0) {
    result.problem = LaunchProblem{LaunchLimit::NoThreads, kernel.threadsPerBlock, 1};
    return result;
  }
  if (kernel.threadsPerBlock > limits.maxThreadsPerBlock) {
    result.problem = LaunchProblem{LaunchLimit::ThreadsPerBlock, kernel.threadsPerBlock,
                                   limits.maxThreadsPerBlock};
    return result;
  }
  if (kernel.registersPerThread > limits.maxRegistersPerThread) {
    result.problem = LaunchProblem{LaunchLimit::RegistersPerThread, kernel.registersPerThread,
                                   limits.maxRegistersPerThread};
    return result;
  }
  // Shared memory: every block also holds the system-reserved bytes (CC >= 8.0), and
  // allocations are rounded up to the allocation unit.
  const int requestedShared = std::max(0, kernel.sharedMemoryPerBlockBytes);
  if (requestedShared > limits.maxSharedMemoryPerBlockBytes) {
    result.problem = LaunchProblem{LaunchLimit::SharedMemoryPerBlock, requestedShared,
                                   limits.maxSharedMemoryPerBlockBytes};
    return result;
  }
  const int sharedPerBlock = roundUp(requestedShared + limits.reservedSharedMemoryPerBlockBytes,
                                     limits.sharedMemoryAllocationUnitBytes);

  // Warps: a block occupies whole warps.
  const int warpsPerBlock = divideRoundUp(kernel.threadsPerBlock, limits.warpSize);
  const int byWarps = limits.maxWarpsPerSm / warpsPerBlock;

  // Registers: allocated per warp in units, and warps are placed on the SM's
  // sub-partitions (warp allocation granularity), each with its share of the file.
  int byRegisters = INT_MAX;
  if (kernel.registersPerThread > 0) {
    const int registersPerWarp =
        roundUp(kernel.registersPerThread * limits.warpSize, limits.registerAllocationUnit);
    const int registersPerPartition = limits.registersPerSm / limits.warpAllocationGranularity;
    const int warpsPerPartition = registersPerPartition / registersPerWarp;
    byRegisters = warpsPerPartition * limits.warpAllocationGranularity / warpsPerBlock;
  }

  const int maxShared =
      limits.sharedMemoryCarveoutsBytes.empty()
          ? limits.sharedMemoryPerSmBytes
          : std::min(limits.sharedMemoryPerSmBytes, limits.sharedMemoryCarveoutsBytes.back());
  const int byShared = sharedMemoryBlockLimit(sharedPerBlock, maxShared);

  result.blocksPerSm = std::min({limits.maxBlocksPerSm, byWarps, byRegisters, byShared});
  if (result.blocksPerSm == limits.maxBlocksPerSm)
    result.limiter = "blocks";
  if (result.blocksPerSm == byShared)
    result.limiter = "shared memory";
  if (result.blocksPerSm == byRegisters)
    result.limiter = "registers";
  if (result.blocksPerSm == byWarps)
    result.limiter = "warps";
  if (result.blocksPerSm <= 0) {
    result.blocksPerSm = 0;
    result.problem =
        LaunchProblem{LaunchLimit::RegistersPerSm,
                      kernel.registersPerThread * kernel.threadsPerBlock, limits.registersPerSm};
    return result;
  }
  result.activeWarpsPerSm = result.blocksPerSm * warpsPerBlock;
  result.occupancy = static_cast<double>(result.activeWarpsPerSm) / limits.maxWarpsPerSm;

  result.sharedMemoryCarveoutBytes = maxShared;
  for (const int carveout : limits.sharedMemoryCarveoutsBytes) {
    if (sharedMemoryBlockLimit(sharedPerBlock, carveout) >= result.blocksPerSm) {
      result.sharedMemoryCarveoutBytes = carveout;
      break;
    }
  }
  return result;
}

} // namespace wavecast
