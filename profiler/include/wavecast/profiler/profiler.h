// Runs the user's training script in a worker process and returns its trace.
// The worker is a separate process (wavecast-worker, embedding CPython): a
// crash, hang or exception in user code never reaches the caller's process.
#pragma once

#include "wavecast/profiler/trace_job.h"
#include "wavecast/trace.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace wavecast {

// Whether torch's own log messages reach the worker's stderr. Hidden by default:
// a shape error makes fake tensors log the failed meta kernel with a long
// traceback before raising, and the trace's error already says what failed.
enum class TorchLogs { Hidden, Shown };

struct ProfilerOptions {
  std::string workerPath; // the wavecast-worker executable
  std::string pythonPath; // directory holding the wavecast_tracer package
  // The venv whose packages (torch first) the worker imports: empty picks
  // defaultPythonEnv; kSystemPythonEnv picks the embedded interpreter's own
  // site-packages (e.g. Debian's python3-torch).
  std::string pythonEnv;
  // The installation's environment (a venv or kSystemPythonEnv); empty: none usable.
  std::string defaultPythonEnv;
  // The venv wavecast was configured with, absent here: a trace with no environment
  // chosen fails saying so and how to choose one.
  std::string missingPythonEnv;
  TorchLogs torchLogs = TorchLogs::Hidden;
  // Once ready, the worker traces a small model while no request waits, paying torch's
  // first-use costs (2-3 s) then rather than in the first trace: for a worker that serves
  // many traces and starts before they come (the daemon's), not for a one-shot command.
  bool warmUp = false;
  std::function<void(const std::string&)> progress; // status lines; may be empty
  // Address-space limit of the worker (RLIMIT_AS): nullopt picks 3/4 of the
  // machine's memory, 0 means unlimited. Beyond it the trace fails with
  // out_of_memory instead of the machine swapping.
  std::optional<uint64_t> memoryLimitBytes;
};

// Owns one worker process; restarts it after a crash, timeout or cancel.
class Profiler {
public:
  explicit Profiler(ProfilerOptions options);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Blocks until the trace is done, failed, timed out or was cancelled. A
  // trace whose `cancel` is cancelled, before it starts or while it runs, ends
  // with a "cancelled" error. A running script is interrupted and the worker
  // stays, warm, for the next trace (usually moments away: the edit that made
  // this one stale); a worker that does not answer within a second is killed
  // and a replacement starts at once.
  TraceResult trace(const TraceRequest& request, const CancelToken& cancel = CancelToken());
  // Thread-safe: cancels the running trace or start(), if any.
  void cancel();
  // Starts the worker ahead of the first trace (importing torch takes seconds);
  // returns the error when it cannot start. trace() starts it when needed.
  std::optional<ProfileError> start(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Thread-safe and non-blocking: starts a worker process when there is none, without
  // waiting for it to load torch, so the first trace finds it warm. Does nothing while a
  // trace or start() runs; a failure to start shows on the next trace.
  void prestart();
  // Process id of the running worker, or 0 (for logs and tests).
  int workerPid() const;

private:
  class Worker;
  std::optional<ProfileError> ensureWorker(std::chrono::steady_clock::time_point deadline,
                                           const CancelToken& cancel);
  // Makes `cancel` the token cancel() reaches.
  void setCurrent(const CancelToken& cancel);
  // Starts a worker process without waiting for it to be ready.
  std::optional<ProfileError> spawnWorker();
  ProfilerOptions options_;
  std::unique_ptr<Worker> worker_;
  bool workerReady_ = false; // worker_ has announced that it is ready
  std::mutex currentMutex_;
  CancelToken current_;   // the running trace's or start()'s; guarded by currentMutex_
  std::mutex traceMutex_; // one trace at a time per worker
  int64_t nextRequestId_ = 1;
};

} // namespace wavecast
