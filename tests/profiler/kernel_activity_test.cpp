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

TEST(MatchKernelsToOps, OnlyTheExternalCorrelationCounts) {
  ActivityBatch batch;
  // "gemm" runs long after op 1's launch, interleaved with op 2's kernels: the
  // correlation, not the time, says op 1 launched it.
  batch.kernels = {kernel("gemm", 250, 300, 11), kernel("relu", 260, 270, 12),
                   kernel("bias", 240, 245, 13)};
  batch.correlations = {{11, 1}, {12, 2}, {13, 1}};
  const KernelMatch match = matchKernelsToOps(batch);
  EXPECT_EQ(names(match.kernelsByOp.at(1)), (std::vector<std::string>{"bias", "gemm"}))
      << "in start order";
  EXPECT_EQ(names(match.kernelsByOp.at(2)), std::vector<std::string>{"relu"});
  EXPECT_TRUE(match.unmatched.empty());
}

TEST(MatchKernelsToOps, KernelsLaunchedOutsideAnyOpStayUnmatched) {
  ActivityBatch batch;
  batch.kernels = {kernel("x", 10, 20, 1), kernel("y", 30, 40, 2), kernel("z", 50, 60, 3)};
  batch.correlations = {{2, 5}};
  const KernelMatch match = matchKernelsToOps(batch);
  EXPECT_EQ(names(match.kernelsByOp.at(5)), std::vector<std::string>{"y"});
  EXPECT_EQ(names(match.unmatched), (std::vector<std::string>{"x", "z"}));
}

TEST(MatchKernelsToOps, RepeatsOfAnOpKeepTheirOwnIds) {
  // The worker pushes (repeat << 32) | op index: the same op in two iterations.
  ActivityBatch batch;
  batch.kernels = {kernel("a", 10, 20, 1), kernel("a", 110, 121, 2)};
  batch.correlations = {{1, 7}, {2, (uint64_t{1} << 32) | 7}};
  const KernelMatch match = matchKernelsToOps(batch);
  ASSERT_EQ(match.kernelsByOp.size(), 2u);
  EXPECT_DOUBLE_EQ(match.kernelsByOp.at((uint64_t{1} << 32) | 7)[0].durationMs(), 11e-6);
}

TEST(ActivityKind, Names) {
  EXPECT_STREQ(toString(ActivityKind::Kernel), "kernel");
  EXPECT_STREQ(toString(ActivityKind::Memcpy), "memcpy");
  EXPECT_STREQ(toString(ActivityKind::Memset), "memset");
}
