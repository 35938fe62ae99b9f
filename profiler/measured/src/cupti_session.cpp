#include "wavecast/measured/cupti_session.h"

#include <atomic>
#include <cstdlib>
#include <cupti.h>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <type_traits>

namespace wavecast::measured {
namespace {

// The CUPTI functions wavecast calls, looked up when measured mode first needs
// them: the worker does not link libcupti, so it starts (and traces in shape
// mode) where CUDA is absent, and an installed wavecast needs no CUPTI path.
struct CuptiApi {
  std::string loadError; // empty when every function was found
  decltype(&cuptiGetResultString) getResultString = nullptr;
  decltype(&cuptiGetTimestamp) getTimestamp = nullptr;
  decltype(&cuptiActivityGetNextRecord) getNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) getNumDroppedRecords = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) registerCallbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flushAll = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) pushExternalCorrelationId = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) popExternalCorrelationId = nullptr;
  decltype(&cuptiFinalize) finalize = nullptr;
};

// A CUDA build of torch has loaded CUPTI by the time the tracer measures (its
// libtorch links it); else the loader's search path (a CUDA toolkit), else the
// library CMake found.
void* openCupti(std::string& tried) {
  const std::string soname = "libcupti.so." + std::to_string(CUDA_VERSION / 1000);
  for (const std::string& name : {soname, std::string(WAVECAST_CUPTI_LIBRARY)}) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL))
      return handle;
    tried += (tried.empty() ? "" : ", ") + name;
  }
  return nullptr;
}

CuptiApi loadCupti() {
  CuptiApi api;
  std::string tried;
  void* library = openCupti(tried);
  if (!library) {
    api.loadError = "cannot load CUPTI (tried " + tried +
                    "); measured mode needs the CUPTI of CUDA " +
                    std::to_string(CUDA_VERSION / 1000) +
                    ": use a CUDA build of torch (pip install torch brings the "
                    "nvidia-cuda-cupti wheel) or install the CUDA toolkit, or trace in shape mode";
    return api;
  }
  const auto find = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
    if (!function && api.loadError.empty())
      api.loadError = std::string("the loaded CUPTI lacks ") + name +
                      "; install the CUPTI of CUDA " + std::to_string(CUDA_VERSION / 1000) +
                      " or newer, or trace in shape mode";
  };
  find(api.getResultString, "cuptiGetResultString");
  find(api.getTimestamp, "cuptiGetTimestamp");
  find(api.getNextRecord, "cuptiActivityGetNextRecord");
  find(api.getNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
  find(api.registerCallbacks, "cuptiActivityRegisterCallbacks");
  find(api.enable, "cuptiActivityEnable");
  find(api.disable, "cuptiActivityDisable");
  find(api.flushAll, "cuptiActivityFlushAll");
  find(api.pushExternalCorrelationId, "cuptiActivityPushExternalCorrelationId");
  find(api.popExternalCorrelationId, "cuptiActivityPopExternalCorrelationId");
  find(api.finalize, "cuptiFinalize");
  return api;
}

// Loaded once per process, then read only.
const CuptiApi& loadedCupti() {
  static const CuptiApi api = loadCupti();
  return api;
}

const CuptiApi& cupti() {
  const CuptiApi& api = loadedCupti();
  if (!api.loadError.empty())
    throw CuptiError(api.loadError, CUPTI_ERROR_NOT_INITIALIZED);
  return api;
}

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
    if (cupti().getNumDroppedRecords(context, streamId, &dropped) == CUPTI_SUCCESS)
      c.batch.droppedRecords += dropped;
  }
  std::free(buffer);
}

} // namespace

std::string describeCuptiFailure(const char* call, int code) {
  const char* name = "unknown CUPTI error";
  if (loadedCupti().loadError.empty())
    loadedCupti().getResultString(static_cast<CUptiResult>(code), &name);
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
  const auto getNextRecord = cupti().getNextRecord;
  while (getNextRecord(buffer, validBytes, &record) == CUPTI_SUCCESS) {
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
  check(cupti().getTimestamp(&now), "cuptiGetTimestamp");
  return now;
}

CuptiSession::CuptiSession() {
  const CuptiApi& api = cupti();
  Collector& c = collector();
  if (c.active.exchange(true))
    throw CuptiError("a CUPTI session is already running in this process; finish it first",
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  try {
    check(api.registerCallbacks(bufferRequested, bufferCompleted),
          "cuptiActivityRegisterCallbacks");
    for (const CUpti_ActivityKind kind : kKinds)
      check(api.enable(kind), "cuptiActivityEnable");
  } catch (...) {
    api.finalize();
    c.active = false;
    throw;
  }
}

CuptiSession::~CuptiSession() {
  const CuptiApi& api = cupti(); // loaded: the constructor succeeded
  for (const CUpti_ActivityKind kind : kKinds)
    api.disable(kind);
  api.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  api.finalize(); // detaches, so the next session can subscribe again
  Collector& c = collector();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.batch = {};
  }
  c.active = false;
}

void CuptiSession::pushOp(uint64_t opId) {
  check(cupti().pushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, opId),
        "cuptiActivityPushExternalCorrelationId");
}

void CuptiSession::popOp() {
  uint64_t ignored = 0;
  check(cupti().popExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &ignored),
        "cuptiActivityPopExternalCorrelationId");
}

ActivityBatch CuptiSession::collect() {
  check(cupti().flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  Collector& c = collector();
  std::lock_guard<std::mutex> lock(c.mutex);
  ActivityBatch out = std::move(c.batch);
  c.batch = {};
  return out;
}

} // namespace wavecast::measured
