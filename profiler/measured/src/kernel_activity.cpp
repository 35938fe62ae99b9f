#include "wavecast/measured/kernel_activity.h"

#include <algorithm>
#include <unordered_map>

namespace wavecast::measured {

KernelMatch matchKernelsToOps(const ActivityBatch& batch) {
  std::unordered_map<uint32_t, uint64_t> opByCorrelation;
  for (const ExternalCorrelation& link : batch.correlations)
    opByCorrelation[link.correlationId] = link.externalId;

  std::vector<KernelActivity> kernels = batch.kernels;
  std::stable_sort(
      kernels.begin(), kernels.end(),
      [](const KernelActivity& a, const KernelActivity& b) { return a.startNs < b.startNs; });

  KernelMatch match;
  for (KernelActivity& kernel : kernels) {
    const auto linked = opByCorrelation.find(kernel.correlationId);
    if (linked == opByCorrelation.end())
      match.unmatched.push_back(std::move(kernel));
    else
      match.kernelsByOp[linked->second].push_back(std::move(kernel));
  }
  return match;
}

} // namespace wavecast::measured
