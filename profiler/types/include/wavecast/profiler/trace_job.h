// What one trace job is: its request, its cancel token and its outcome. Plain
// values the language server passes around without linking the profiler.
#pragma once

#include "wavecast/trace.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace wavecast {

// The `pythonEnv` setting that selects the interpreter's own packages.
inline constexpr const char* kSystemPythonEnv = "system";

// Cancels one job from another thread. Copies share one flag: whoever may
// cancel keeps a copy, the job polls another. A token per job means a cancel
// cannot be cleared by the job's own start, nor reach a later job.
class CancelToken {
public:
  CancelToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
  void cancel() const { flag_->store(true); }
  bool cancelled() const { return flag_->load(); }

private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

// The GPU a script run as written finds when it asks torch.cuda (its name, memory,
// compute capability, multiprocessors, L2 cache): the first target GPU.
struct ScriptDevice {
  std::string name;
  int64_t memoryBytes = 0;
  int capabilityMajor = 0;
  int capabilityMinor = 0;
  int multiprocessors = 0;
  int64_t l2CacheBytes = 0; // 0: not known; the worker answers an H100's
};

struct TraceRequest {
  std::string file;                 // the user's training script
  std::optional<int64_t> batchSize; // nullopt: the provider's default
  TraceMode mode = TraceMode::Shape;
  std::chrono::milliseconds timeout{120000};
  // Ranks of a torch.distributed script's launch, traced as rank 0; nullopt: the worker's
  // default (8). A script that makes no process group ignores it.
  std::optional<int> worldSize;
  // A script without provider functions runs as written, with these as its sys.argv[1:],
  // from this working directory (as `python FILE` run there); empty: the script's folder.
  std::vector<std::string> scriptArgs;
  std::string workingDirectory;
  // What its torch.cuda queries answer; nullopt: the worker's default (an H100).
  std::optional<ScriptDevice> device;
  // Trace it as if the modules its iteration calls were passed through torch.compile in
  // this mode; nullopt: as the script says.
  std::optional<CompileMode> compile{};
};

// A failure the user can act on (docs/trace-format.md "Errors").
struct ProfileError {
  ProfileErrorKind kind = ProfileErrorKind::Internal;
  std::string message; // one line
  std::string file;    // deepest project frame, when known
  int line = 0;
  std::string hint;      // what to do
  std::string traceback; // full Python traceback for logs
  std::string output;    // what the script printed before failing (may be empty)
};

using TraceResult = std::variant<Trace, ProfileError>;

} // namespace wavecast
