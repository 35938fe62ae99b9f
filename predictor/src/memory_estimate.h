// The memory a training iteration needs on a GPU (docs/predictor.md, "Aggregation and
// memory"): tensors from the trace, then each GPU's workspace.
#pragma once

#include "wavecast/predictor/calibration.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/predictor/predictor.h"

#include <vector>

namespace wavecast {

// The memory ops hold only while they run (cuDNN's workspaces, temporaries).
struct Workspaces {
  int64_t largestBytes = 0;   // one op's, the most: its segment stays cached
  int64_t transientBytes = 0; // the most live tensors plus one op's top the tensors' peak by
};

// The GPU-independent part of the memory estimate.
struct TensorMemory {
  MemoryEstimate tensors; // the tensors only
  // The workspaces as priced without a calibration, the same on every GPU; a calibrated GPU
  // prices them again, op by op.
  Workspaces uncalibrated;
  // What the caching allocator reserves beyond the tensors' peak: its rounding and
  // fragmentation as the tracer replayed them, else the rounding of the tensors autograd
  // keeps.
  int64_t roundingBytes = 0;
  // cuBLAS handles with a workspace: one per thread that runs GEMMs, the script's
  // (forward, optimizer) and autograd's device thread (backward).
  int cublasHandles = 0;
  // The tensors' peak, and per op the bytes of eager's saved tensors live while it runs
  // beyond those AOTAutograd's partitioner saves (empty: nothing compiled), which the
  // trace's live bytes count and a compiled region does not hold.
  std::optional<int64_t> peakLiveBytes;
  std::vector<int64_t> heldBeyondCompiled;
  // The bytes live while op `i` of `trace` runs, as the iteration holds them.
  std::optional<int64_t> liveBytes(const Trace& trace, size_t i) const;
};

// What an older trace (no `saved_bytes`) is assumed to keep for backward of `op`.
int64_t upperBoundKeptBytes(const OpRecord& op, const OpCost& cost);
// Whether the trace is of training (it has a backward pass).
bool hasBackward(const Trace& trace);

TensorMemory tensorMemory(const Trace& trace, const std::vector<OpCost>& costs,
                          const PredictorOptions& options);

// The tensors plus `gpu`'s cuBLAS workspace and what one op's workspace adds to the peak
// (allocated), the allocator's rounding and the largest workspace's cached segment
// (reserved) and the CUDA context (process). `calibration`: `gpu`'s, or null.
MemoryEstimate onGpu(const TensorMemory& tensors, const Trace& trace,
                     const std::vector<OpCost>& costs, const DeviceSpec& gpu,
                     const CalibrationTable* calibration, const PredictorOptions& options);

} // namespace wavecast
