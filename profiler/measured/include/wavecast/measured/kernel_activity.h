// GPU activity measured with CUPTI's Activity API and its matching to the traced
// ops that launched it. Pure C++: no CUDA needed to build or test.
#pragma once

#include "wavecast/trace.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wavecast::measured {

// Kernels run on the SMs; copies and fills (cudaMemcpyAsync, cudaMemsetAsync) have no
// grid but take GPU time all the same (torch.profiler counts them too).
using ActivityKind = GpuActivityKind;

// One execution as CUPTI reports it (times in CUPTI's nanosecond clock).
struct KernelActivity {
  ActivityKind kind = ActivityKind::Kernel;
  std::string name;               // kernels: the function; copies: "Memcpy DtoD" etc.
  std::array<int64_t, 3> grid{};  // x, y, z (zero for copies and fills)
  std::array<int64_t, 3> block{}; // x, y, z
  int registersPerThread = 0;
  int64_t staticSharedBytes = 0;
  int64_t dynamicSharedBytes = 0;
  int64_t bytes = 0; // copies and fills
  uint64_t startNs = 0;
  uint64_t endNs = 0;
  uint32_t correlationId = 0; // links it to the runtime/driver API call that launched it
  uint32_t deviceId = 0;
  uint32_t streamId = 0;

  double durationMs() const { return endNs > startNs ? (endNs - startNs) * 1e-6 : 0.0; }
};

// CUPTI's EXTERNAL_CORRELATION record: the id pushed (per op) on the thread that made
// the API call with `correlationId`.
struct ExternalCorrelation {
  uint32_t correlationId = 0;
  uint64_t externalId = 0;
};

// What one CUPTI session collected.
struct ActivityBatch {
  std::vector<KernelActivity> kernels;
  std::vector<ExternalCorrelation> correlations;
  uint64_t droppedRecords = 0; // CUPTI ran out of buffer space
};

struct KernelMatch {
  std::map<uint64_t, std::vector<KernelActivity>> kernelsByOp; // by external id, start order
  std::vector<KernelActivity> unmatched; // launched while no op's id was pushed
};

// Credits every kernel to the external id pushed on the launching thread when its API
// call was made. Only the correlation counts: kernels run asynchronously, so when they
// start says nothing about which op launched them (and autograd launches backward
// kernels from its own thread).
KernelMatch matchKernelsToOps(const ActivityBatch& batch);

} // namespace wavecast::measured
