// The memory a training iteration needs on a GPU (docs/predictor.md, "Aggregation and
// memory"): tensors from the trace, then each GPU's workspace.
#pragma once

#include "wavecast/predictor/op_cost.h"
#include "wavecast/predictor/predictor.h"

#include <vector>

namespace wavecast {

// The GPU-independent part of the memory estimate.
struct TensorMemory {
  MemoryEstimate tensors; // the tensors only
  int64_t largestConvOperandBytes = 0;
  // What the caching allocator's rounding adds to the tensors autograd keeps.
  int64_t roundingBytes = 0;
  // cuBLAS handles with a workspace: one per thread that runs GEMMs, the script's
  // (forward, optimizer) and autograd's device thread (backward).
  int cublasHandles = 0;
};

// What an older trace (no `saved_bytes`) is assumed to keep for backward of `op`.
int64_t upperBoundKeptBytes(const OpRecord& op, const OpCost& cost);
// Whether the trace is of training (it has a backward pass).
bool hasBackward(const Trace& trace);

TensorMemory tensorMemory(const Trace& trace, const std::vector<OpCost>& costs);

// The tensors plus `gpu`'s cuBLAS workspace (allocated), the allocator's rounding and
// cuDNN's workspace (reserved) and the CUDA context (process).
MemoryEstimate onGpu(const TensorMemory& tensors, const DeviceSpec& gpu,
                     const PredictorOptions& options);

} // namespace wavecast
