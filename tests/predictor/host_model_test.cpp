#include "wavecast/predictor/host_model.h"

#include <gtest/gtest.h>
#include <numeric>
#include <optional>

namespace wavecast {
namespace {

OpRecord op(std::string name, Phase phase = Phase::Forward) {
  OpRecord record;
  record.name = std::move(name);
  record.phase = phase;
  return record;
}

OpCost work(int kernels = 1) {
  OpCost cost;
  cost.family = CostFamily::Elementwise;
  cost.kernels = kernels;
  return cost;
}

// Round numbers: 10 us per op, 2 us per extra launch, 100 us per call entry.
HostOptions host() {
  HostOptions options;
  options.opUs = 10;
  options.extraLaunchUs = 2;
  options.rnnStepLaunchUs = 3;
  options.cpuOpUs = 1;
  options.backwardCallUs = 100;
  options.optimizerStepUs = 100;
  return options;
}

IterationTimeline play(const Trace& trace, const std::vector<OpCost>& costs,
                       const std::vector<double>& gpuMs) {
  return simulateIteration(trace, costs, issueMs(trace, costs, host()), gpuMs, hostWaits(trace));
}

double sumWall(const IterationTimeline& timeline) {
  return std::accumulate(timeline.ops.begin(), timeline.ops.end(), 0.0,
                         [](double total, const OpTimeline& op) { return total + op.wallMs; });
}

TEST(HostModel, OpCostsByKind) {
  const HostOptions options = host();
  EXPECT_DOUBLE_EQ(hostOpUs(op("aten::add"), work(), options), 10);
  EXPECT_DOUBLE_EQ(hostOpUs(op("aten::_foreach_add_"), work(5), options), 10 + 4 * 2);
  // cuDNN launches an RNN's steps one by one, each at its own price.
  OpCost lstm = work(101);
  lstm.family = CostFamily::Rnn;
  EXPECT_DOUBLE_EQ(hostOpUs(op("aten::lstm"), lstm, options), 10 + 100 * 3);
  OpCost view;
  view.family = CostFamily::Metadata;
  view.kernels = 0;
  EXPECT_DOUBLE_EQ(hostOpUs(op("aten::view"), view, options), 0) << "rides on its producer";
  OpRecord counter = op("aten::_local_scalar_dense");
  counter.onHost = true;
  EXPECT_DOUBLE_EQ(hostOpUs(counter, work(), options), 1);
  EXPECT_FALSE(synchronizesHost(counter)) << "a CPU tensor's value is already on the host";
  // A script run as written: its data loading, timed on this CPU, is that op's host time.
  OpRecord loading = op("wavecast::data_loading");
  loading.onHost = true;
  loading.args["host_ms"] = 2.5;
  EXPECT_DOUBLE_EQ(hostOpUs(loading, work(), options), 2500);
  EXPECT_TRUE(synchronizesHost(op("aten::_local_scalar_dense")));
  EXPECT_TRUE(synchronizesHost(op("torchvision::nms"))); // its mask is read on the host
  EXPECT_FALSE(synchronizesHost(op("aten::add")));
}

TEST(HostModel, HostBoundIterationIsTheCpuTime) {
  // Four 1 us kernels, each issued 10 us after the last: the GPU waits on every launch,
  // and the iteration ends 1 us after the last launch.
  Trace trace;
  for (int i = 0; i < 4; ++i)
    trace.ops.push_back(op("aten::add"));
  const std::vector<OpCost> costs(4, work());
  const auto timeline = play(trace, costs, {0.001, 0.001, 0.001, 0.001});
  EXPECT_NEAR(timeline.hostMs, 0.040, 1e-12);
  EXPECT_NEAR(timeline.gpuMs, 0.004, 1e-12);
  EXPECT_NEAR(timeline.wallMs, 0.041, 1e-12);
  EXPECT_NEAR(timeline.gpuIdleMs, 0.037, 1e-12);
  EXPECT_NEAR(timeline.ops[0].gpuIdleMs, 0.010, 1e-12) << "waits for the first launch";
  EXPECT_NEAR(timeline.ops[1].gpuIdleMs, 0.009, 1e-12);
  EXPECT_NEAR(sumWall(timeline), timeline.wallMs, 1e-12);
}

OpRecord fetch(double hostMs, int workers, int loader = 0) {
  OpRecord loading = op("wavecast::data_loading");
  loading.onHost = true;
  loading.args["host_ms"] = hostMs;
  loading.args["loader"] = loader;
  if (workers > 0)
    loading.args["workers"] = workers;
  return loading;
}

TEST(HostModel, DataLoaderWorkersLoadBesideTheLoop) {
  // A batch that took 8 ms to make in one process, then three 1 ms kernels.
  const std::vector<OpCost> costs{work(), work(), work(), work()};
  const auto iteration = [&](OpRecord loading) {
    Trace trace;
    trace.ops = {std::move(loading), op("aten::mm"), op("aten::mm"), op("aten::mm")};
    return play(trace, costs, {0.0, 1.0, 1.0, 1.0});
  };
  EXPECT_DOUBLE_EQ(hostOpUs(fetch(8, 4), work(), host()), 0) << "the loop only takes the batch";
  OpRecord quarter = fetch(8, 0); // one of four pipeline microbatches made from the batch
  quarter.batchShare = 0.25;
  EXPECT_DOUBLE_EQ(hostOpUs(quarter, work(), host()), 2000);
  // In the loop's own process the batch is made before the kernels are issued.
  const auto inProcess = iteration(fetch(8, 0));
  EXPECT_NEAR(inProcess.wallMs, 8 + 0.010 + 3, 1e-12);
  EXPECT_DOUBLE_EQ(inProcess.loaderWaitMs, 0);
  // Two workers make a batch every 4 ms: the GPU's 3 ms are the shorter, and the loop
  // waits 1 ms at the fetch.
  const auto two = iteration(fetch(8, 2));
  EXPECT_NEAR(two.loaderMs, 4, 1e-12);
  EXPECT_EQ(two.loaderWorkers, 2);
  EXPECT_NEAR(two.wallMs, 4, 1e-12);
  EXPECT_NEAR(two.loaderWaitMs, 4 - 3.010, 1e-12);
  EXPECT_NEAR(two.ops[0].wallMs, 4 - 3.010, 1e-12) << "the wait is the fetch's";
  EXPECT_NEAR(two.gpuIdleMs, 1, 1e-12);
  EXPECT_NEAR(sumWall(two), two.wallMs, 1e-12);
  // Eight keep ahead of the GPU: the iteration is its own.
  const auto eight = iteration(fetch(8, 8));
  EXPECT_NEAR(eight.wallMs, 0.010 + 3, 1e-12);
  EXPECT_DOUBLE_EQ(eight.loaderWaitMs, 0);
}

TEST(HostModel, EachDataLoaderHasItsOwnWorkers) {
  // Gradient accumulation over two batches of one loader (2 workers: 6 ms), and a batch of
  // another (4 workers: 2 ms): the slowest loader sets the pace.
  Trace trace;
  trace.ops = {fetch(6, 2), op("aten::mm"), fetch(6, 2), op("aten::mm"), fetch(8, 4, 1)};
  const std::vector<OpCost> costs(5, work());
  const auto timeline = play(trace, costs, {0.0, 1.0, 0.0, 1.0, 0.0});
  EXPECT_NEAR(timeline.loaderMs, 6, 1e-12);
  EXPECT_NEAR(timeline.wallMs, 6, 1e-12);
  EXPECT_GT(timeline.ops[0].wallMs, 3.9) << "waited for at the loader's first fetch";
  EXPECT_NEAR(sumWall(timeline), timeline.wallMs, 1e-12);
  // Split into four pipeline microbatches, the first loader's fetches make a quarter of
  // their batch each, four times over: the same 6 ms.
  Trace split;
  for (int k = 0; k < 4; ++k)
    for (OpRecord loading : {fetch(6, 2), fetch(6, 2)}) {
      loading.batchShare = 0.25;
      split.ops.push_back(loading);
    }
  EXPECT_NEAR(play(split, std::vector<OpCost>(8, work()), std::vector<double>(8, 0.0)).loaderMs, 6,
              1e-12);
}

TEST(HostModel, GpuBoundIterationIsTheKernelTime) {
  // 1 ms kernels issued every 10 us: the CPU runs ahead, the GPU never waits after the
  // first launch.
  Trace trace;
  for (int i = 0; i < 3; ++i)
    trace.ops.push_back(op("aten::mm"));
  const std::vector<OpCost> costs(3, work());
  const auto timeline = play(trace, costs, {1.0, 1.0, 1.0});
  EXPECT_NEAR(timeline.wallMs, 0.010 + 3.0, 1e-12);
  EXPECT_NEAR(timeline.ops[1].gpuIdleMs, 0, 1e-12);
  EXPECT_NEAR(timeline.ops[1].wallMs, 1.0, 1e-12) << "each op adds its kernel time";
  EXPECT_NEAR(sumWall(timeline), timeline.wallMs, 1e-12);
}

TEST(HostModel, ManyLaunchesOfOneOpOverlapWithItsIssue) {
  // 10 kernels of 5 us each, launched over 28 us (10 + 9 x 2): the last launch at 28 us
  // ends at 33 us; the GPU alone would need 50 us after the first launch at 2.8 us.
  Trace trace;
  trace.ops.push_back(op("aten::_cudnn_rnn"));
  const auto fast = play(trace, {work(10)}, {0.010});
  EXPECT_NEAR(fast.wallMs, 0.028 + 0.001, 1e-12);
  const auto slow = play(trace, {work(10)}, {0.050});
  EXPECT_NEAR(slow.wallMs, 0.0028 + 0.050, 1e-12);
}

TEST(HostModel, ReadingAGpuValueWaitsForTheGpu) {
  // A 1 ms kernel, then loss.item(): the CPU waits for the kernel before the next op,
  // whose 1 us kernel then starts 10 us later on an idle GPU.
  Trace trace;
  trace.ops.push_back(op("aten::mm"));
  trace.ops.push_back(op("aten::_local_scalar_dense"));
  trace.ops.push_back(op("aten::add"));
  const std::vector<OpCost> costs(3, work());
  const auto timeline = play(trace, costs, {1.0, 0.001, 0.001});
  EXPECT_NEAR(timeline.wallMs, 0.010 + 1.0 + 0.001 + 0.010 + 0.001, 1e-12);
  EXPECT_NEAR(timeline.ops[2].gpuIdleMs, 0.010, 1e-12);
}

OpCost transfer(bool pageable, bool blocking, double stagingMs = 0,
                TransferDirection direction = TransferDirection::ToDevice) {
  OpCost cost;
  cost.family = CostFamily::HostTransfer;
  cost.transfer.direction = direction;
  cost.transfer.pageable = pageable;
  cost.transfer.blocking = blocking;
  cost.transfer.stagingMs = stagingMs;
  return cost;
}

TEST(HostModel, APageableCopyHoldsTheCpuWhileItsDmaFollowsTheStaging) {
  // A 1 ms kernel, then a batch staged for 0.5 ms whose DMA takes 0.2 ms, then a 1 us
  // kernel. non_blocking or not, the CPU is held: the DMA waits for the kernel (stream
  // order), ends at 1.2 ms, and the next op issues from there.
  Trace trace;
  trace.ops.push_back(op("aten::mm"));
  trace.ops.push_back(op("wavecast::host_to_device"));
  trace.ops.push_back(op("aten::add"));
  for (const bool blocking : {false, true}) {
    const std::vector<OpCost> costs{work(), transfer(true, blocking, 0.5), work()};
    EXPECT_DOUBLE_EQ(hostOpUs(trace.ops[1], costs[1], host()), 10 + 500);
    const auto timeline = play(trace, costs, {1.0, 0.2, 0.001});
    EXPECT_NEAR(timeline.wallMs, 0.010 + 1.0 + 0.2 + 0.010 + 0.001, 1e-12) << blocking;
    EXPECT_NEAR(timeline.gpuMs, 1.0 + 0.2 + 0.001, 1e-12);
  }
  // On an idle GPU the DMA keeps pace with the staging: done when the last chunk is.
  Trace alone;
  alone.ops.push_back(op("wavecast::host_to_device"));
  EXPECT_NEAR(play(alone, {transfer(true, false, 0.5)}, {0.2}).wallMs, 0.510, 1e-12);
  EXPECT_NEAR(play(alone, {transfer(true, false, 0.1)}, {0.2}).wallMs, 0.200, 1e-12)
      << "a slow link: the DMA from the call's start";
}

TEST(HostModel, APinnedNonBlockingCopyLetsTheCpuRunOn) {
  // The same, from page-locked memory: the CPU issues the next op 10 us after the copy's
  // call; the DMA runs after the kernel, and the next kernel after the DMA.
  Trace trace;
  trace.ops.push_back(op("aten::mm"));
  trace.ops.push_back(op("wavecast::host_to_device"));
  trace.ops.push_back(op("aten::add"));
  const std::vector<OpCost> costs{work(), transfer(false, false), work()};
  EXPECT_DOUBLE_EQ(hostOpUs(trace.ops[1], costs[1], host()), 10);
  const auto timeline = play(trace, costs, {1.0, 0.2, 0.001});
  EXPECT_NEAR(timeline.wallMs, 0.010 + 1.0 + 0.2 + 0.001, 1e-12);
  EXPECT_NEAR(timeline.hostMs, 0.030, 1e-12);
  // Blocking (non_blocking=False): PyTorch synchronizes the stream after the copy.
  const std::vector<OpCost> blocking{work(), transfer(false, true), work()};
  EXPECT_NEAR(play(trace, blocking, {1.0, 0.2, 0.001}).wallMs, 0.010 + 1.0 + 0.2 + 0.010 + 0.001,
              1e-12);
}

TEST(HostModel, ACopyToTheHostWaitsForTheGpuThenForItsStaging) {
  // `.cpu()` of a result after a 1 ms kernel: issued at 10 us, its DMA (0.2 ms) starts when
  // the kernel ends; the CPU stages the chunks as they arrive (0.5 ms in all) and returns
  // after the last, at 1.010 + 0.510 (the call's 10 us, then the staging).
  Trace trace;
  trace.ops.push_back(op("aten::mm"));
  trace.ops.push_back(op("wavecast::device_to_host"));
  trace.ops.push_back(op("aten::add"));
  const auto toHost = [](double stagingMs) {
    return transfer(true, true, stagingMs, TransferDirection::ToHost);
  };
  const std::vector<OpCost> costs{work(), toHost(0.5), work()};
  EXPECT_DOUBLE_EQ(hostOpUs(trace.ops[1], costs[1], host()), 10 + 500);
  const auto timeline = play(trace, costs, {1.0, 0.2, 0.001});
  EXPECT_NEAR(timeline.ops[1].wallMs, 0.510, 1e-12) << "the wait for the kernel is the copy's";
  EXPECT_NEAR(timeline.wallMs, 0.010 + 1.0 + 0.510 + 0.010 + 0.001, 1e-12);
  EXPECT_NEAR(timeline.gpuMs, 1.0 + 0.2 + 0.001, 1e-12);
  // Staging quicker than the link: the DMA's end.
  EXPECT_NEAR(play(trace, {work(), toHost(0.1), work()}, {1.0, 0.2, 0.001}).wallMs,
              0.010 + 1.0 + 0.2 + 0.010 + 0.001, 1e-12);
  // `.to("cpu", non_blocking=True)` lands in page-locked memory: the CPU runs on, and the
  // next kernel follows the DMA in stream order.
  const std::vector<OpCost> async{work(), transfer(false, false, 0, TransferDirection::ToHost),
                                  work()};
  EXPECT_NEAR(play(trace, async, {1.0, 0.2, 0.001}).wallMs, 0.010 + 1.0 + 0.2 + 0.001, 1e-12);
}

TEST(HostModel, TheScriptsSynchronizeWaitsForTheGpu) {
  Trace trace;
  trace.ops.push_back(op("aten::mm"));
  trace.ops.push_back(op(std::string(kSynchronizeOp)));
  trace.ops.push_back(op("aten::add"));
  OpCost wait;
  wait.family = CostFamily::Metadata;
  wait.kernels = 0;
  const std::vector<OpCost> costs{work(), wait, work()};
  EXPECT_DOUBLE_EQ(hostOpUs(trace.ops[1], wait, host()), 0);
  // The add is issued once the mm is done, not while it runs.
  EXPECT_NEAR(play(trace, costs, {1.0, 0.0, 0.001}).wallMs, 0.010 + 1.0 + 0.010 + 0.001, 1e-12);
  trace.ops[1].name = "wavecast::unknown";
  EXPECT_NEAR(play(trace, costs, {1.0, 0.0, 0.001}).wallMs, 0.010 + 1.0 + 0.001, 1e-12);
}

TEST(HostModel, ACopyOnAStreamOfItsOwnRunsBesideTheCompute) {
  // timm's prefetcher: the batch copied on its own stream while a 1 ms kernel runs. The
  // kernel after the copy does not wait for it; a copy that outlasts the iteration
  // delays the next one's batch.
  Trace trace;
  trace.ops.push_back(op("aten::mm"));
  trace.ops.push_back(op("wavecast::host_to_device"));
  trace.ops.push_back(op("aten::add"));
  OpCost side = transfer(false, false);
  side.transfer.sideStream = true;
  const std::vector<OpCost> costs{work(), side, work()};
  const auto beside = play(trace, costs, {1.0, 0.2, 0.001});
  EXPECT_NEAR(beside.wallMs, 0.010 + 1.0 + 0.001, 1e-12);
  EXPECT_NEAR(beside.gpuMs, 1.0 + 0.001, 1e-12) << "the copy engine's time is not the SMs'";
  const auto outlasting = play(trace, costs, {0.1, 0.5, 0.001});
  EXPECT_NEAR(outlasting.wallMs, 0.020 + 0.5, 1e-12);
  EXPECT_NEAR(outlasting.ops[1].wallMs, 0.020 + 0.5 - (0.010 + 0.1 + 0.001), 1e-12);
}

TEST(HostModel, BackwardCallsAndOptimizerStepsPayTheirEntry) {
  Trace trace;
  trace.ops.push_back(op("aten::add", Phase::Forward));
  trace.ops.push_back(op("aten::mul", Phase::Backward));
  trace.ops.push_back(op("aten::mul", Phase::Backward));
  trace.ops.push_back(op("aten::_foreach_add_", Phase::Optimizer));
  trace.ops.push_back(op("aten::_foreach_mul_", Phase::Optimizer));
  // A second micro-batch: another backward call; zero_grad(set_to_none=False) is no step.
  trace.ops.push_back(op("aten::zero_", Phase::Optimizer));
  trace.ops.push_back(op("aten::add", Phase::Forward));
  trace.ops.push_back(op("aten::mul", Phase::Backward));
  const std::vector<OpCost> costs(trace.ops.size(), work());
  const auto issue = issueMs(trace, costs, host());
  const auto timeline = play(trace, costs, std::vector<double>(8, 0.0));
  EXPECT_NEAR(issue[0], 0.010, 1e-12);
  EXPECT_NEAR(issue[1], 0.110, 1e-12);
  EXPECT_NEAR(issue[2], 0.010, 1e-12);
  EXPECT_NEAR(issue[3], 0.110, 1e-12);
  EXPECT_NEAR(issue[4], 0.010, 1e-12);
  EXPECT_NEAR(issue[5], 0.010, 1e-12);
  EXPECT_NEAR(issue[7], 0.110, 1e-12);
  EXPECT_NEAR(timeline.hostMs, 0.080 + 0.300, 1e-12);
}

TEST(HostModel, WorkOnGradientsBeforeTheStepIsNoStepCall) {
  // Clipping after backward: the optimizer's work, but the step's entry is paid by the
  // step's own first op.
  Trace trace;
  trace.ops.push_back(op("aten::mul", Phase::Backward));
  for (const char* name : {"aten::_foreach_norm", "aten::_foreach_mul_"}) {
    trace.ops.push_back(op(name, Phase::Optimizer));
    trace.ops.back().gradientWork = true;
  }
  trace.ops.push_back(op("aten::_foreach_add_", Phase::Optimizer));
  const std::vector<OpCost> costs(trace.ops.size(), work());
  const auto issue = issueMs(trace, costs, host());
  EXPECT_NEAR(issue[1], 0.010, 1e-12);
  EXPECT_NEAR(issue[2], 0.010, 1e-12);
  EXPECT_NEAR(issue[3], 0.110, 1e-12) << "the step's entry";
}

} // namespace
} // namespace wavecast

namespace wavecast {
namespace {

OpRecord opWithId(int64_t id, Phase phase) {
  OpRecord record = op("aten::mm", phase);
  record.id = id;
  return record;
}

OpCost allReduce(bool async, std::optional<int64_t> waitOp = std::nullopt) {
  OpCost cost;
  cost.family = CostFamily::Collective;
  cost.kernels = 1;
  cost.collective.async = async;
  cost.collective.waitOp = waitOp;
  return cost;
}

// No host time: the clocks are the GPU's and NCCL's alone.
IterationTimeline playOnGpu(const Trace& trace, const std::vector<OpCost>& costs,
                            const std::vector<double>& gpuMs, double smShare = 0) {
  return simulateIteration(trace, costs, std::vector<double>(trace.ops.size(), 0.0), gpuMs,
                           hostWaits(trace), smShare);
}

TEST(CommStream, HiddenPartlyExposedAndSynchronous) {
  // backward: mm 10, async all-reduce A 4 (runs 10-14 beside the next mm), mm 10 (10-20),
  // async all-reduce B 8 (waits for the compute before it: 20-28), mm 5 (20-25);
  // optimizer: the step waits for A (done at 14: hidden) and B (3 ms past 25: exposed),
  // its op runs 28-29, then a synchronous all-reduce C of 2 ms (29-31), all exposed.
  Trace trace;
  std::vector<OpCost> costs;
  const Phase b = Phase::Backward, o = Phase::Optimizer;
  for (auto [phase, cost] : {std::pair{b, work()}, std::pair{b, allReduce(true)},
                             std::pair{b, work()}, std::pair{b, allReduce(true)},
                             std::pair{b, work()}, std::pair{o, work()},
                             std::pair{o, allReduce(false)}}) {
    trace.ops.push_back(opWithId(static_cast<int64_t>(trace.ops.size()), phase));
    costs.push_back(cost);
  }
  const auto timeline = playOnGpu(trace, costs, {10, 4, 10, 8, 5, 1, 2});
  EXPECT_DOUBLE_EQ(timeline.wallMs, 31);
  EXPECT_DOUBLE_EQ(timeline.commMs, 14);
  EXPECT_DOUBLE_EQ(timeline.commHiddenMs, 4 + 5);
  EXPECT_DOUBLE_EQ(timeline.gpuMs, 26);
  EXPECT_DOUBLE_EQ(timeline.gpuIdleMs, 0);
  EXPECT_DOUBLE_EQ(timeline.ops[1].wallMs, 0);
  EXPECT_DOUBLE_EQ(timeline.ops[1].commHiddenMs, 4) << "fully hidden behind backward";
  EXPECT_DOUBLE_EQ(timeline.ops[3].wallMs, 3);
  EXPECT_DOUBLE_EQ(timeline.ops[3].commHiddenMs, 5) << "partly exposed at the step";
  EXPECT_DOUBLE_EQ(timeline.ops[5].wallMs, 1);
  EXPECT_DOUBLE_EQ(timeline.ops[6].wallMs, 2);
  EXPECT_DOUBLE_EQ(timeline.ops[6].commHiddenMs, 0) << "synchronous: exposed at once";
  EXPECT_DOUBLE_EQ(sumWall(timeline), timeline.wallMs);
}

TEST(CommStream, WaitsAtItsWaitOp) {
  // mm 1 (0-1), async all-reduce 4 waited for by op 3 (1-5), mm 2 (1-3), mm 1 waits: 5-6.
  Trace trace;
  for (int64_t id = 0; id < 4; ++id)
    trace.ops.push_back(opWithId(id, Phase::Forward));
  const std::vector<OpCost> costs{work(), allReduce(true, 3), work(), work()};
  const auto timeline = playOnGpu(trace, costs, {1, 4, 2, 1});
  EXPECT_DOUBLE_EQ(timeline.wallMs, 6);
  EXPECT_DOUBLE_EQ(timeline.ops[1].wallMs, 2);
  EXPECT_DOUBLE_EQ(timeline.ops[1].commHiddenMs, 2);
  EXPECT_DOUBLE_EQ(timeline.ops[3].wallMs, 1);
}

OpCost fsdpCollective(CollectiveKind kind, std::optional<int64_t> waitOp, bool sideStream) {
  OpCost cost = allReduce(true, waitOp);
  cost.collective.kind = kind;
  cost.collective.sideStream = sideStream;
  return cost;
}

// Three blocks' forward under FSDP2, each gather (3 ms) waited for by its block's mm (10 ms),
// then a reduce-scatter (2 ms) on FSDP's stream too.
IterationTimeline playFsdpForward(bool sideStream) {
  Trace trace;
  for (int64_t id = 0; id < 7; ++id)
    trace.ops.push_back(opWithId(id, Phase::Forward));
  const auto gather = [&](int64_t waitOp) {
    return fsdpCollective(CollectiveKind::AllGather, waitOp, sideStream);
  };
  const std::vector<OpCost> costs{
      gather(1),
      work(),
      gather(3),
      work(),
      gather(5),
      work(),
      fsdpCollective(CollectiveKind::ReduceScatter, std::nullopt, sideStream)};
  return playOnGpu(trace, costs, {3, 10, 3, 10, 3, 10, 2});
}

TEST(CommStream, FsdpGathersRunBesideTheBlockBefore) {
  // On FSDP's streams a gather waits for the previous gather's result to be taken (3, 13),
  // not for the compute: the second and third run beside the first and second block
  // (3-6, 13-16). The reduce-scatter still follows the compute that made its gradients:
  // 33-35.
  const auto prefetched = playFsdpForward(true);
  EXPECT_DOUBLE_EQ(prefetched.wallMs, 35);
  EXPECT_DOUBLE_EQ(prefetched.ops[0].wallMs, 3) << "the first has nothing to hide behind";
  EXPECT_DOUBLE_EQ(prefetched.ops[2].commHiddenMs, 3);
  EXPECT_DOUBLE_EQ(prefetched.ops[4].commHiddenMs, 3);
  EXPECT_DOUBLE_EQ(prefetched.ops[6].wallMs, 2);
  EXPECT_DOUBLE_EQ(sumWall(prefetched), prefetched.wallMs);
  // On NCCL's stream after the compute, each gather is exposed in full.
  const auto serial = playFsdpForward(false);
  EXPECT_DOUBLE_EQ(serial.wallMs, 41);
  EXPECT_DOUBLE_EQ(serial.ops[2].commHiddenMs, 0);
}

TEST(CommStream, ComputeBesideACollectiveRunsOnFewerSms) {
  // An async all-reduce of 4 ms beside a 10 ms mm: with 20% of the SMs held by NCCL the
  // overlapped 4 ms of compute take 4 / 0.8 = 5 ms; the mm ends at 11.
  Trace trace;
  trace.ops.push_back(opWithId(0, Phase::Backward));
  trace.ops.push_back(opWithId(1, Phase::Backward));
  const auto timeline = playOnGpu(trace, {allReduce(true), work()}, {4, 10}, 0.2);
  EXPECT_DOUBLE_EQ(timeline.wallMs, 11);
  EXPECT_DOUBLE_EQ(timeline.ops[0].commHiddenMs, 4);
  EXPECT_DOUBLE_EQ(timeline.gpuMs, 11);
}

} // namespace
} // namespace wavecast
