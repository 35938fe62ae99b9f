#include "wavecast/measured/cupti_session.h"

#include <atomic>
#include <cstdlib>
#include <cupti.h>
#include <mutex>

namespace wavecast::measured {
namespace {

// The kernel record layout of the CUPTI this is compiled against; CUPTI writes the
// newest version of its own release.
#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
#elif CUPTI_API_VERSION >= 18
using KernelRecord = CUpti_ActivityKernel9;
#else
#error "wavecast's measured mode needs CUPTI from CUDA 12 or newer"
#endif

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kBufferAlignment = 8;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

void check(CUptiResult result, const char* call) {
  if (result != CUPTI_SUCCESS)
    throw CuptiError(describeCuptiFailure(call, result), result);
}

// CUPTI's buffer callbacks take no user pointer, so the batch they fill is
// process-wide; CuptiSession guarantees a single owner at a time.
struct Collector {
  std::mutex mutex;
  ActivityBatch batch;
  std::atomic<bool> active{false};
};

Collector& collector() {
  static Collector instance;
  return instance;
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxNumRecords = 0; // as many as fit
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t streamId, uint8_t* buffer, size_t,
                              size_t validSize) {
  Collector& c = collector();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    decodeActivityBuffer(buffer, validSize, c.batch);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, streamId, &dropped) == CUPTI_SUCCESS)
      c.batch.droppedRecords += dropped;
  }
  std::free(buffer);
}

} // namespace

std::string describeCuptiFailure(const char* call, int code) {
  const char* name = "unknown CUPTI error";
  cuptiGetResultString(static_cast<CUptiResult>(code), &name);
  std::string message = std::string(call) + " failed: " + name;
  switch (code) {
  case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    return message +
           ". This user may not read GPU performance counters. Allow it with the "
           "nvidia module option NVreg_RestrictProfilingToAdminUsers=0 (a file in "
           "/etc/modprobe.d/ with `options nvidia NVreg_RestrictProfilingToAdminUsers=0`, "
           "then reboot), or run wavecast as root / with CAP_SYS_ADMIN (containers: "
           "--cap-add SYS_ADMIN).";
  case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    return message + ". Another profiler (Nsight Systems/Compute, torch.profiler, another "
                     "CUPTI client) is attached to the worker; stop it and trace again.";
  case CUPTI_ERROR_INVALID_DEVICE:
  case CUPTI_ERROR_NOT_INITIALIZED:
    return message + ". No usable CUDA GPU or driver was found; use shape mode.";
  default:
    return message + ".";
  }
}

void decodeActivityBuffer(uint8_t* buffer, size_t validBytes, ActivityBatch& into) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, validBytes, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const KernelRecord*>(record);
      KernelActivity kernel;
      kernel.name = k->name ? k->name : "";
      kernel.grid = {k->gridX, k->gridY, k->gridZ};
      kernel.block = {k->blockX, k->blockY, k->blockZ};
      kernel.registersPerThread = k->registersPerThread;
      kernel.staticSharedBytes = k->staticSharedMemory;
      kernel.dynamicSharedBytes = k->dynamicSharedMemory;
      kernel.startNs = k->start;
      kernel.endNs = k->end;
      kernel.correlationId = k->correlationId;
      kernel.deviceId = k->deviceId;
      kernel.streamId = k->streamId;
      into.kernels.push_back(std::move(kernel));
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* link = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      into.correlations.push_back({link->correlationId, link->externalId});
      break;
    }
    default:
      break;
    }
  }
}

uint64_t cuptiTimestamp() {
  uint64_t now = 0;
  check(cuptiGetTimestamp(&now), "cuptiGetTimestamp");
  return now;
}

CuptiSession::CuptiSession() {
  Collector& c = collector();
  if (c.active.exchange(true))
    throw CuptiError("a CUPTI session is already running in this process; finish it first",
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  try {
    check(cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted),
          "cuptiActivityRegisterCallbacks");
    for (const CUpti_ActivityKind kind : kKinds)
      check(cuptiActivityEnable(kind), "cuptiActivityEnable");
  } catch (...) {
    cuptiFinalize();
    c.active = false;
    throw;
  }
}

CuptiSession::~CuptiSession() {
  for (const CUpti_ActivityKind kind : kKinds)
    cuptiActivityDisable(kind);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cuptiFinalize(); // detaches, so the next session can subscribe again
  Collector& c = collector();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.batch = {};
  }
  c.active = false;
}

void CuptiSession::pushOp(uint64_t opId) {
  check(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, opId),
        "cuptiActivityPushExternalCorrelationId");
}

void CuptiSession::popOp() {
  uint64_t ignored = 0;
  check(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &ignored),
        "cuptiActivityPopExternalCorrelationId");
}

ActivityBatch CuptiSession::collect() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  Collector& c = collector();
  std::lock_guard<std::mutex> lock(c.mutex);
  ActivityBatch out = std::move(c.batch);
  c.batch = {};
  return out;
}

} // namespace wavecast::measured
