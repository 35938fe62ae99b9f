// The CUPTI functions measured mode calls, as a table: the library's, loaded when
// measured mode first needs it (the worker does not link libcupti, so it starts and
// traces in shape mode where CUDA is absent), or a test's fakes, which show every
// failure without a GPU.
#pragma once

#include <cupti.h>
#include <string>
#include <vector>

namespace wavecast::measured {

struct CuptiApi {
  std::string loadError; // why CUPTI cannot be used; empty when every function is set
  decltype(&cuptiGetResultString) getResultString = nullptr;
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

// Where CUPTI is looked for, in order: the soname of the CUDA major this was built for
// (what a CUDA build of torch has already loaded from its nvidia-cuda-cupti wheel, or a
// CUDA toolkit on the loader's path), then the library CMake found.
std::vector<std::string> cuptiCandidates();

// The first candidate that opens and has every function; else a table whose loadError
// says what was tried and how to get CUPTI.
CuptiApi loadCupti(const std::vector<std::string>& candidates);

// This process's CUPTI, loaded once (then read only).
const CuptiApi& processCupti();

} // namespace wavecast::measured
