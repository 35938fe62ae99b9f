// Decodes activity buffers built from the toolkit's own CUPTI record structs, as CUPTI
// hands them to the buffer-completed callback, and drives a CUPTI session through a
// fake function table for every failure a user can meet. Needs no GPU.
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
    decodeActivityBuffer(processCupti(), bytes_.data(), bytes_.size(), batch);
    return batch;
  }

private:
  std::vector<uint8_t> bytes_;
};

#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
#else
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
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

CUpti_ActivityExternalCorrelation link(uint32_t correlation, uint64_t external) {
  CUpti_ActivityExternalCorrelation record{};
  record.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  record.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  record.externalId = external;
  record.correlationId = correlation;
  return record;
}

} // namespace

TEST(DecodeActivityBuffer, KernelCopyFillAndCorrelationRecords) {
  ActivityBuffer buffer;
  // As CUPTI writes them: the external correlation before the API record it annotates,
  // then the API record (skipped), then the GPU work it launched.
  buffer.add(link(41, 17));
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.correlationId = 41;
  buffer.add(api);
  buffer.add(kernelRecord(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "sm90_xmma_gemm_f32f32", 41));
  CUpti_ActivityAPI driver{};
  driver.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  driver.correlationId = 42;
  buffer.add(driver);
  buffer.add(kernelRecord(CUPTI_ACTIVITY_KIND_KERNEL, "elementwise_kernel", 42));
  MemcpyRecord copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  copy.bytes = 1 << 20;
  copy.start = 2'000'000;
  copy.end = 2'004'000;
  copy.correlationId = 43;
  buffer.add(copy);
  CUpti_ActivityMemset4 fill{};
  fill.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  fill.bytes = 4096;
  fill.start = 3'000'000;
  fill.end = 3'001'500;
  fill.correlationId = 44;
  buffer.add(fill);
  buffer.add(link(44, 18));

  const ActivityBatch batch = buffer.decode();
  ASSERT_EQ(batch.kernels.size(), 4u);
  const KernelActivity& gemm = batch.kernels[0];
  EXPECT_EQ(gemm.kind, ActivityKind::Kernel);
  EXPECT_EQ(gemm.name, "sm90_xmma_gemm_f32f32");
  EXPECT_EQ(gemm.grid, (std::array<int64_t, 3>{128, 2, 1}));
  EXPECT_EQ(gemm.block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(gemm.registersPerThread, 64);
  EXPECT_EQ(gemm.staticSharedBytes, 4096);
  EXPECT_EQ(gemm.dynamicSharedBytes, 49152);
  EXPECT_DOUBLE_EQ(gemm.durationMs(), 0.25);
  EXPECT_EQ(gemm.correlationId, 41u);
  EXPECT_EQ(gemm.streamId, 7u);
  EXPECT_EQ(batch.kernels[1].name, "elementwise_kernel");
  EXPECT_EQ(batch.kernels[2].kind, ActivityKind::Memcpy);
  EXPECT_EQ(batch.kernels[2].name, "Memcpy DtoD");
  EXPECT_EQ(batch.kernels[2].bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(batch.kernels[2].durationMs(), 0.004);
  EXPECT_EQ(batch.kernels[3].kind, ActivityKind::Memset);
  EXPECT_EQ(batch.kernels[3].bytes, 4096);
  ASSERT_EQ(batch.correlations.size(), 2u);
  EXPECT_EQ(batch.correlations[0].correlationId, 41u);
  EXPECT_EQ(batch.correlations[0].externalId, 17u);

  const KernelMatch match = matchKernelsToOps(batch);
  EXPECT_EQ(match.kernelsByOp.at(17).size(), 1u);
  EXPECT_EQ(match.kernelsByOp.at(18).size(), 1u) << "the fill";
  EXPECT_EQ(match.unmatched.size(), 2u) << "launched while no op was pushed";
}

TEST(DecodeActivityBuffer, EmptyBufferGivesNothing) {
  ActivityBuffer buffer;
  const ActivityBatch batch = buffer.decode();
  EXPECT_TRUE(batch.kernels.empty());
  EXPECT_TRUE(batch.correlations.empty());
}

// --- A CUPTI session against fake functions ------------------------------------------

namespace fake {
int enabled = 0;
int enableCalls = 0;
int finalized = 0;
std::vector<uint64_t> pushed;
CUptiResult ok() {
  return CUPTI_SUCCESS;
}
CUptiResult resultString(CUptiResult result, const char** text) {
  *text = result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
              ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
          : result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"
                                                          : "CUPTI_ERROR_OTHER";
  return CUPTI_SUCCESS;
}
CUptiResult registerOk(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) {
  return CUPTI_SUCCESS;
}
CUptiResult registerHeld(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) {
  return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
}
CUptiResult enableOk(CUpti_ActivityKind) {
  ++enabled;
  return CUPTI_SUCCESS;
}
CUptiResult enableNoDevice(CUpti_ActivityKind) {
  return CUPTI_ERROR_NOT_INITIALIZED;
}
// The third kind asked for is refused: the two enabled before must be disabled again.
CUptiResult enableNoPrivileges(CUpti_ActivityKind) {
  if (++enableCalls > 2)
    return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  ++enabled;
  return CUPTI_SUCCESS;
}
CUptiResult disable(CUpti_ActivityKind) {
  --enabled;
  return CUPTI_SUCCESS;
}
CUptiResult flush(uint32_t) {
  return CUPTI_SUCCESS;
}
CUptiResult finalize() {
  ++finalized;
  return CUPTI_SUCCESS;
}
CUptiResult push(CUpti_ExternalCorrelationKind, uint64_t id) {
  pushed.push_back(id);
  return CUPTI_SUCCESS;
}
CUptiResult pop(CUpti_ExternalCorrelationKind, uint64_t* id) {
  *id = pushed.empty() ? 0 : pushed.back();
  return pushed.empty() ? CUPTI_ERROR_QUEUE_EMPTY : CUPTI_SUCCESS;
}

CuptiApi api() {
  enabled = enableCalls = finalized = 0;
  pushed.clear();
  CuptiApi table;
  table.getResultString = resultString;
  table.registerCallbacks = registerOk;
  table.enable = enableOk;
  table.disable = disable;
  table.flushAll = flush;
  table.finalize = finalize;
  table.pushExternalCorrelationId = push;
  table.popExternalCorrelationId = pop;
  return table;
}
} // namespace fake

std::string failure(const CuptiApi& api) {
  try {
    CuptiSession session(api);
  } catch (const CuptiError& error) {
    return error.what();
  }
  return "";
}

TEST(CuptiSession, EnablesApiRecordsSoCorrelationsExistAndCleansUp) {
  const CuptiApi api = fake::api();
  {
    CuptiSession session(api);
    EXPECT_EQ(fake::enabled, 6) << "runtime, driver, external correlation, kernels, copies, fills";
    session.pushOp(5);
    session.popOp();
    EXPECT_EQ(fake::pushed, std::vector<uint64_t>{5});
    EXPECT_TRUE(session.collect().kernels.empty());
  }
  EXPECT_EQ(fake::enabled, 0);
  EXPECT_EQ(fake::finalized, 1) << "finalized, so the next trace can subscribe";
  CuptiSession again(api); // a second session after the first ended
}

TEST(CuptiSession, NoCuptiLibrarySaysWhereItLookedAndWhatToInstall) {
  const CuptiApi missing = loadCupti({"/nonexistent/libcupti.so.13"});
  const std::string message = failure(missing);
  EXPECT_NE(message.find("cannot load CUPTI (tried /nonexistent/libcupti.so.13)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("nvidia-cuda-cupti"), std::string::npos) << message;
  EXPECT_NE(message.find("shape mode"), std::string::npos) << message;
}

TEST(CuptiSession, ALibraryThatIsNotCuptiIsRefused) {
  const CuptiApi wrong = loadCupti({"libm.so.6"});
  EXPECT_NE(wrong.loadError.find("the loaded CUPTI lacks cuptiGetResultString"), std::string::npos)
      << wrong.loadError;
}

TEST(CuptiSession, NoGpuOrDriver) {
  CuptiApi api = fake::api();
  api.enable = fake::enableNoDevice;
  const std::string message = failure(api);
  EXPECT_NE(message.find("No usable CUDA GPU or driver"), std::string::npos) << message;
  EXPECT_NE(message.find("nvidia-smi"), std::string::npos) << message;
}

TEST(CuptiSession, AnotherProfilerHoldsCupti) {
  CuptiApi api = fake::api();
  api.registerCallbacks = fake::registerHeld;
  const std::string message = failure(api);
  EXPECT_NE(message.find("cuptiActivityRegisterCallbacks failed: "
                         "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("Another profiler (Nsight Systems/Compute"), std::string::npos) << message;
  EXPECT_EQ(fake::finalized, 0) << "never detach CUPTI from under the other profiler";
  api.registerCallbacks = fake::registerOk;
  CuptiSession later(api); // the failed attempt released the process's one session
}

TEST(CuptiSession, CountersNotPermitted) {
  CuptiApi api = fake::api();
  api.enable = fake::enableNoPrivileges;
  const std::string message = failure(api);
  EXPECT_NE(message.find("cuptiActivityEnable failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos) << message;
  EXPECT_NE(message.find("--cap-add SYS_ADMIN"), std::string::npos) << message;
  EXPECT_EQ(fake::enableCalls, 3);
  EXPECT_EQ(fake::enabled, 0) << "the two kinds enabled before the refusal were disabled again";
  EXPECT_EQ(fake::finalized, 1);
}

TEST(CuptiSession, OneSessionPerProcess) {
  const CuptiApi api = fake::api();
  CuptiSession first(api);
  const std::string message = failure(api);
  EXPECT_NE(message.find("already running"), std::string::npos) << message;
}

TEST(DescribeCuptiFailure, UnknownCodesStillNameTheCall) {
  const CuptiApi api = fake::api();
  EXPECT_EQ(describeCuptiFailure(loadCupti({"/nonexistent"}), "cuptiGetTimestamp", 999),
            "cuptiGetTimestamp failed: CUPTI error 999.");
  EXPECT_EQ(describeCuptiFailure(api, "cuptiActivityFlushAll", CUPTI_ERROR_UNKNOWN),
            "cuptiActivityFlushAll failed: CUPTI_ERROR_OTHER.");
}
