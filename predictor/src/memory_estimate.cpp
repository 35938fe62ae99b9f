#include "memory_estimate.h"

#include "compiled_memory.h"
#include "wavecast/predictor/prediction_stages.h"

#include <algorithm>
#include <utility>

namespace wavecast {
namespace {

bool isInplace(const std::string& name) {
  return name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_';
}

int64_t tensorBytes(const std::optional<TensorMeta>& t) {
  return t ? std::max<int64_t>(0, t->numel()) * t->elementSize() : 0;
}

// CUDACachingAllocator.cpp: kMinBlockSize, kMinLargeAlloc, kRoundLarge.
constexpr int64_t kMinBlockBytes = 512;
constexpr int64_t kMinLargeAllocBytes = int64_t{10} << 20;
constexpr int64_t kRoundLargeBytes = int64_t{2} << 20;

int64_t roundUp(int64_t bytes, int64_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

} // namespace

int64_t allocatorBlockBytes(int64_t bytes) {
  if (bytes <= 0)
    return 0;
  const int64_t block = roundUp(bytes, kMinBlockBytes);
  return block >= kMinLargeAllocBytes ? roundUp(block, kRoundLargeBytes) : block;
}

// What an older trace (no `saved_bytes`) is assumed to keep for backward: every fresh
// result of a forward op that does work (views and in-place results share storage).
int64_t upperBoundKeptBytes(const OpRecord& op, const OpCost& cost) {
  if (op.phase != Phase::Forward || cost.metadataOnly() || isInplace(op.name))
    return 0;
  int64_t bytes = 0;
  for (const auto& t : op.outputs)
    bytes += tensorBytes(t);
  return bytes;
}

bool hasBackward(const Trace& trace) {
  return std::any_of(trace.ops.begin(), trace.ops.end(),
                     [](const OpRecord& op) { return op.phase == Phase::Backward; });
}

std::optional<int64_t> TensorMemory::liveBytes(const Trace& trace, size_t i) const {
  const std::optional<int64_t>& traced = trace.ops[i].liveBytes;
  if (!traced || i >= heldBeyondCompiled.size())
    return traced;
  return *traced - heldBeyondCompiled[i];
}

namespace {

// The memory `op` holds only while it runs on a GPU, beyond its outputs: what `calibration`
// (that GPU's) measured for it where the file has transient memory, else for a convolution
// cuDNN's workspace (its largest operand, at most the limit), else none.
int64_t opWorkspaceBytes(const OpRecord& op, const OpCost& cost,
                         const CalibrationTable* calibration, const PredictorOptions& options) {
  if (cost.metadataOnly() || op.onHost)
    return 0;
  if (calibration)
    if (const auto calibrated = calibration->find(op, cost);
        calibrated && calibrated->transientBytes)
      return *calibrated->transientBytes;
  if (cost.family != CostFamily::Conv)
    return 0;
  int64_t largest = 0;
  for (const auto& t : op.inputs)
    largest = std::max(largest, tensorBytes(t));
  for (const auto& t : op.outputs)
    largest = std::max(largest, tensorBytes(t));
  return std::min(largest, options.convWorkspaceLimitBytes);
}

// The ops' workspaces: the largest, and what they add to the tensors' peak where per-op
// live bytes say what else is live while they run.
Workspaces workspaces(const Trace& trace, const std::vector<OpCost>& costs,
                      const TensorMemory& tensors, const CalibrationTable* calibration,
                      const PredictorOptions& options) {
  Workspaces out;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const int64_t workspace = opWorkspaceBytes(trace.ops[i], costs[i], calibration, options);
    out.largestBytes = std::max(out.largestBytes, workspace);
    const std::optional<int64_t> live = tensors.liveBytes(trace, i);
    if (live && tensors.peakLiveBytes)
      out.transientBytes = std::max(out.transientBytes, *live + workspace - *tensors.peakLiveBytes);
  }
  return out;
}

// The tensors' peak with the compiled regions' saved tensors as AOTAutograd's partitioner
// chooses them; sets `memory`'s saved bytes and peak place.
void liveTensors(const Trace& trace, const std::vector<OpCost>& costs, TensorMemory& result) {
  MemoryEstimate& memory = result.tensors;
  result.peakLiveBytes = trace.memory.peakLiveBytes;
  auto partition = compiled::savedForBackward(trace, costs);
  if (!partition || !result.peakLiveBytes)
    return;
  const int64_t notSaved = partition->eagerBytes - partition->compiledBytes;
  memory.activationsSavedBytes = std::max<int64_t>(0, memory.activationsSavedBytes - notSaved);
  result.heldBeyondCompiled = std::move(partition->heldBeyondCompiled);
  std::optional<int64_t> peak;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const std::optional<int64_t> live = result.liveBytes(trace, i);
    if (live && (!peak || *live > *peak)) {
      peak = live;
      memory.peakPhase = trace.ops[i].phase;
      memory.peakOpId = trace.ops[i].id;
    }
  }
  // Without per-op live bytes the peak is where the saved tensors are all live.
  result.peakLiveBytes = peak ? *peak : *result.peakLiveBytes - notSaved;
}

// What the caching allocator reserves beyond the tensors' peak: as the tracer replayed
// their allocations through it, else the rounding of the tensors autograd keeps, which make
// up most of the peak (each a block of its own).
int64_t allocatorOverheadBytes(const Trace& trace, const std::vector<OpCost>& costs,
                               ActivationsSource activations) {
  if (trace.memory.peakReservedBytes && trace.memory.peakLiveBytes)
    return std::max<int64_t>(0, *trace.memory.peakReservedBytes - *trace.memory.peakLiveBytes);
  int64_t rounding = 0;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const OpRecord& op = trace.ops[i];
    const bool kept = activations == ActivationsSource::Traced
                          ? op.savedBytes.value_or(0) > 0
                          : upperBoundKeptBytes(op, costs[i]) > 0;
    if (!kept || op.phase != Phase::Forward)
      continue;
    for (const auto& t : op.outputs)
      rounding += allocatorBlockBytes(tensorBytes(t)) - tensorBytes(t);
  }
  return rounding;
}

} // namespace

TensorMemory tensorMemory(const Trace& trace, const std::vector<OpCost>& costs,
                          const PredictorOptions& options) {
  TensorMemory result;
  MemoryEstimate& memory = result.tensors;
  const bool training = hasBackward(trace);
  memory.weightsBytes = trace.memory.parametersBytes;
  memory.optimizerStateBytes = trace.memory.optimizerStateBytes;
  memory.gradientsBytes = training ? trace.memory.gradientsBytes : 0;
  if (training && memory.gradientsBytes == 0)
    memory.gradientsBytes = memory.weightsBytes; // one gradient per parameter

  if (trace.memory.peakLiveBytes) {
    // The tracer's peak holds every tensor live at that moment; what is not weights,
    // gradients or optimizer state is activations, temporaries and the batch. Gradients
    // set to None by zero_grad are live at the peak only as far as backward made them.
    memory.activationsSource = ActivationsSource::Traced;
    if (training && trace.memory.gradientsAtPeakBytes)
      memory.gradientsBytes = *trace.memory.gradientsAtPeakBytes;
    memory.activationsSavedBytes = trace.memory.activationsSavedBytes.value_or(0);
    memory.peakPhase = trace.memory.peakPhase;
    memory.peakOpId = trace.memory.peakOpId;
    liveTensors(trace, costs, result);
    memory.activationsBytes =
        std::max<int64_t>(0, *result.peakLiveBytes - memory.weightsBytes - memory.gradientsBytes -
                                 memory.optimizerStateBytes);
  } else {
    int64_t kept = 0;
    int64_t largestStep = 0;
    for (size_t i = 0; i < trace.ops.size(); ++i) {
      const OpRecord& op = trace.ops[i];
      if (op.phase != Phase::Forward || costs[i].metadataOnly())
        continue;
      int64_t step = 0;
      for (const auto& t : op.inputs)
        step += tensorBytes(t);
      for (const auto& t : op.outputs)
        step += tensorBytes(t);
      largestStep = std::max(largestStep, step);
      kept += upperBoundKeptBytes(op, costs[i]);
    }
    memory.activationsBytes = training ? kept : largestStep;
    memory.activationsSavedBytes = training ? kept : 0;
  }

  result.roundingBytes = allocatorOverheadBytes(trace, costs, memory.activationsSource);

  bool scriptThreadGemm = false;
  bool autogradThreadGemm = false;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    if (costs[i].family != CostFamily::Gemm || costs[i].metadataOnly())
      continue;
    (trace.ops[i].phase == Phase::Backward ? autogradThreadGemm : scriptThreadGemm) = true;
  }
  result.cublasHandles = int{scriptThreadGemm} + int{autogradThreadGemm};

  result.uncalibrated = workspaces(trace, costs, result, nullptr, options);
  return result;
}

MemoryEstimate onGpu(const TensorMemory& tensors, const Trace& trace,
                     const std::vector<OpCost>& costs, const DeviceSpec& gpu,
                     const CalibrationTable* calibration, const PredictorOptions& options) {
  MemoryEstimate memory = tensors.tensors;
  // PyTorch's cuBLAS handles are per thread and each (handle, stream) keeps its workspace
  // (CublasHandlePool.cpp), so forward and backward each hold one from their first GEMM on.
  const int64_t perHandle = gpu.computeCapabilityMajor >= 9 ? options.cublasWorkspaceBytesSm90
                                                            : options.cublasWorkspaceBytes;
  memory.cublasWorkspaceBytes = perHandle * tensors.cublasHandles;
  // A workspace is allocated for one op and freed after it, and counts as allocated while
  // the op runs (bench/truth/workspace.py): the peak is where live tensors plus one op's
  // workspace are highest, which may be another op than the tensors' own peak. The
  // allocator keeps the largest workspace's segment cached. A trace without per-op live
  // bytes (an older one, a split layout) prices the workspace as cached only.
  const Workspaces workspace =
      calibration ? workspaces(trace, costs, tensors, calibration, options) : tensors.uncalibrated;
  memory.transientBytes = workspace.transientBytes;
  memory.cachedBytes =
      tensors.roundingBytes +
      std::max<int64_t>(0, allocatorBlockBytes(workspace.largestBytes) - workspace.transientBytes);
  memory.contextBytes = options.runtimeReserveBytes;
  return memory;
}

MemoryEstimate estimateMemory(const Trace& trace, const DeviceSpec& gpu,
                              const PredictorOptions& options) {
  // As the predictor costs them (TF32 where it runs), so a calibration finds the same entries.
  const std::vector<OpCost> costs =
      stages::costOps(trace, stages::effectivePrecision(trace, options)).costs;
  return onGpu(tensorMemory(trace, costs, options), trace, costs, gpu,
               stages::calibrationFor(gpu, options), options);
}

} // namespace wavecast
