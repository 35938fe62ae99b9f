#include "wavecast/measured/cupti_session.h"

#include <atomic>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <type_traits>

namespace wavecast::measured {
namespace {

const std::string kCudaMajor = std::to_string(CUDA_VERSION / 1000);

// The record layouts of the CUPTI this is compiled against; CUPTI writes the newest
// version of its own release, and cuptiCandidates() loads that release.
#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
#elif CUPTI_API_VERSION >= 18
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
#else
#error "wavecast's measured mode needs CUPTI from CUDA 12 or newer"
#endif
using MemsetRecord = CUpti_ActivityMemset4;

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kBufferAlignment = 8;
// External correlation records are written only beside API records, so the runtime and
// driver APIs are recorded too (cuDNN and cuBLAS launch through the driver API).
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                         CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

void check(const CuptiApi& api, CUptiResult result, const char* call) {
  if (result != CUPTI_SUCCESS)
    throw CuptiError(describeCuptiFailure(api, call, result), result);
}

const CuptiApi& usable(const CuptiApi& api) {
  if (!api.loadError.empty())
    throw CuptiError(api.loadError, CUPTI_ERROR_NOT_INITIALIZED);
  return api;
}

// CUPTI's buffer callbacks take no user pointer, so what they fill is process-wide;
// CuptiSession guarantees a single owner at a time.
struct Collector {
  std::mutex mutex;
  ActivityBatch batch;
  const CuptiApi* api = nullptr;
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
    if (c.api) {
      decodeActivityBuffer(*c.api, buffer, validSize, c.batch);
      size_t dropped = 0;
      if (c.api->getNumDroppedRecords(context, streamId, &dropped) == CUPTI_SUCCESS)
        c.batch.droppedRecords += dropped;
    }
  }
  std::free(buffer);
}

const char* copyName(uint8_t copyKind) {
  switch (copyKind) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    return "Memcpy HtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    return "Memcpy DtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    return "Memcpy DtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
    return "Memcpy PtoP";
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
    return "Memcpy HtoH";
  default:
    return "Memcpy";
  }
}

} // namespace

std::vector<std::string> cuptiCandidates() {
  return {"libcupti.so." + kCudaMajor, WAVECAST_CUPTI_LIBRARY};
}

CuptiApi loadCupti(const std::vector<std::string>& candidates) {
  CuptiApi api;
  std::string tried;
  void* library = nullptr;
  for (const std::string& name : candidates) {
    if ((library = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL)))
      break;
    tried += (tried.empty() ? "" : ", ") + name;
  }
  if (!library) {
    api.loadError = "cannot load CUPTI (tried " + tried + "); measured mode needs the CUPTI of " +
                    "CUDA " + kCudaMajor +
                    ": use a CUDA build of torch (pip install torch brings the nvidia-cuda-cupti "
                    "wheel) or install the CUDA toolkit, or trace in shape mode";
    return api;
  }
  const auto find = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
    if (!function && api.loadError.empty())
      api.loadError = std::string("the loaded CUPTI lacks ") + name + "; install the CUPTI of " +
                      "CUDA " + kCudaMajor + " or newer, or trace in shape mode";
  };
  find(api.getResultString, "cuptiGetResultString");
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

const CuptiApi& processCupti() {
  static const CuptiApi api = loadCupti(cuptiCandidates());
  return api;
}

std::string describeCuptiFailure(const CuptiApi& api, const char* call, int code) {
  const char* name = nullptr;
  if (api.loadError.empty() && api.getResultString)
    api.getResultString(static_cast<CUptiResult>(code), &name);
  std::string message =
      std::string(call) + " failed: " + (name ? name : "CUPTI error " + std::to_string(code));
  switch (code) {
  case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
  case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
    return message +
           ". This user may not read GPU performance counters. Allow it with the "
           "nvidia module option NVreg_RestrictProfilingToAdminUsers=0 (a file in "
           "/etc/modprobe.d/ with `options nvidia NVreg_RestrictProfilingToAdminUsers=0`, "
           "then reboot), or run wavecast as root / with CAP_SYS_ADMIN (containers: "
           "--cap-add SYS_ADMIN).";
  case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
  case CUPTI_ERROR_MAX_LIMIT_REACHED:
    return message + ". Another profiler (Nsight Systems/Compute, compute-sanitizer, "
                     "torch.profiler, another CUPTI client) holds CUPTI in the worker; run "
                     "wavecast outside it and trace again.";
  case CUPTI_ERROR_INVALID_DEVICE:
  case CUPTI_ERROR_NOT_INITIALIZED:
  case CUPTI_ERROR_NOT_SUPPORTED:
    return message + ". No usable CUDA GPU or driver was found; check `nvidia-smi`, or trace "
                     "in shape mode.";
  default:
    return message + ".";
  }
}

namespace {

// The fields every GPU activity record has, whatever its kind: when it ran, on which
// device and stream, and the API call that launched it.
template <typename Record> void takeWhenAndWhere(KernelActivity& activity, const Record& record) {
  activity.startNs = record.start;
  activity.endNs = record.end;
  activity.correlationId = record.correlationId;
  activity.deviceId = record.deviceId;
  activity.streamId = record.streamId;
}

} // namespace

void decodeActivityBuffer(const CuptiApi& api, uint8_t* buffer, size_t validBytes,
                          ActivityBatch& into) {
  CUpti_Activity* record = nullptr;
  const auto getNextRecord = usable(api).getNextRecord;
  while (getNextRecord(buffer, validBytes, &record) == CUPTI_SUCCESS) {
    KernelActivity activity;
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const KernelRecord*>(record);
      activity.name = k->name ? k->name : "";
      activity.grid = {k->gridX, k->gridY, k->gridZ};
      activity.block = {k->blockX, k->blockY, k->blockZ};
      activity.registersPerThread = k->registersPerThread;
      activity.staticSharedBytes = k->staticSharedMemory;
      activity.dynamicSharedBytes = k->dynamicSharedMemory;
      takeWhenAndWhere(activity, *k);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const MemcpyRecord*>(record);
      activity.kind = ActivityKind::Memcpy;
      activity.name = copyName(m->copyKind);
      activity.bytes = static_cast<int64_t>(m->bytes);
      takeWhenAndWhere(activity, *m);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const MemsetRecord*>(record);
      activity.kind = ActivityKind::Memset;
      activity.name = "Memset";
      activity.bytes = static_cast<int64_t>(m->bytes);
      takeWhenAndWhere(activity, *m);
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* link = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (link->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        into.correlations.push_back({link->correlationId, link->externalId});
      continue;
    }
    default:
      continue; // API records: only their correlation ids matter, and those come above
    }
    into.kernels.push_back(std::move(activity));
  }
}

CuptiSession::CuptiSession(const CuptiApi& api) : api_(usable(api)) {
  Collector& c = collector();
  if (c.active.exchange(true))
    throw CuptiError("a CUPTI session is already running in this process; finish it first",
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  bool registered = false;
  size_t enabled = 0;
  try {
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      c.batch = {};
      c.api = &api_;
    }
    check(api_, api_.registerCallbacks(bufferRequested, bufferCompleted),
          "cuptiActivityRegisterCallbacks");
    registered = true;
    for (const CUpti_ActivityKind kind : kKinds) {
      check(api_, api_.enable(kind), "cuptiActivityEnable");
      ++enabled;
    }
  } catch (...) {
    for (size_t k = 0; k < enabled; ++k)
      api_.disable(kKinds[k]);
    // Finalizing detaches CUPTI from the process: only when it was ours, never from
    // under another profiler that refused us.
    if (registered)
      api_.finalize();
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      c.api = nullptr;
    }
    c.active = false;
    throw;
  }
}

CuptiSession::~CuptiSession() {
  for (const CUpti_ActivityKind kind : kKinds)
    api_.disable(kind);
  api_.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  api_.finalize(); // detaches, so the next session can subscribe again
  Collector& c = collector();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.batch = {};
    c.api = nullptr;
  }
  c.active = false;
}

void CuptiSession::pushOp(uint64_t opId) {
  check(api_, api_.pushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, opId),
        "cuptiActivityPushExternalCorrelationId");
}

void CuptiSession::popOp() {
  uint64_t ignored = 0;
  check(api_, api_.popExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &ignored),
        "cuptiActivityPopExternalCorrelationId");
}

ActivityBatch CuptiSession::collect() {
  check(api_, api_.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  Collector& c = collector();
  std::lock_guard<std::mutex> lock(c.mutex);
  ActivityBatch out = std::move(c.batch);
  c.batch = {};
  return out;
}

} // namespace wavecast::measured
