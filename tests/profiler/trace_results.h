// What the profiler tests ask of a trace: a request for a file, and its result as
// the error or the trace they expect (a failure names what came instead).
#pragma once

#include "wavecast/profiler/trace_job.h"

#include <chrono>
#include <gtest/gtest.h>
#include <string>
#include <variant>

namespace wavecast::testing {

inline TraceRequest request(const std::string& file,
                            std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
  TraceRequest r;
  r.file = file;
  r.batchSize = 4;
  r.timeout = timeout;
  return r;
}

inline ProfileError expectError(const TraceResult& result) {
  if (!std::holds_alternative<ProfileError>(result)) {
    ADD_FAILURE() << "expected an error, got a trace";
    return {};
  }
  return std::get<ProfileError>(result);
}

inline Trace expectTrace(const TraceResult& result) {
  if (!std::holds_alternative<Trace>(result)) {
    const auto& e = std::get<ProfileError>(result);
    ADD_FAILURE() << "expected a trace, got " << toString(e.kind) << ": " << e.message << "\n"
                  << e.hint << "\n"
                  << e.traceback;
    return {};
  }
  return std::get<Trace>(result);
}

} // namespace wavecast::testing
