// The thin layer that calls CUPTI (built only where CMake found CUPTI's headers;
// the library is loaded on first use): decodes activity buffers and runs one
// activity-collection session. Every call throws CuptiError when CUPTI cannot
// be loaded.
#pragma once

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
std::string describeCuptiFailure(const char* call, int code);

// Appends the kernel (KERNEL, CONCURRENT_KERNEL) and EXTERNAL_CORRELATION records of a
// completed CUPTI activity buffer to `into`; other record kinds are skipped.
void decodeActivityBuffer(uint8_t* buffer, size_t validBytes, ActivityBatch& into);

// CUPTI's timestamp clock (ns), the clock of KernelActivity::startNs/endNs.
uint64_t cuptiTimestamp();

// Enables kernel and external-correlation activity while alive. CUPTI allows one
// subscriber per process, so only one session may exist at a time; the destructor
// calls cuptiFinalize so a long-running worker can start the next session.
class CuptiSession {
public:
  CuptiSession();
  ~CuptiSession();
  CuptiSession(const CuptiSession&) = delete;
  CuptiSession& operator=(const CuptiSession&) = delete;

  // Kernels launched between push and pop carry `opId` as external correlation id.
  void pushOp(uint64_t opId);
  void popOp();
  // Flushes CUPTI's buffers and returns (and clears) everything collected so far.
  ActivityBatch collect();
};

} // namespace wavecast::measured
