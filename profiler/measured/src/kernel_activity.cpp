#include "wavecast/measured/kernel_activity.h"

#include <algorithm>
#include <unordered_map>

namespace wavecast::measured {

KernelMatch matchKernelsToOps(const ActivityBatch& batch, const std::vector<OpWindow>& windows) {
  std::unordered_map<uint32_t, uint64_t> opByCorrelation;
  for (const ExternalCorrelation& link : batch.correlations)
    opByCorrelation[link.correlationId] = link.externalId;

  std::vector<OpWindow> byStart = windows;
  std::stable_sort(byStart.begin(), byStart.end(),
                   [](const OpWindow& a, const OpWindow& b) { return a.startNs < b.startNs; });

  std::vector<KernelActivity> kernels = batch.kernels;
  std::stable_sort(
      kernels.begin(), kernels.end(),
      [](const KernelActivity& a, const KernelActivity& b) { return a.startNs < b.startNs; });

  KernelMatch match;
  for (KernelActivity& kernel : kernels) {
    if (const auto linked = opByCorrelation.find(kernel.correlationId);
        linked != opByCorrelation.end()) {
      match.kernelsByOp[linked->second].push_back(std::move(kernel));
      continue;
    }
    const auto after = std::upper_bound(
        byStart.begin(), byStart.end(), kernel.startNs,
        [](uint64_t start, const OpWindow& window) { return start < window.startNs; });
    if (after == byStart.begin())
      match.unmatched.push_back(std::move(kernel));
    else
      match.kernelsByOp[std::prev(after)->opId].push_back(std::move(kernel));
  }
  return match;
}

} // namespace wavecast::measured
