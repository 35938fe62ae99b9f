#include "lsp/scheduler.h"

#include <boost/asio/post.hpp>

namespace wavecast::lsp {

namespace asio = boost::asio;

AnalysisScheduler::AnalysisScheduler(asio::io_context& io, Analyzer& analyzer, Callbacks callbacks)
    : io_(io), analyzer_(analyzer), callbacks_(std::move(callbacks)),
      alive_(std::make_shared<bool>(true)), thread_([this] { run(); }) {}

AnalysisScheduler::~AnalysisScheduler() {
  *alive_ = false;
  {
    std::lock_guard<std::mutex> lock(shared_.mutex);
    shared_.stopping = true;
    shared_.queue.clear();
    if (shared_.running)
      shared_.runningCancel.cancel();
  }
  shared_.wake.notify_all();
  thread_.join();
}

void AnalysisScheduler::schedule(const std::string& uri, AnalysisRequest request,
                                 std::chrono::milliseconds delay) {
  const uint64_t generation = ++generations_[uri];
  if (delay <= std::chrono::milliseconds(0)) {
    // No debounce: queued now, not after a timer's round trip through the io_context.
    debouncing_.erase(uri); // destroying the timer aborts its wait
    enqueue({uri, std::move(request), generation});
    return;
  }
  auto& timer = debouncing_[uri];
  if (!timer)
    timer = std::make_unique<asio::steady_timer>(io_);
  timer->expires_after(delay);
  std::weak_ptr<bool> alive = alive_;
  timer->async_wait([this, alive, uri, request = std::move(request), generation,
                     timerPtr = timer.get()](const boost::system::error_code& error) mutable {
    auto guard = alive.lock();
    if (error || !guard || !*guard)
      return;
    auto it = debouncing_.find(uri);
    if (it == debouncing_.end() || it->second.get() != timerPtr)
      return;
    debouncing_.erase(it);
    enqueue({uri, std::move(request), generation});
  });
  // The running analysis read what is now stale: stop it at once rather than
  // after the debounce, so the worker's replacement warms up meanwhile.
  std::lock_guard<std::mutex> lock(shared_.mutex);
  cancelRunningLocked(uri);
}

void AnalysisScheduler::cancelRunningLocked(const std::string& uri) {
  if (shared_.running == uri)
    shared_.runningCancel.cancel();
}

void AnalysisScheduler::enqueue(Job job) {
  {
    std::lock_guard<std::mutex> lock(shared_.mutex);
    cancelRunningLocked(job.uri);
    bool replaced = false;
    for (Job& queued : shared_.queue) {
      if (queued.uri == job.uri) {
        queued = job;
        replaced = true;
      }
    }
    if (!replaced)
      shared_.queue.push_back(std::move(job));
  }
  shared_.wake.notify_all();
}

void AnalysisScheduler::cancel(const std::string& uri) {
  debouncing_.erase(uri); // destroying the timer aborts its wait
  std::lock_guard<std::mutex> lock(shared_.mutex);
  for (auto it = shared_.queue.begin(); it != shared_.queue.end();)
    it = it->uri == uri ? shared_.queue.erase(it) : it + 1;
  cancelRunningLocked(uri);
}

bool AnalysisScheduler::pending(const std::string& uri) const {
  if (debouncing_.count(uri))
    return true;
  const Shared& shared = shared_;
  std::lock_guard<std::mutex> lock(shared.mutex);
  if (shared.running == uri && !shared.runningCancel.cancelled())
    return true;
  for (const Job& job : shared.queue)
    if (job.uri == uri)
      return true;
  return false;
}

std::optional<std::string> AnalysisScheduler::running() const {
  const Shared& shared = shared_;
  std::lock_guard<std::mutex> lock(shared.mutex);
  return shared.running;
}

void AnalysisScheduler::run() {
  std::weak_ptr<bool> alive = alive_;
  auto post = [this, alive](std::function<void()> handler) {
    asio::post(io_, [alive, handler = std::move(handler)] {
      auto guard = alive.lock();
      if (guard && *guard)
        handler();
    });
  };
  for (;;) {
    Job job;
    CancelToken cancel;
    {
      std::unique_lock<std::mutex> lock(shared_.mutex);
      shared_.wake.wait(lock, [&] { return shared_.stopping || !shared_.queue.empty(); });
      if (shared_.stopping)
        return;
      job = std::move(shared_.queue.front());
      shared_.queue.pop_front();
      shared_.running = job.uri;
      // From here a cancel reaches this job through its token, whenever the
      // analyzer gets to look at it.
      shared_.runningCancel = cancel;
    }
    post([this, uri = job.uri] { callbacks_.started(uri); });
    AnalysisOutcome outcome = analyzer_.analyze(
        job.request,
        [&](const std::string& message) {
          post([this, uri = job.uri, message] { callbacks_.progress(uri, message); });
        },
        cancel);
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      cancelled = cancel.cancelled(); // with `running` reset, so no cancel falls in between
      shared_.running.reset();
      if (shared_.stopping)
        return;
    }
    if (cancelled) {
      post([this, uri = job.uri, generation = job.generation] {
        if (generations_[uri] == generation) // nothing scheduled since, so nothing pending
          callbacks_.cancelled(uri);
      });
    } else {
      post([this, job = std::move(job), outcome = std::move(outcome)]() mutable {
        callbacks_.finished(job.uri, job.request, std::move(outcome));
      });
    }
  }
}

} // namespace wavecast::lsp
