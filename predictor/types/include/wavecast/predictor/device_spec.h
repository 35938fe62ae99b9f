// What the predictor knows of one GPU: its spec sheet, per-SM limits and price.
#pragma once

#include "wavecast/predictor/cost_family.h"

#include <cstdint>
#include <string>
#include <vector>

namespace wavecast {

// Who makes the GPU: which occupancy rules and which spec fields apply (AMD has no
// CUDA compute capability; its wavefronts are 64 wide).
enum class GpuVendor { Nvidia, Amd };

// "nvidia", "amd", as GPU files name them (docs/gpus.md).
constexpr const char* toString(GpuVendor vendor) {
  return vendor == GpuVendor::Amd ? "amd" : "nvidia";
}

// Per-SM resource limits used by the occupancy calculator (CUDA occupancy rules).
struct SmLimits {
  int warpSize = 32; // 64 on AMD CDNA (wavefronts)
  int maxThreadsPerSm = 2048;
  int maxWarpsPerSm = 64;
  int maxBlocksPerSm = 32;
  int maxThreadsPerBlock = 1024;
  int registersPerSm = 65536;
  int maxRegistersPerThread = 255;
  int registerAllocationUnit = 256;         // registers, per warp
  int warpAllocationGranularity = 4;        // warps are register-allocated per SM sub-partition
  int sharedMemoryPerSmBytes = 65536;       // configurable maximum
  int maxSharedMemoryPerBlockBytes = 49152; // opt-in maximum
  int reservedSharedMemoryPerBlockBytes = 0;
  int sharedMemoryAllocationUnitBytes = 256;
  std::vector<int> sharedMemoryCarveoutsBytes; // allowed L1/shared splits, ascending
  std::string source;
};

// The link copies between the host's memory and the GPU cross (docs/gpus.md, `host_links`).
struct HostLink {
  std::string id;   // "pcie5"
  std::string name; // "PCIe 5.0 x16"
  // Measured rates of copies between page-locked host memory and the GPU, 10^9 B/s.
  double hostToDeviceGBs = 0;
  double deviceToHostGBs = 0;
  std::string source;

  double gbs(TransferDirection direction) const {
    return direction == TransferDirection::ToDevice ? hostToDeviceGBs : deviceToHostGBs;
  }
};

struct DeviceSpec {
  std::string id;                   // canonical short name: "H100-SXM"
  std::string name;                 // marketing name: "NVIDIA H100 80GB HBM3"
  std::vector<std::string> aliases; // other names users and drivers use
  GpuVendor vendor = GpuVendor::Nvidia;
  std::string architecture; // "Ampere (GA100)"
  int computeCapabilityMajor = 0;
  int computeCapabilityMinor = 0;
  int smCount = 0;
  double boostClockMHz = 0;
  double memoryGiB = 0;
  double memoryBandwidthGBs = 0;
  double l2CacheMiB = 0;
  // Dense peaks in TFLOP/s; 0 when the GPU has no such unit.
  double fp32Tflops = 0;
  double tf32Tflops = 0;
  double fp16Tflops = 0; // tensor cores where present
  double bf16Tflops = 0;
  double fp32MatrixTflops = 0; // FP32 on matrix units (AMD CDNA); 0: none, CUDA cores only
  SmLimits limits;
  HostLink hostLink;
  double pricePerHourUsd = 0; // user-editable rental price
  std::string priceSource;
  std::string source; // where the figures come from

  // "8.0", as CUDA and GPU files write it.
  std::string computeCapability() const {
    return std::to_string(computeCapabilityMajor) + "." + std::to_string(computeCapabilityMinor);
  }
  int64_t memoryBytes() const { return static_cast<int64_t>(memoryGiB * 1024.0 * 1024.0 * 1024.0); }
};

} // namespace wavecast
