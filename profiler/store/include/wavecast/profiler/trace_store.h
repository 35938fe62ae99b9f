// Traces kept on disk from one run of the daemon to the next, so that opening an
// editor on a script traced before shows its results before the worker has even
// imported torch. An entry names the request it answers (the script's content
// and everything else the trace depends on) and the hash of every file the
// iteration ran code from; it is stale once one of them differs. Entries written
// by another wavecast version are ignored: its tracer may record differently.
#pragma once

#include "wavecast/profiler/content_hash.h"
#include "wavecast/profiler/trace_job.h"
#include "wavecast/trace.h"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace wavecast {

// The files a trace ran code from: its entry file and every op's line and stack frames.
std::vector<std::string> traceSourceFiles(const Trace& trace, const std::string& entryFile);

struct StoredTrace {
  Trace trace;
  std::chrono::system_clock::time_point recorded; // when the worker traced it
};

// How much a store keeps; beyond either limit the least recently used entries go (the
// newest stays even when it alone is larger).
struct TraceStoreLimits {
  size_t entries = 128;
  uintmax_t bytes = uintmax_t{256} << 20; // a GPT-2 small trace is 1.3 MB, Llama 3 8B's 8 MB
};

class TraceStore {
public:
  // A file's contentHash; nullopt when it cannot be read.
  using FileHasher = std::function<std::optional<std::string>(const std::string& path)>;

  // Keeps entries in `folder` (made when first written) within `limits`. `version` is the
  // wavecast version writing and reading them.
  TraceStore(std::filesystem::path folder, std::string version, TraceStoreLimits limits = {},
             FileHasher hashFile = fileContentHash);
  // Writes what is still queued, then returns.
  ~TraceStore();
  TraceStore(const TraceStore&) = delete;
  TraceStore& operator=(const TraceStore&) = delete;

  // What a trace of `request` in `pythonEnv` depends on besides the project's files, with
  // the entry file holding `entryText`: packagesStamp(pythonEnv) among them.
  static std::string key(const TraceRequest& request, const std::string& pythonEnv,
                         std::string_view entryText);
  // When the packages `pythonEnv` imports were last installed or removed: the modification
  // times of its site-packages folders (a venv's folder or its bin/python; "system" or
  // empty: the system interpreter's dist-packages and the user's site-packages).
  static std::string packagesStamp(const std::string& pythonEnv);

  // The trace stored under `key` while every file it depends on is unchanged; nullopt
  // when there is none, it is stale, or it cannot be read (it is then removed).
  std::optional<StoredTrace> load(const std::string& key);
  // Stores `trace` under `key` on the store's own thread (serialising a large trace takes
  // tens of milliseconds, which the results should not wait for). `entryText` is the entry
  // file the key was made from: if the file no longer holds it, nothing is stored.
  void saveLater(const std::string& key, std::shared_ptr<const Trace> trace, std::string entryFile,
                 std::string entryText);
  // Stores it now; false when it could not be written.
  bool save(const std::string& key, const Trace& trace, const std::string& entryFile,
            std::string_view entryText,
            std::chrono::system_clock::time_point recorded = std::chrono::system_clock::now());
  // Blocks until every queued save is written (tests, and the destructor).
  void flush();

private:
  struct PendingSave {
    std::string key;
    std::shared_ptr<const Trace> trace;
    std::string entryFile;
    std::string entryText;
    std::chrono::system_clock::time_point recorded;
  };
  std::filesystem::path pathOf(const std::string& key) const;
  void prune();
  void run();

  std::filesystem::path folder_;
  std::string version_;
  TraceStoreLimits limits_;
  FileHasher hashFile_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<PendingSave> queue_;
  bool writing_ = false;
  bool stopping_ = false;
  std::thread writer_; // started with the first saveLater
};

} // namespace wavecast
