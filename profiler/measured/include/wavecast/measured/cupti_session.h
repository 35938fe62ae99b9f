// The thin layer that calls CUPTI (built only where CMake found CUPTI's headers):
// decodes activity buffers and runs one activity-collection session. Every call throws
// CuptiError when CUPTI cannot be loaded or refuses.
#pragma once

#include "wavecast/measured/cupti_api.h"
#include "wavecast/measured/kernel_activity.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace wavecast::measured {

// A CUPTI call failed; the message names the call and what the user can do.
class CuptiError : public std::runtime_error {
public:
  CuptiError(const std::string& message, int code) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

private:
  int code_;
};

// The message for CUPTI result `code` returned by `call` (with the fix where one is known).
std::string describeCuptiFailure(const CuptiApi& api, const char* call, int code);

// Appends the kernel, memcpy, memset and external-correlation records of a completed
// CUPTI activity buffer to `into`; other record kinds (API calls) are skipped.
void decodeActivityBuffer(const CuptiApi& api, uint8_t* buffer, size_t validBytes,
                          ActivityBatch& into);

// Records kernels, copies and fills with the API calls that launched them (external
// correlation records exist only for API records) while alive. CUPTI's buffer callbacks
// take no user pointer, so one session may exist per process; the destructor calls
// cuptiFinalize so a long-running worker can start the next session.
class CuptiSession {
public:
  explicit CuptiSession(const CuptiApi& api = processCupti());
  ~CuptiSession();
  CuptiSession(const CuptiSession&) = delete;
  CuptiSession& operator=(const CuptiSession&) = delete;

  // Work launched from this thread between push and pop carries `opId` as its external
  // correlation id (CUPTI keeps one stack per thread: autograd's backward thread pushes
  // its own ops' ids).
  void pushOp(uint64_t opId);
  void popOp();
  // Flushes CUPTI's buffers and returns (and clears) everything collected so far. CUPTI
  // does not synchronize: the caller waits for the GPU first (torch.cuda.synchronize()).
  ActivityBatch collect();

private:
  const CuptiApi& api_;
};

} // namespace wavecast::measured
