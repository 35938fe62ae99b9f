// Owns the analysis thread. Requests are debounced per document; a newer
// request for a document cancels its running analysis; results come back to
// the io_context's thread, so all server state lives on one thread.
#pragma once

#include "lsp/analyzer.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace wavecast::lsp {

class AnalysisScheduler {
public:
  // All callbacks run on the io_context's thread.
  struct Callbacks {
    std::function<void(const std::string& uri)> started;
    std::function<void(const std::string& uri, const std::string& message)> progress;
    std::function<void(const std::string& uri, const AnalysisRequest& request,
                       AnalysisOutcome outcome)>
        finished;
    // A cancelled analysis with no newer request for the same document.
    std::function<void(const std::string& uri)> cancelled;
  };

  AnalysisScheduler(boost::asio::io_context& io, Analyzer& analyzer, Callbacks callbacks);
  ~AnalysisScheduler();
  AnalysisScheduler(const AnalysisScheduler&) = delete;
  AnalysisScheduler& operator=(const AnalysisScheduler&) = delete;

  // Queues an analysis of `uri` after `delay` (at once when it is zero); another
  // schedule() for the same uri within the delay replaces it. A running analysis
  // of `uri` is cancelled at once, not when the delay ends.
  void schedule(const std::string& uri, AnalysisRequest request, std::chrono::milliseconds delay);
  // Drops a debounced, queued or running analysis of `uri`.
  void cancel(const std::string& uri);
  // Debouncing, queued or running.
  bool pending(const std::string& uri) const;
  std::optional<std::string> running() const;

private:
  struct Job {
    std::string uri;
    AnalysisRequest request;
    uint64_t generation = 0; // its schedule() call's, per uri
  };
  // State shared with the analysis thread and with handlers posted to the io_context.
  struct Shared {
    mutable std::mutex mutex;
    std::condition_variable wake;
    std::deque<Job> queue;
    std::optional<std::string> running;
    CancelToken runningCancel; // the running job's: a fresh one per job
    bool stopping = false;
  };

  void enqueue(Job job);
  // Cancels the analysis of `uri` if it is the running one; holds shared_.mutex.
  void cancelRunningLocked(const std::string& uri);
  void run();

  boost::asio::io_context& io_;
  Analyzer& analyzer_;
  Callbacks callbacks_;
  std::shared_ptr<bool> alive_; // handlers posted to io_ check it before touching `this`
  std::map<std::string, std::unique_ptr<boost::asio::steady_timer>> debouncing_;
  // schedule() calls per uri (io thread): a cancelled job whose uri was scheduled again
  // since is superseded, even when its successor has already finished.
  std::map<std::string, uint64_t> generations_;
  Shared shared_;
  std::thread thread_;
};

} // namespace wavecast::lsp
