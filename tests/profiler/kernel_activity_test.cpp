#include "wavecast/measured/kernel_activity.h"

#include <gtest/gtest.h>

using namespace wavecast::measured;

namespace {

KernelActivity kernel(const std::string& name, uint64_t start, uint64_t end, uint32_t correlation) {
  KernelActivity k;
  k.name = name;
  k.startNs = start;
  k.endNs = end;
  k.correlationId = correlation;
  return k;
}

std::vector<std::string> names(const std::vector<KernelActivity>& kernels) {
  std::vector<std::string> out;
  for (const KernelActivity& k : kernels)
    out.push_back(k.name);
  return out;
}

} // namespace

TEST(KernelActivity, DurationIsInMilliseconds) {
  EXPECT_DOUBLE_EQ(kernel("k", 1000, 2501000, 1).durationMs(), 2.5);
  EXPECT_DOUBLE_EQ(kernel("k", 5, 5, 1).durationMs(), 0.0);
}

TEST(MatchKernelsToOps, ExternalCorrelationWinsOverTime) {
  ActivityBatch batch;
  // "gemm" starts inside op 2's window but was launched while op 1 was pushed.
  batch.kernels = {kernel("gemm", 250, 300, 11), kernel("relu", 260, 270, 12)};
  batch.correlations = {{11, 1}, {12, 2}};
  const KernelMatch match = matchKernelsToOps(batch, {{1, 100, 200}, {2, 200, 400}});
  EXPECT_EQ(names(match.kernelsByOp.at(1)), std::vector<std::string>{"gemm"});
  EXPECT_EQ(names(match.kernelsByOp.at(2)), std::vector<std::string>{"relu"});
  EXPECT_TRUE(match.unmatched.empty());
}

TEST(MatchKernelsToOps, TimeWindowsWithoutCorrelation) {
  ActivityBatch batch;
  batch.kernels = {kernel("late", 450, 460, 3), kernel("early", 50, 60, 1),
                   kernel("b", 210, 220, 2), kernel("a2", 150, 160, 4), kernel("a1", 120, 130, 5)};
  const KernelMatch match = matchKernelsToOps(batch, {{9, 200, 400}, {7, 100, 200}});
  EXPECT_EQ(names(match.kernelsByOp.at(7)), (std::vector<std::string>{"a1", "a2"}));
  // A kernel starting after the last window closed still belongs to the last op launched.
  EXPECT_EQ(names(match.kernelsByOp.at(9)), (std::vector<std::string>{"b", "late"}));
  EXPECT_EQ(names(match.unmatched), std::vector<std::string>{"early"});
}

TEST(MatchKernelsToOps, NoWindowsLeavesUncorrelatedKernelsUnmatched) {
  ActivityBatch batch;
  batch.kernels = {kernel("x", 10, 20, 1), kernel("y", 30, 40, 2)};
  batch.correlations = {{2, 5}};
  const KernelMatch match = matchKernelsToOps(batch, {});
  EXPECT_EQ(names(match.kernelsByOp.at(5)), std::vector<std::string>{"y"});
  EXPECT_EQ(names(match.unmatched), std::vector<std::string>{"x"});
}
