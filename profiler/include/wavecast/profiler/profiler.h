// Runs the user's training script in a worker process and returns its trace.
// The worker is a separate process (wavecast-worker, embedding CPython): a
// crash, hang or exception in user code never reaches the caller's process.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "wavecast/trace.h"

namespace wavecast {

struct TraceRequest {
  std::string file;                // the user's training script
  std::optional<int64_t> batchSize; // nullopt: the provider's default
  std::string mode = "shape";      // "shape" | "cpu" | "cuda"
  std::chrono::milliseconds timeout{120000};
};

// A failure the user can act on (docs/trace-format.md "Errors").
struct ProfileError {
  std::string kind;    // missing_provider, syntax_error, user_exception, timeout, ...
  std::string message; // one line
  std::string file;    // deepest project frame, when known
  int line = 0;
  std::string hint;      // what to do
  std::string traceback; // full Python traceback for logs
};

using TraceResult = std::variant<Trace, ProfileError>;

struct ProfilerOptions {
  std::string workerPath;     // the wavecast-worker executable
  std::string pythonPath;     // directory holding the wavecast_tracer package
  std::string pythonEnv;      // optional venv whose site-packages to use
  std::function<void(const std::string&)> progress; // status lines; may be empty
};

// Owns one worker process; restarts it after a crash, timeout or cancel.
class Profiler {
public:
  explicit Profiler(ProfilerOptions options);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Blocks until the trace is done, failed, timed out or was cancelled.
  TraceResult trace(const TraceRequest& request);
  // Thread-safe: aborts a running trace (the worker is killed and restarted lazily).
  void cancel();

private:
  class Worker;
  ProfilerOptions options_;
  std::unique_ptr<Worker> worker_;
  std::atomic<bool> cancelled_{false};
};

} // namespace wavecast
