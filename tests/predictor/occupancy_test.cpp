// Expected values derived by hand from CUDA's occupancy rules (CUDA Occupancy
// Calculator / cuda_occupancy.h), per compute capability:
//   warps per block   = ceil(threads / 32)
//   by warps          = maxWarpsPerSm / warpsPerBlock
//   registers per warp = roundUp(regs * 32, 256)
//   by registers      = floor(registersPerSm / granularity / regsPerWarp) * granularity
//                       / warpsPerBlock   (granularity: 2 sub-partitions on 6.0, else 4)
//   shared per block  = roundUp(shared + reserved(1 KiB on CC >= 8.0), unit(256; 128 on >= 8.0))
//   by shared memory  = maxSharedPerSm / sharedPerBlock
//   blocks            = min(maxBlocksPerSm, by warps, by registers, by shared memory)
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/occupancy.h"

#include <gtest/gtest.h>

namespace wavecast {
namespace {

const SmLimits& limitsOf(const std::string& gpu) {
  static const GpuDatabase db = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  const DeviceSpec* spec = db.find(gpu);
  if (!spec)
    throw std::runtime_error("no GPU " + gpu);
  return spec->limits;
}

Occupancy occupancy(const std::string& gpu, int threads, int registers, int shared) {
  return computeOccupancy(limitsOf(gpu), {threads, registers, shared});
}

TEST(Occupancy, ComputeCapability60) { // P100
  // 256 threads x 32 regs: 8 warps/block; 64/8 = 8 by warps; 1024 regs/warp ->
  // 32768/1024 = 32 warps per half -> 64 warps -> 8 blocks. 100 %.
  auto o = occupancy("P100", 256, 32, 0);
  EXPECT_EQ(o.blocksPerSm, 8);
  EXPECT_DOUBLE_EQ(o.occupancy, 1.0);
  // 128 threads, 64 regs, 20000 B shared: round to 20224 -> 65536/20224 = 3 blocks.
  o = occupancy("P100", 128, 64, 20000);
  EXPECT_EQ(o.blocksPerSm, 3);
  EXPECT_EQ(o.limiter, "shared memory");
  EXPECT_DOUBLE_EQ(o.occupancy, 12.0 / 64.0);
  // 32 threads x 192 regs: 6144 regs/warp; CC 6.0 has two sub-partitions:
  // floor(32768/6144) = 5 -> 10 warps -> 10 blocks (granularity 4 would give 8).
  o = occupancy("P100", 32, 192, 0);
  EXPECT_EQ(o.blocksPerSm, 10);
  EXPECT_EQ(o.limiter, "registers");
  // The same kernel on CC 6.1 (P4, four sub-partitions): floor(16384/6144) = 2 -> 8.
  EXPECT_EQ(occupancy("P4", 32, 192, 0).blocksPerSm, 8);
}

TEST(Occupancy, ComputeCapability70) { // V100
  // 1024 threads x 64 regs: 2048 regs/warp -> 8 warps per quarter -> 32 warps -> 1 block.
  auto o = occupancy("V100", 1024, 64, 0);
  EXPECT_EQ(o.blocksPerSm, 1);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.5);
  // 256 threads, 48 KiB shared: 96 KiB / 48 KiB = 2 blocks, using the 96 KiB carveout.
  o = occupancy("V100", 256, 32, 49152);
  EXPECT_EQ(o.blocksPerSm, 2);
  EXPECT_EQ(o.sharedMemoryCarveoutBytes, 96 * 1024);
  // 256 threads, 2 KiB shared: 8 blocks by warps; 8 x 2 KiB fit the 16 KiB carveout.
  o = occupancy("V100", 256, 32, 2048);
  EXPECT_EQ(o.blocksPerSm, 8);
  EXPECT_EQ(o.sharedMemoryCarveoutBytes, 16 * 1024);
  // 128 threads, 10000 B shared: rounds to 10240 -> 98304/10240 = 9 blocks.
  EXPECT_EQ(occupancy("V100", 128, 16, 10000).blocksPerSm, 9);
}

TEST(Occupancy, ComputeCapability75) { // T4: 32 warps, 16 blocks, 64 KiB
  auto o = occupancy("T4", 256, 64, 0);
  EXPECT_EQ(o.blocksPerSm, 4);
  EXPECT_DOUBLE_EQ(o.occupancy, 1.0);
  o = occupancy("T4", 32, 32, 0); // 32 blocks by warps, 16 by the block limit
  EXPECT_EQ(o.blocksPerSm, 16);
  EXPECT_EQ(o.limiter, "blocks");
  EXPECT_DOUBLE_EQ(o.occupancy, 0.5);
  // 255 regs -> 8160 -> 8192 per warp -> 2 warps per quarter -> 8 warps -> 2 blocks of 4.
  EXPECT_EQ(occupancy("T4", 128, 255, 0).blocksPerSm, 2);
  // Turing's carveouts are 32 or 64 KiB: 4 blocks x 9 KiB need the 64 KiB one.
  o = occupancy("T4", 256, 32, 9 * 1024);
  EXPECT_EQ(o.blocksPerSm, 4);
  EXPECT_EQ(o.sharedMemoryCarveoutBytes, 64 * 1024);
}

TEST(Occupancy, ComputeCapability80NeverZeroForLaunchableKernels) { // A100
  // No shared memory still reserves 1 KiB per block: 164 blocks by shared memory,
  // 16 by warps.
  auto o = occupancy("A100", 128, 32, 0);
  EXPECT_EQ(o.blocksPerSm, 16);
  EXPECT_DOUBLE_EQ(o.occupancy, 1.0);
  // CUTLASS-like: 256 threads, 128 regs, 32 KiB: 4096 regs/warp -> 16 warps -> 2 blocks;
  // shared (32768 + 1024) -> 167936 / 33792 = 4.
  o = occupancy("A100", 256, 128, 32768);
  EXPECT_EQ(o.blocksPerSm, 2);
  EXPECT_EQ(o.limiter, "registers");
  // sgemm-like 96 KiB: (98304 + 1024) -> one block, carveout 100 KiB.
  o = occupancy("A100", 128, 64, 98304);
  EXPECT_EQ(o.blocksPerSm, 1);
  EXPECT_EQ(o.sharedMemoryCarveoutBytes, 100 * 1024);
  // The per-block maximum (163 KiB) plus the reserved KiB fills the SM exactly: 1 block.
  EXPECT_EQ(occupancy("A100", 256, 32, 166912).blocksPerSm, 1);
  // One byte more cannot launch, and says why.
  o = occupancy("A100", 256, 32, 166913);
  EXPECT_EQ(o.blocksPerSm, 0);
  ASSERT_TRUE(o.problem.has_value());
  EXPECT_EQ(o.problem->limit, LaunchLimit::SharedMemoryPerBlock);
  EXPECT_EQ(o.problem->requested, 166913);
  EXPECT_EQ(o.problem->allowed, 166912);
  EXPECT_EQ(occupancy("A100", 256, 256, 0).blocksPerSm, 0);
  o = occupancy("A100", 1025, 32, 0);
  EXPECT_EQ(o.blocksPerSm, 0);
  ASSERT_TRUE(o.problem.has_value());
  EXPECT_EQ(o.problem->limit, LaunchLimit::ThreadsPerBlock);
  EXPECT_EQ(o.problem->allowed, 1024);
}

TEST(Occupancy, ComputeCapability86) { // A10: 48 warps, 16 blocks, 100 KiB
  auto o = occupancy("A10", 256, 32, 0);
  EXPECT_EQ(o.blocksPerSm, 6);
  EXPECT_DOUBLE_EQ(o.occupancy, 1.0);
  o = occupancy("A10", 1024, 32, 0);
  EXPECT_EQ(o.blocksPerSm, 1);
  EXPECT_NEAR(o.occupancy, 32.0 / 48.0, 1e-12);
  // 48 KiB + 1 KiB reserved = 50176 -> 102400 / 50176 = 2.
  EXPECT_EQ(occupancy("A10", 128, 32, 49152).blocksPerSm, 2);
  EXPECT_EQ(occupancy("A10", 64, 32, 0).blocksPerSm, 16);
}

TEST(Occupancy, ComputeCapability89) { // L4: 24 blocks per SM
  auto o = occupancy("L4", 32, 16, 0);
  EXPECT_EQ(o.blocksPerSm, 24);
  EXPECT_EQ(o.limiter, "blocks");
  EXPECT_DOUBLE_EQ(o.occupancy, 0.5);
  EXPECT_EQ(occupancy("L4", 64, 32, 0).blocksPerSm, 24);
  EXPECT_EQ(occupancy("L4", 256, 32, 0).blocksPerSm, 6);
}

TEST(Occupancy, ComputeCapability90) { // H100
  // Warp-specialised GEMM: 384 threads, 168 regs (5376/warp -> 3 per quarter -> 12 warps
  // -> 1 block), 200 KiB shared (+1 KiB fits 228 KiB once).
  auto o = occupancy("H100", 384, 168, 204800);
  EXPECT_EQ(o.blocksPerSm, 1);
  EXPECT_DOUBLE_EQ(o.occupancy, 12.0 / 64.0);
  EXPECT_EQ(o.sharedMemoryCarveoutBytes, 228 * 1024);
  EXPECT_EQ(occupancy("H100", 128, 32, 0).blocksPerSm, 16);
  // 256 threads x 64 regs -> 4 by registers; 16 KiB + 1 KiB -> 13 by shared memory.
  o = occupancy("H100", 256, 64, 16384);
  EXPECT_EQ(o.blocksPerSm, 4);
  EXPECT_EQ(o.limiter, "registers");
  EXPECT_EQ(o.sharedMemoryCarveoutBytes, 100 * 1024);
}

TEST(Occupancy, EveryShippedGpuRunsACommonKernel) {
  const GpuDatabase db = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  for (const auto& gpu : db.all()) {
    const Occupancy o = computeOccupancy(gpu.limits, {256, 64, 16384});
    EXPECT_GT(o.blocksPerSm, 0) << gpu.id;
  }
}

} // namespace
} // namespace wavecast
