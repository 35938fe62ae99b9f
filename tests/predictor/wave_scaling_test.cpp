#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/wave_scaling.h"

#include <cmath>
#include <gtest/gtest.h>

namespace wavecast {
namespace {

const GpuDatabase& db() {
  static const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  return database;
}

KernelRecord kernel(int64_t blocks, int64_t threads, int registers, int64_t shared, double ms) {
  KernelRecord k;
  k.name = "synthetic";
  k.grid = {blocks, 1, 1};
  k.block = {threads, 1, 1};
  k.registersPerThread = registers;
  k.staticSharedBytes = shared;
  k.durationMs = ms;
  return k;
}

TEST(WaveScaling, GammaFollowsEquation3) {
  EXPECT_DOUBLE_EQ(waveScalingGamma(0, 10), 1.0);
  EXPECT_DOUBLE_EQ(waveScalingGamma(5, 10), 0.75);
  EXPECT_DOUBLE_EQ(waveScalingGamma(10, 10), 0.5);
  EXPECT_DOUBLE_EQ(waveScalingGamma(20, 10), 0.25);
  EXPECT_DOUBLE_EQ(waveScalingGamma(-1, 10), 1.0) << "unknown intensity: memory bound";
}

TEST(WaveScaling, ManyWavesMemoryBound) {
  // V100-PCIe -> A100-PCIe, 10000 blocks of 256 threads x 32 regs: 8 blocks/SM on both.
  // W_o = 640, W_d = 864; ceil: 16 and 12 waves.
  // gamma 1: T_d = 12 * (900/1555 * 864/640) / 16 * 1 ms.
  const auto& origin = *db().find("V100-PCIE-32GB");
  const auto& destination = *db().find("A100-PCIE-40GB");
  const auto scaled = waveScaleKernel(kernel(10000, 256, 32, 0, 1.0), origin, destination, 1.0);
  EXPECT_DOUBLE_EQ(scaled.originWaveSize, 640);
  EXPECT_DOUBLE_EQ(scaled.destinationWaveSize, 864);
  EXPECT_NEAR(scaled.timeMs, 12.0 * (900.0 / 1555.0 * 864.0 / 640.0) / 16.0, 1e-12);
  // gamma 0: only waves and clocks: 12/16 * 1380/1410.
  const auto compute = waveScaleKernel(kernel(10000, 256, 32, 0, 1.0), origin, destination, 0.0);
  EXPECT_NEAR(compute.timeMs, 12.0 / 16.0 * 1380.0 / 1410.0, 1e-12);
  EXPECT_FALSE(scaled.problem.has_value());
}

TEST(WaveScaling, SameGpuReturnsTheMeasurement) {
  const auto& t4 = *db().find("T4");
  for (const double gamma : {0.0, 0.3, 1.0}) {
    EXPECT_DOUBLE_EQ(waveScaleKernel(kernel(12345, 128, 40, 4096, 0.37), t4, t4, gamma).timeMs,
                     0.37);
  }
}

TEST(WaveScaling, PartialWaveUsesTheBlocksInFlight) {
  // 10 blocks: one partial wave on both GPUs, the same 10 blocks in flight; a memory-bound
  // kernel scales by bandwidth alone.
  const auto& origin = *db().find("V100-PCIE-32GB");
  const auto& destination = *db().find("A100-PCIE-40GB");
  const auto scaled = waveScaleKernel(kernel(10, 256, 32, 0, 0.01), origin, destination, 1.0);
  EXPECT_NEAR(scaled.timeMs, 0.01 * 900.0 / 1555.0, 1e-15);
}

TEST(WaveScaling, AmpereAndHopperNeverDivideByZero) {
  // Habitat's bundled calculator returned 0 blocks for CC >= 8 and divided by zero.
  const auto& origin = *db().find("T4");
  for (const char* id : {"A100-SXM4-80GB", "H100-SXM", "L4", "RTX-4090"}) {
    const auto scaled =
        waveScaleKernel(kernel(5000, 256, 64, 16384, 2.0), origin, *db().find(id), 0.5);
    EXPECT_TRUE(std::isfinite(scaled.timeMs)) << id;
    EXPECT_GT(scaled.timeMs, 0) << id;
    EXPECT_LT(scaled.timeMs, 2.0) << id << " is faster than a T4";
  }
}

TEST(WaveScaling, KernelTooBigForTheDestinationAssumesOneBlockPerSm) {
  // 96 KiB of shared memory per block launches on a V100 but not on a T4 (64 KiB).
  const auto scaled =
      waveScaleKernel(kernel(800, 256, 32, 98304, 1.0), *db().find("V100"), *db().find("T4"), 0.5);
  EXPECT_DOUBLE_EQ(scaled.destinationWaveSize, 40);
  ASSERT_TRUE(scaled.problem.has_value());
  EXPECT_EQ(scaled.problem->gpu, "T4");
  EXPECT_EQ(scaled.problem->problem.limit, LaunchLimit::SharedMemoryPerBlock);
  EXPECT_EQ(scaled.problem->problem.requested, 98304);
  EXPECT_EQ(scaled.problem->problem.allowed, 65536);
  EXPECT_GT(scaled.timeMs, 1.0);
}

TEST(WaveScaling, CopiesScaleWithBandwidthAndHostCopiesNot) {
  // V100-PCIe (900 GB/s) -> A100-PCIe-40GB (1555 GB/s).
  const auto& origin = *db().find("V100-PCIE-32GB");
  const auto& destination = *db().find("A100-PCIE-40GB");
  KernelRecord copy;
  copy.kind = GpuActivityKind::Memcpy;
  copy.name = "Memcpy DtoD";
  copy.durationMs = 1.0;
  EXPECT_NEAR(waveScaleKernel(copy, origin, destination, 0.5).timeMs, 900.0 / 1555.0, 1e-9)
      << "γ does not apply: a copy only streams memory";
  KernelRecord fill = copy;
  fill.kind = GpuActivityKind::Memset;
  fill.name = "Memset";
  EXPECT_NEAR(waveScaleKernel(fill, origin, destination, 1.0).timeMs, 900.0 / 1555.0, 1e-9);
  KernelRecord upload = copy;
  upload.name = "Memcpy HtoD";
  EXPECT_DOUBLE_EQ(waveScaleKernel(upload, origin, destination, 1.0).timeMs, 1.0);
}

} // namespace
} // namespace wavecast
