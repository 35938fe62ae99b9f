// Kernel activity measured on a GPU (CUPTI's Activity API) and its matching to
// the traced ops that launched it. Pure C++: no CUDA needed to build or test.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wavecast::measured {

// One kernel execution as CUPTI reports it (times in CUPTI's nanosecond clock).
struct KernelActivity {
  std::string name;
  std::array<int64_t, 3> grid{};  // x, y, z
  std::array<int64_t, 3> block{}; // x, y, z
  int registersPerThread = 0;
  int64_t staticSharedBytes = 0;
  int64_t dynamicSharedBytes = 0;
  uint64_t startNs = 0;
  uint64_t endNs = 0;
  uint32_t correlationId = 0; // links the kernel to the runtime/driver API call that launched it
  uint32_t deviceId = 0;
  uint32_t streamId = 0;

  double durationMs() const { return endNs > startNs ? (endNs - startNs) * 1e-6 : 0.0; }
};

// CUPTI's EXTERNAL_CORRELATION record: the id pushed (per op) when the API call
// with `correlationId` was made.
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

// The CPU-side interval (CUPTI clock) during which an op launched its work.
struct OpWindow {
  uint64_t opId = 0;
  uint64_t startNs = 0;
  uint64_t endNs = 0;
};

struct KernelMatch {
  std::map<uint64_t, std::vector<KernelActivity>> kernelsByOp; // in start-time order
  std::vector<KernelActivity> unmatched;
};

// Credits every kernel to an op: by the external correlation id pushed while the
// op ran, when CUPTI recorded one; otherwise to the latest op window that opened
// at or before the kernel started (a kernel starts after its launch; exact when
// each op is synchronized before the next, as measured mode does). Kernels that
// start before every window stay unmatched.
KernelMatch matchKernelsToOps(const ActivityBatch& batch, const std::vector<OpWindow>& windows);

} // namespace wavecast::measured
