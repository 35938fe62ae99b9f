// Decodes activity buffers built from the toolkit's own CUPTI record structs, as
// CUPTI hands them to the buffer-completed callback. Needs no GPU.
#include "wavecast/measured/cupti_session.h"

#include <cstring>
#include <cupti.h>
#include <gtest/gtest.h>
#include <vector>

using namespace wavecast::measured;

namespace {

class ActivityBuffer {
public:
  template <typename Record> void add(const Record& record) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(Record));
    std::memcpy(bytes_.data() + at, &record, sizeof(Record));
  }
  ActivityBatch decode() {
    ActivityBatch batch;
    decodeActivityBuffer(bytes_.data(), bytes_.size(), batch);
    return batch;
  }

private:
  std::vector<uint8_t> bytes_;
};

#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
#else
using KernelRecord = CUpti_ActivityKernel9;
#endif

KernelRecord kernelRecord(CUpti_ActivityKind kind, const char* name, uint32_t correlation) {
  KernelRecord k{};
  k.kind = kind;
  k.name = name;
  k.gridX = 128;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 64;
  k.staticSharedMemory = 4096;
  k.dynamicSharedMemory = 49152;
  k.start = 1'000'000;
  k.end = 1'250'000;
  k.correlationId = correlation;
  k.deviceId = 0;
  k.streamId = 7;
  return k;
}

} // namespace

TEST(DecodeActivityBuffer, KernelAndCorrelationRecords) {
  ActivityBuffer buffer;
  buffer.add(kernelRecord(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "volta_sgemm_128x64_nn", 41));
  CUpti_ActivityExternalCorrelation link{};
  link.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  link.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  link.externalId = 17;
  link.correlationId = 41;
  buffer.add(link);
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME; // skipped
  api.correlationId = 41;
  buffer.add(api);
  buffer.add(kernelRecord(CUPTI_ACTIVITY_KIND_KERNEL, "elementwise_kernel", 42));

  const ActivityBatch batch = buffer.decode();
  ASSERT_EQ(batch.kernels.size(), 2u);
  const KernelActivity& gemm = batch.kernels[0];
  EXPECT_EQ(gemm.name, "volta_sgemm_128x64_nn");
  EXPECT_EQ(gemm.grid, (std::array<int64_t, 3>{128, 2, 1}));
  EXPECT_EQ(gemm.block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(gemm.registersPerThread, 64);
  EXPECT_EQ(gemm.staticSharedBytes, 4096);
  EXPECT_EQ(gemm.dynamicSharedBytes, 49152);
  EXPECT_DOUBLE_EQ(gemm.durationMs(), 0.25);
  EXPECT_EQ(gemm.correlationId, 41u);
  EXPECT_EQ(gemm.streamId, 7u);
  EXPECT_EQ(batch.kernels[1].name, "elementwise_kernel");
  ASSERT_EQ(batch.correlations.size(), 1u);
  EXPECT_EQ(batch.correlations[0].correlationId, 41u);
  EXPECT_EQ(batch.correlations[0].externalId, 17u);

  const KernelMatch match = matchKernelsToOps(batch, {{16, 0, 500'000}});
  EXPECT_EQ(match.kernelsByOp.at(17).size(), 1u);
  EXPECT_EQ(match.kernelsByOp.at(16).size(), 1u);
}

TEST(DecodeActivityBuffer, EmptyBufferGivesNothing) {
  ActivityBuffer buffer;
  const ActivityBatch batch = buffer.decode();
  EXPECT_TRUE(batch.kernels.empty());
  EXPECT_TRUE(batch.correlations.empty());
}

TEST(DescribeCuptiFailure, InsufficientPrivilegesNamesTheFix) {
  const std::string message =
      describeCuptiFailure("cuptiActivityEnable", CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
  EXPECT_NE(message.find("cuptiActivityEnable failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
            std::string::npos);
  EXPECT_NE(message.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos);
  EXPECT_NE(message.find("--cap-add SYS_ADMIN"), std::string::npos);
}

TEST(DescribeCuptiFailure, MultipleSubscribers) {
  const std::string message =
      describeCuptiFailure("cuptiActivityEnable", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_NE(message.find("Another profiler"), std::string::npos);
}
