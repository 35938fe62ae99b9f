#include "wavecast/predictor/host_model.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

namespace wavecast {
namespace {

// ATen ops whose result the host reads (a GPU value copied to the CPU, or an output
// size that depends on values): the CPU waits for every kernel issued before them.
constexpr std::array<std::string_view, 9> kSynchronizingOps = {
    "aten::_local_scalar_dense", "aten::item",         "aten::nonzero",
    "aten::masked_select",       "aten::_unique2",     "aten::unique_consecutive",
    "aten::is_nonzero",          "aten::equal",        "aten::repeat_interleave"};

bool clearsGradients(const OpRecord& op) {
  return op.name == "aten::zero_" || op.name == "aten::fill_";
}

// Where the CPU pays a call's fixed price: the first op of a backward pass, and the
// first op of an optimizer step. A run of optimizer ops that only clears gradients is
// zero_grad(set_to_none=False), not a step.
std::vector<double> entryUs(const Trace& trace, const HostOptions& options) {
  std::vector<double> entry(trace.ops.size(), 0.0);
  std::optional<Phase> previous;
  size_t runStart = 0;
  bool runSteps = false;
  auto closeOptimizerRun = [&](size_t end) {
    if (runSteps && runStart < end)
      entry[runStart] += options.optimizerStepUs;
  };
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const OpRecord& op = trace.ops[i];
    if (op.phase != previous) {
      if (previous == Phase::Optimizer)
        closeOptimizerRun(i);
      if (op.phase == Phase::Backward)
        entry[i] += options.backwardCallUs;
      if (op.phase == Phase::Optimizer) {
        runStart = i;
        runSteps = false;
      }
      previous = op.phase;
    }
    if (op.phase == Phase::Optimizer && !clearsGradients(op))
      runSteps = true;
  }
  if (previous == Phase::Optimizer)
    closeOptimizerRun(trace.ops.size());
  return entry;
}

} // namespace

double hostOpUs(const OpRecord& op, const OpCost& cost, const HostOptions& options) {
  if (op.onHost)
    return options.cpuOpUs;
  if (cost.metadataOnly())
    return 0.0;
  return options.opUs + std::max(0, cost.kernels - 1) * options.extraLaunchUs;
}

bool synchronizesHost(const OpRecord& op) {
  return !op.onHost && std::find(kSynchronizingOps.begin(), kSynchronizingOps.end(),
                                 std::string_view(op.name)) != kSynchronizingOps.end();
}

IterationTimeline simulateIteration(const Trace& trace, const std::vector<OpCost>& costs,
                                    const std::vector<double>& gpuMs,
                                    const HostOptions& options) {
  IterationTimeline timeline;
  const size_t count = std::min({trace.ops.size(), costs.size(), gpuMs.size()});
  timeline.ops.resize(count);
  const std::vector<double> entry = entryUs(trace, options);
  double cpu = 0, gpu = 0, end = 0;
  for (size_t i = 0; i < count; ++i) {
    const OpRecord& op = trace.ops[i];
    OpTimeline& out = timeline.ops[i];
    out.hostMs = (entry[i] + hostOpUs(op, costs[i], options)) * 1e-3;
    const double issuedFrom = cpu;
    cpu += out.hostMs;
    const double busy = std::max(0.0, gpuMs[i]);
    const int kernels = op.onHost ? 0 : costs[i].kernels;
    if (kernels > 0 && busy > 0) {
      // Kernels launched evenly over the op's host span, equal in length: the last one
      // ends at the latest of the GPU's backlog draining, the first launch plus all of
      // the work, and the last launch plus its own share.
      const double launchGap = out.hostMs / kernels;
      const double finish = std::max({gpu + busy, issuedFrom + launchGap + busy,
                                      issuedFrom + out.hostMs + busy / kernels});
      out.gpuIdleMs = finish - gpu - busy;
      gpu = finish;
      timeline.gpuMs += busy;
    }
    if (synchronizesHost(op))
      cpu = std::max(cpu, gpu);
    const double reached = std::max(cpu, gpu);
    out.wallMs = reached - end;
    end = reached;
    timeline.hostMs += out.hostMs;
  }
  timeline.wallMs = end;
  timeline.gpuIdleMs = std::max(0.0, end - timeline.gpuMs);
  return timeline;
}

} // namespace wavecast
