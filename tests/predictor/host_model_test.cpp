#include "wavecast/predictor/host_model.h"

#include <gtest/gtest.h>
#include <numeric>

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
  return simulateIteration(trace, costs, issueMs(trace, costs, host()), gpuMs);
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
  EXPECT_TRUE(synchronizesHost(op("aten::_local_scalar_dense")));
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

} // namespace
} // namespace wavecast
