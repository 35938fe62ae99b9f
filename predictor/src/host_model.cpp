#include "wavecast/predictor/host_model.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string_view>

namespace wavecast {
namespace {

// Ops whose result the host reads (a GPU value copied to the CPU, or an output size that
// depends on values): the CPU waits for every kernel issued before them. torchvision's
// CUDA NMS copies its overlap mask to the host and picks the boxes there
// (torchvision/csrc/ops/cuda/nms_kernel.cu). The script's own torch.cuda.synchronize()
// is the tracer's kSynchronizeOp.
constexpr std::array<std::string_view, 11> kSynchronizingOps = {
    "aten::_local_scalar_dense", "aten::item",     "aten::nonzero",
    "aten::masked_select",       "aten::_unique2", "aten::unique_consecutive",
    "aten::is_nonzero",          "aten::equal",    "aten::repeat_interleave",
    "torchvision::nms",          kSynchronizeOp};

bool clearsGradients(const OpRecord& op) {
  return op.name == "aten::zero_" || op.name == "aten::fill_";
}

// Batches a DataLoader's worker processes make (args.workers, the script's num_workers):
// the loop only takes them.
int loaderWorkers(const OpRecord& op) {
  return op.onHost ? static_cast<int>(op.intArg("workers").value_or(0)) : 0;
}

} // namespace

bool loadsBatch(const OpRecord& op) {
  return op.onHost && op.floatArg("host_ms").has_value();
}

namespace {

struct LoaderSupply {
  size_t firstFetch = 0;
  double ms = 0;
  int workers = 0;
};

// Each worker makes whole batches, as the tracer timed them in one process, so N workers
// make a loader's batches of the iteration in 1/N of that time; the slowest loader.
LoaderSupply slowestLoader(const Trace& trace, size_t count) {
  std::map<int64_t, LoaderSupply> loaders;
  for (size_t i = 0; i < count; ++i) {
    const OpRecord& op = trace.ops[i];
    const int workers = loaderWorkers(op);
    if (workers <= 0)
      continue;
    const auto [it, added] =
        loaders.try_emplace(op.intArg("loader").value_or(0), LoaderSupply{i, 0.0, workers});
    it->second.ms += op.floatArg("host_ms").value_or(0.0) * op.batchShare / workers;
  }
  LoaderSupply slowest;
  for (const auto& [loader, supply] : loaders)
    if (supply.ms > slowest.ms)
      slowest = supply;
  return slowest;
}

} // namespace

double hostOpUs(const OpRecord& op, const OpCost& cost, const HostOptions& options) {
  if (loaderWorkers(op) > 0) // taking a batch from a worker: simulateIteration waits for them
    return 0.0;
  if (loadsBatch(op)) // timed on this CPU: a microbatch's copy makes its share of it
    return *op.floatArg("host_ms") * op.batchShare * 1e3;
  if (op.onHost)                      // Adam's step counters, .item() of a CPU tensor: one op
    return options.cpuOpUs;
  if (cost.metadataOnly())
    return 0.0;
  if (cost.family == CostFamily::HostTransfer) // the call, and staging its share of the bytes
    return options.opUs + cost.transfer.stagingMs * op.batchShare * 1e3;
  // Inductor's generated code calls each of its kernels from Python, one launcher call per
  // kernel: about an eager op's price each on the H200's host (bench/truth/data/h200/
  // compiled.json: 34-53 us per launch compiled, 37-46 us eager). Under CUDA graphs
  // (reduce-overhead) a replay launches them all; taken as an extra launch each.
  if (cost.fused || op.compiled) {
    const bool graphs = op.compiled && usesCudaGraphs(*op.compiled);
    const double perKernel = graphs ? options.extraLaunchUs : options.opUs;
    return cost.fused ? cost.kernels * perKernel
                      : perKernel + std::max(0, cost.kernels - 1) * options.extraLaunchUs;
  }
  const double launchUs =
      cost.family == CostFamily::Rnn ? options.rnnStepLaunchUs : options.extraLaunchUs;
  return options.opUs + std::max(0, cost.kernels - 1) * launchUs;
}

bool synchronizesHost(const OpRecord& op) {
  return !op.onHost && std::find(kSynchronizingOps.begin(), kSynchronizingOps.end(),
                                 std::string_view(op.name)) != kSynchronizingOps.end();
}

std::vector<bool> hostWaits(const Trace& trace) {
  std::vector<bool> waits(trace.ops.size());
  for (size_t i = 0; i < trace.ops.size(); ++i)
    waits[i] = synchronizesHost(trace.ops[i]);
  return waits;
}

std::vector<double> issueMs(const Trace& trace, const std::vector<OpCost>& costs,
                            const HostOptions& options) {
  const size_t count = std::min(trace.ops.size(), costs.size());
  std::vector<double> host(count);
  std::optional<Phase> previous;
  bool stepPaid = false;
  for (size_t i = 0; i < count; ++i) {
    const OpRecord& op = trace.ops[i];
    double us = hostOpUs(op, costs[i], options);
    // A call's fixed price falls on its first op: each backward pass, and each run of
    // optimizer ops that does more than clear gradients (zero_grad(set_to_none=False)
    // is no step) or work on them before the step (clipping is no step either).
    if (op.phase == Phase::Backward && previous != Phase::Backward)
      us += options.backwardCallUs;
    if (op.phase != Phase::Optimizer) {
      stepPaid = false;
    } else if (!stepPaid && !clearsGradients(op) && !op.gradientWork) {
      us += options.optimizerStepUs;
      stepPaid = true;
    }
    previous = op.phase;
    host[i] = us * 1e-3;
  }
  return host;
}

IterationTimeline simulateIteration(const Trace& trace, const std::vector<OpCost>& costs,
                                    const std::vector<double>& hostMs,
                                    const std::vector<double>& gpuMs,
                                    const std::vector<bool>& waits, double ncclSmShare) {
  IterationTimeline timeline;
  const size_t count =
      std::min({trace.ops.size(), costs.size(), hostMs.size(), gpuMs.size(), waits.size()});
  timeline.ops.resize(count);
  double cpu = 0, gpu = 0, end = 0;
  // NCCL's stream: the last collective's span, and those the compute stream has not yet
  // waited for.
  double commStart = 0, commEnd = 0;
  struct InFlight {
    size_t op;
    double end;
    std::optional<int64_t> waitOp;
    Phase phase;
    bool prefetch; // an all-gather on FSDP's own streams
  };
  // When the compute stream last took a prefetched all-gather's result (FSDP copies it
  // out there and records the event the next gather's copy-in waits for).
  double gatherTakenAt = 0;
  std::vector<InFlight> inFlight;
  // Copies to the GPU on a stream of the script's own: the copy engine's clock, and the
  // last such copy.
  double sideCopiesEnd = 0;
  std::optional<size_t> lastSideCopy;
  // The compute stream waits for `done`; what that moves the iteration's end is exposed
  // communication, credited to the collective.
  const auto waitFor = [&](const InFlight& done) {
    gpu = std::max(gpu, done.end);
    const double reached = std::max(cpu, gpu);
    const double exposed = reached - end;
    timeline.ops[done.op].wallMs += exposed;
    timeline.ops[done.op].commHiddenMs = std::max(0.0, gpuMs[done.op] - exposed);
    end = reached;
  };
  const double slowdown = ncclSmShare > 0 && ncclSmShare < 1 ? ncclSmShare / (1 - ncclSmShare) : 0;

  for (size_t i = 0; i < count; ++i) {
    const OpRecord& op = trace.ops[i];
    OpTimeline& out = timeline.ops[i];
    for (auto it = inFlight.begin(); it != inFlight.end();) {
      if (it->waitOp ? *it->waitOp == op.id : it->phase != op.phase) {
        waitFor(*it);
        if (it->prefetch)
          gatherTakenAt = gpu;
        it = inFlight.erase(it);
      } else {
        ++it;
      }
    }
    const double issuedFrom = cpu;
    cpu += hostMs[i];
    const double busy = std::max(0.0, gpuMs[i]);
    const int kernels = op.onHost ? 0 : costs[i].kernels;
    if (costs[i].family == CostFamily::Collective && kernels > 0 && busy > 0) {
      const CollectiveWork& work = costs[i].collective;
      // Launched once issued, after the compute before it, after the previous collective.
      // FSDP2's all-gathers (its implicit and explicit prefetch) wait on their own streams
      // for the previous gather's result to be taken, not for the compute: one block's
      // gather runs beside the block before it.
      const bool prefetch = work.sideStream && work.kind == CollectiveKind::AllGather;
      commStart = std::max({commEnd, prefetch ? gatherTakenAt : gpu, cpu});
      commEnd = commStart + busy;
      timeline.commMs += busy;
      if (work.async)
        inFlight.push_back({i, commEnd, work.waitOp, op.phase, prefetch});
      else
        gpu = commEnd;
    } else if (costs[i].family == CostFamily::HostTransfer && kernels > 0 && busy > 0) {
      // The DMA runs in its stream's order. From pageable memory it follows the staging
      // from the call's start, and ends no sooner than the last chunk is staged; from
      // page-locked memory it starts once issued. On a stream of the script's own it runs
      // beside the compute stream, which waits for it only where the script says (a
      // prefetcher's next batch: the next iteration).
      //
      // A copy to the host starts once its stream reaches it; into pageable memory the CPU
      // stages the chunks as the DMA fills them and returns after the last.
      const HostTransferWork& transfer = costs[i].transfer;
      const double after = transfer.sideStream ? sideCopiesEnd : gpu;
      const bool toHost = transfer.direction == TransferDirection::ToHost;
      const double start = toHost ? std::max(after, issuedFrom)
                                  : std::max(after, transfer.pageable ? issuedFrom : cpu);
      const double finish = toHost ? start + busy : std::max(start + busy, cpu);
      if (toHost && transfer.pageable)
        cpu = std::max(finish, start + hostMs[i]);
      if (transfer.sideStream) {
        sideCopiesEnd = finish;
        lastSideCopy = i;
      } else {
        out.gpuIdleMs = finish - gpu - busy;
        timeline.gpuMs += busy;
        gpu = finish;
      }
      // A pageable copy returns once staged, a blocking one after its stream synchronizes.
      if (transfer.pageable || transfer.blocking)
        cpu = std::max(cpu, finish);
    } else if (kernels > 0 && busy > 0) {
      // Kernels launched evenly over the op's host span, equal in length: the last one
      // ends at the latest of the GPU's backlog draining, the first launch plus all of
      // the work, and the last launch plus its own share.
      const double launchGap = hostMs[i] / kernels;
      double finish = std::max(
          {gpu + busy, issuedFrom + launchGap + busy, issuedFrom + hostMs[i] + busy / kernels});
      out.gpuIdleMs = finish - gpu - busy;
      // The part of it that ran beside a collective ran on fewer SMs.
      const double overlap =
          std::max(0.0, std::min(finish, commEnd) - std::max(finish - busy, commStart));
      finish += overlap * slowdown;
      timeline.gpuMs += finish - gpu - out.gpuIdleMs;
      gpu = finish;
    }
    if (waits[i])
      cpu = std::max(cpu, gpu);
    const double reached = std::max(cpu, gpu);
    out.wallMs += reached - end;
    end = reached;
    timeline.hostMs += hostMs[i];
  }
  for (const InFlight& pending : inFlight)
    waitFor(pending);
  if (lastSideCopy && sideCopiesEnd > end) { // the next iteration waits for its batch
    timeline.ops[*lastSideCopy].wallMs += sideCopiesEnd - end;
    end = sideCopiesEnd;
  }
  // The workers load beside everything else the loop does; it waits at its next fetch
  // for what they take beyond that.
  const LoaderSupply loader = slowestLoader(trace, count);
  timeline.loaderMs = loader.ms;
  timeline.loaderWorkers = loader.workers;
  if (loader.ms > end) {
    timeline.loaderWaitMs = loader.ms - end;
    timeline.ops[loader.firstFetch].wallMs += timeline.loaderWaitMs;
    end = loader.ms;
  }
  for (size_t i = 0; i < count; ++i)
    timeline.commHiddenMs += timeline.ops[i].commHiddenMs;
  timeline.wallMs = end;
  // Exposed communication keeps the GPU busy too.
  timeline.gpuIdleMs =
      std::max(0.0, end - timeline.gpuMs - (timeline.commMs - timeline.commHiddenMs));
  return timeline;
}

} // namespace wavecast
