#include "wavecast/predictor/measured_trace.h"

#include <algorithm>

namespace wavecast {

bool hasMeasuredKernels(const Trace& trace) {
  return trace.mode == TraceMode::Cuda &&
         std::any_of(trace.ops.begin(), trace.ops.end(),
                     [](const OpRecord& op) { return !op.kernels.empty(); });
}

std::optional<DeviceSpec> measuredOrigin(const Trace& trace, const GpuDatabase& database) {
  if (trace.mode != TraceMode::Cuda || !trace.device || trace.device->empty())
    return std::nullopt;
  if (const DeviceSpec* spec = database.find(*trace.device))
    return *spec;
  return std::nullopt;
}

bool isKernelVarying(const OpCost& cost) {
  switch (cost.family) {
  case CostFamily::Conv:
  case CostFamily::Gemm:
  case CostFamily::Rnn:
    return true;
  default:
    return false;
  }
}

} // namespace wavecast
