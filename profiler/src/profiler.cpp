#include "wavecast/profiler/profiler.h"

#include "crash_report.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <string_view>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace wavecast {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// How often a blocked trace looks at the cancel flag.
constexpr auto kCancelPollInterval = std::chrono::milliseconds(50);
// After a time-out the worker gets this long to report where the script was.
constexpr auto kInterruptGrace = std::chrono::seconds(3);
// A cancelled trace's worker gets this long to stop the script and answer; one that does
// stays, warm (torch imported, the project's modules and model kept), else it is replaced.
constexpr auto kCancelGrace = std::chrono::seconds(1);
// The worker's fixed descriptor numbers (see docs/worker-protocol.md).
constexpr int kRequestFd = 3;
constexpr int kResponseFd = 4;
constexpr int kCrashFd = 5;

// The venv the worker imports from: the request's, else the installation's; empty: the
// embedded interpreter's own packages.
std::string workerPythonEnv(const ProfilerOptions& options) {
  const std::string& chosen =
      options.pythonEnv.empty() ? options.defaultPythonEnv : options.pythonEnv;
  return chosen == kSystemPythonEnv ? std::string() : chosen;
}

ProfileError makeError(ProfileErrorKind kind, std::string message, std::string hint,
                       std::string file = {}, int line = 0) {
  ProfileError e;
  e.kind = kind;
  e.message = std::move(message);
  e.hint = std::move(hint);
  e.file = std::move(file);
  e.line = line;
  return e;
}

ProfileError errorFromJson(const json& j) {
  ProfileError e;
  const std::string kind = j.value("kind", std::string("internal"));
  e.message = j.value("message", std::string("unknown error"));
  if (const auto known = profileErrorKindFromString(kind)) {
    e.kind = *known;
  } else { // a worker newer than this client: keep its word for what happened
    e.kind = ProfileErrorKind::Internal;
    e.message = kind + ": " + e.message;
  }
  e.file = j.value("file", std::string());
  e.line = j.value("line", 0);
  e.hint = j.value("hint", std::string());
  e.traceback = j.value("traceback", std::string());
  e.output = j.value("output", std::string());
  return e;
}

uint64_t defaultMemoryLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0)
    return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize) / 4 * 3;
}

// A worker's scratch folder: <temp>/wavecast-worker-<this process's pid>-XXXXXX, removed
// when the worker ends. The folders of a process that no longer runs (its whole process
// group killed at once, as an editor that quits may do) are removed as a new one is made.
constexpr std::string_view kScratchPrefix = "wavecast-worker-";

void removeScratchOfEndedProcesses(const std::filesystem::path& temp) {
  std::error_code error;
  std::vector<std::filesystem::path> ended;
  for (std::filesystem::directory_iterator it(temp, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kScratchPrefix, 0) != 0)
      continue;
    const std::string rest = name.substr(kScratchPrefix.size());
    const size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos || rest.find_first_not_of("0123456789") != dash ||
        dash > 9)
      continue;
    const pid_t owner = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
    // EPERM: another user's process, alive.
    if (owner != ::getpid() && ::kill(owner, 0) != 0 && errno == ESRCH)
      ended.push_back(it->path());
  }
  for (const auto& folder : ended) {
    std::error_code ignored;
    std::filesystem::remove_all(folder, ignored);
  }
}

std::filesystem::path makeScratchFolder() {
  std::error_code error;
  const std::filesystem::path temp = std::filesystem::temp_directory_path(error);
  if (error)
    return {};
  removeScratchOfEndedProcesses(temp);
  std::string pattern =
      (temp / (std::string(kScratchPrefix) + std::to_string(::getpid()) + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr)
    return {};
  return pattern;
}

void closeFd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

} // namespace

// One running wavecast-worker process and its three channels.
class Profiler::Worker {
public:
  enum class ReadStatus { Line, Eof, Timeout, Cancelled };

  Worker(const ProfilerOptions& options, uint64_t memoryLimit) { spawn(options, memoryLimit); }
  ~Worker() {
    kill(SIGKILL);
    removeScratch();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  pid_t pid() const { return pid_; }

  bool send(const std::string& line) {
    size_t done = 0;
    while (done < line.size()) {
      // A socket, so a dead worker yields EPIPE instead of SIGPIPE in our process.
      const ssize_t n = ::send(requestFd_, line.data() + done, line.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  ReadStatus readLine(Clock::time_point deadline, const CancelToken* cancel, std::string& line) {
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        line.assign(buffer_, 0, nl);
        buffer_.erase(0, nl + 1);
        return ReadStatus::Line;
      }
      if (responseFd_ < 0)
        return ReadStatus::Eof;
      if (cancel && cancel->cancelled())
        return ReadStatus::Cancelled;
      const auto now = Clock::now();
      if (now >= deadline)
        return ReadStatus::Timeout;
      const auto wait = std::min<Clock::duration>(deadline - now, kCancelPollInterval);
      pollfd fds[2] = {{responseFd_, POLLIN, 0}, {crashFd_, POLLIN, 0}};
      const int ready = ::poll(
          fds, crashFd_ >= 0 ? 2 : 1,
          static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()) +
              1);
      if (ready < 0 && errno != EINTR)
        return ReadStatus::Eof;
      if (crashFd_ >= 0 && fds[1].revents)
        drainCrashReport(false);
      if (fds[0].revents == 0)
        continue;
      char chunk[65536];
      const ssize_t n = ::read(responseFd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        closeFd(responseFd_);
        continue;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  void kill(int signal) {
    if (pid_ > 0)
      ::kill(pid_, signal);
    if (signal == SIGKILL)
      reap(std::chrono::seconds(5));
  }

  // Waits for the process to end (SIGKILL after `patience`); returns its wait status.
  int reap(std::chrono::milliseconds patience) {
    if (pid_ <= 0)
      return status_;
    const auto deadline = Clock::now() + patience;
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || (r < 0 && errno != EINTR)) {
        status_ = r == pid_ ? status : 0;
        pid_ = -1;
        break;
      }
      if (Clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        status_ = status;
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    closeFd(requestFd_);
    closeFd(responseFd_);
    drainCrashReport(true);
    removeScratch();
    return status_;
  }

  const std::string& crashReport() const { return crashReport_; }

private:
  void spawn(const ProfilerOptions& options, uint64_t memoryLimit) {
    int request[2];
    int response[2];
    int crash[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, request) != 0)
      throw std::system_error(errno, std::generic_category(), "socketpair");
    if (::pipe2(response, O_CLOEXEC) != 0 || ::pipe2(crash, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe2");
    const int devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

    // Everything the child needs is prepared before fork: after it, only
    // async-signal-safe calls are allowed (the parent may be multi-threaded).
    std::vector<std::string> argStrings = {
        options.workerPath,          "--request-fd", std::to_string(kRequestFd), "--response-fd",
        std::to_string(kResponseFd), "--crash-fd",   std::to_string(kCrashFd),   "--python-path",
        options.pythonPath};
    const std::string env = workerPythonEnv(options);
    if (!env.empty()) {
      argStrings.push_back("--python-env");
      argStrings.push_back(env);
    }
    if (options.torchLogs == TorchLogs::Shown) {
      argStrings.push_back("--torch-logs");
      argStrings.push_back("shown");
    }
    if (options.warmUp) {
      argStrings.push_back("--warm-up");
      argStrings.push_back("yes");
    }
    // The script's sandbox folders go in here, which this process removes however the
    // worker ends: a worker killed mid-trace cannot remove its own.
    scratch_ = makeScratchFolder();
    if (!scratch_.empty()) {
      argStrings.push_back("--scratch");
      argStrings.push_back(scratch_.string());
    }
    std::vector<char*> argv;
    for (auto& s : argStrings)
      argv.push_back(s.data());
    argv.push_back(nullptr);
    const rlimit limit{memoryLimit, memoryLimit};
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0)
      throw std::system_error(errno, std::generic_category(), "fork");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        ::_exit(1);
      // Move the channel ends above the target numbers first, so no dup2 is a no-op
      // that would keep O_CLOEXEC.
      const int req = ::fcntl(request[1], F_DUPFD, 10);
      const int resp = ::fcntl(response[1], F_DUPFD, 10);
      const int cr = ::fcntl(crash[1], F_DUPFD, 10);
      ::dup2(req, kRequestFd);
      ::dup2(resp, kResponseFd);
      ::dup2(cr, kCrashFd);
      if (devNull >= 0)
        ::dup2(devNull, STDIN_FILENO);      // the script must not read the daemon's stdin
      ::dup2(STDERR_FILENO, STDOUT_FILENO); // nor write into its stdout
      ::close_range(kCrashFd + 1, ~0U, 0);
      if (memoryLimit > 0)
        ::setrlimit(RLIMIT_AS, &limit);
      ::signal(SIGPIPE, SIG_DFL);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    ::close(request[1]);
    ::close(response[1]);
    ::close(crash[1]);
    if (devNull >= 0)
      ::close(devNull);
    requestFd_ = request[0];
    responseFd_ = response[0];
    crashFd_ = crash[0];
    ::fcntl(crashFd_, F_SETFL, O_NONBLOCK);
  }

  void removeScratch() {
    std::error_code ignored;
    if (!scratch_.empty())
      std::filesystem::remove_all(scratch_, ignored);
    scratch_.clear();
  }

  void drainCrashReport(bool final) {
    if (crashFd_ < 0)
      return;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(crashFd_, chunk, sizeof chunk);
      if (n > 0) {
        crashReport_.append(chunk, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n == 0 || final)
        closeFd(crashFd_);
      return;
    }
  }

  pid_t pid_ = -1;
  int status_ = 0;
  int requestFd_ = -1;
  int responseFd_ = -1;
  int crashFd_ = -1;
  std::string buffer_;
  std::string crashReport_;
  std::filesystem::path scratch_;
};

Profiler::Profiler(ProfilerOptions options) : options_(std::move(options)) {}

Profiler::~Profiler() {
  if (worker_ && workerReady_) { // one still starting is simply killed
    worker_->send("{\"id\":0,\"method\":\"shutdown\"}\n");
    worker_->reap(std::chrono::milliseconds(500));
  }
}

void Profiler::cancel() {
  std::lock_guard<std::mutex> lock(currentMutex_);
  current_.cancel();
}

void Profiler::setCurrent(const CancelToken& cancel) {
  std::lock_guard<std::mutex> lock(currentMutex_);
  current_ = cancel;
}

int Profiler::workerPid() const {
  return worker_ ? worker_->pid() : 0;
}

std::optional<ProfileError> Profiler::start(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(traceMutex_);
  const CancelToken cancel;
  setCurrent(cancel);
  return ensureWorker(Clock::now() + timeout, cancel);
}

void Profiler::prestart() {
  std::unique_lock<std::mutex> lock(traceMutex_, std::try_to_lock);
  if (lock.owns_lock() && !worker_)
    spawnWorker();
}

std::optional<ProfileError> Profiler::spawnWorker() {
  namespace fs = std::filesystem;
  if (options_.pythonEnv.empty() && options_.defaultPythonEnv.empty() &&
      !options_.missingPythonEnv.empty())
    return makeError(ProfileErrorKind::EnvironmentError,
                     "the Python environment wavecast was set up with, " +
                         options_.missingPythonEnv + ", is not on this machine",
                     "Choose one that has torch: --python-env VENV (python3.11 -m venv VENV && "
                     "VENV/bin/pip install torch; in VS Code the Python extension's interpreter or "
                     "wavecast.pythonEnv), WAVECAST_PYTHON_ENV, or scripts/setup.sh; "
                     "--python-env system uses the system python3's packages (apt install "
                     "python3-torch, torch 1.13).");
  if (::access(options_.workerPath.c_str(), X_OK) != 0)
    return makeError(ProfileErrorKind::EnvironmentError,
                     "cannot run the profiler worker " + options_.workerPath,
                     "Build it (ninja wavecast-worker) or reinstall wavecast.");
  if (!fs::is_directory(fs::path(options_.pythonPath) / "wavecast_tracer"))
    return makeError(ProfileErrorKind::EnvironmentError,
                     "the tracer package is missing from " + options_.pythonPath,
                     "Rebuild or reinstall wavecast, or set WAVECAST_PYTHON_DIR to the folder "
                     "holding wavecast_tracer.");
  const uint64_t limit =
      options_.memoryLimitBytes ? *options_.memoryLimitBytes : defaultMemoryLimit();
  try {
    worker_ = std::make_unique<Worker>(options_, limit);
  } catch (const std::system_error& e) {
    return makeError(ProfileErrorKind::EnvironmentError,
                     std::string("cannot start the worker: ") + e.what(),
                     "Check the system's process and file limits.");
  }
  workerReady_ = false;
  return std::nullopt;
}

std::optional<ProfileError> Profiler::ensureWorker(Clock::time_point deadline,
                                                   const CancelToken& cancel) {
  if (worker_ && workerReady_)
    return std::nullopt;
  if (options_.progress)
    options_.progress("starting worker");
  if (!worker_)
    if (auto error = spawnWorker())
      return error;
  std::string line;
  const auto status = worker_->readLine(deadline, &cancel, line);
  if (status == Worker::ReadStatus::Line) {
    const json ready = json::parse(line, nullptr, false);
    if (!ready.is_discarded() && ready.value("event", std::string()) == "ready") {
      if (!ready.contains("error")) {
        workerReady_ = true;
        return std::nullopt;
      }
      ProfileError error = errorFromJson(ready["error"]);
      worker_->reap(std::chrono::seconds(2));
      worker_.reset();
      return error;
    }
  }
  // A worker cancelled while it starts holds nothing stale: keep it warming up.
  if (status == Worker::ReadStatus::Cancelled)
    return makeError(ProfileErrorKind::Cancelled, "the trace was cancelled", "");
  worker_->kill(SIGKILL);
  worker_.reset();
  if (status == Worker::ReadStatus::Timeout)
    return makeError(ProfileErrorKind::Timeout, "the profiler worker did not start in time",
                     "The machine may be overloaded; try again or raise the time-out.");
  return makeError(ProfileErrorKind::EnvironmentError,
                   "the profiler worker " + options_.workerPath + " exited during start-up",
                   "Run it by hand to see why, or rebuild wavecast.");
}

TraceResult Profiler::trace(const TraceRequest& request, const CancelToken& cancel) {
  std::lock_guard<std::mutex> lock(traceMutex_);
  setCurrent(cancel);
  const auto deadline = Clock::now() + request.timeout;
  const std::string file = std::filesystem::absolute(request.file).lexically_normal().string();
  // Cancelled before it started: the worker holds nothing stale, so it stays.
  if (cancel.cancelled())
    return makeError(ProfileErrorKind::Cancelled, "the trace was cancelled", "", file);
  if (auto error = ensureWorker(deadline, cancel))
    return *error;

  const int64_t id = nextRequestId_++;
  json params{{"file", file}, {"mode", toString(request.mode)}};
  params["batch_size"] = request.batchSize ? json(*request.batchSize) : json(nullptr);
  if (request.worldSize)
    params["world_size"] = *request.worldSize;
  if (!request.scriptArgs.empty())
    params["script_args"] = request.scriptArgs;
  if (!request.workingDirectory.empty())
    params["working_directory"] = request.workingDirectory;
  if (request.compile)
    params["compile"] = toString(*request.compile);
  if (const auto& device = request.device) {
    params["device"] = {{"name", device->name},
                        {"memory_bytes", device->memoryBytes},
                        {"capability", {device->capabilityMajor, device->capabilityMinor}},
                        {"multiprocessors", device->multiprocessors}};
    if (device->l2CacheBytes > 0)
      params["device"]["l2_cache_bytes"] = device->l2CacheBytes;
  }
  const json message{{"id", id}, {"method", "trace"}, {"params", params}};

  auto workerDied = [&]() -> TraceResult {
    const int status = worker_->reap(std::chrono::seconds(2));
    ProfileError error = crashError(status, worker_->crashReport(), file);
    worker_.reset();
    return error;
  };

  if (!worker_->send(message.dump() + "\n"))
    return workerDied();

  std::string line;
  for (;;) {
    const auto status = worker_->readLine(deadline, &cancel, line);
    if (status == Worker::ReadStatus::Eof)
      return workerDied();
    if (status == Worker::ReadStatus::Cancelled) {
      // SIGUSR1 stops the script where it is (a TraceInterrupted in Python); the worker
      // answers the request and waits for the next, with nothing to load again.
      worker_->kill(SIGUSR1);
      const auto grace = Clock::now() + kCancelGrace;
      while (worker_->readLine(grace, nullptr, line) == Worker::ReadStatus::Line) {
        const json reply = json::parse(line, nullptr, false);
        if (!reply.is_discarded() && reply.is_object() && reply.value("id", int64_t{-1}) == id &&
            (reply.contains("error") || reply.contains("result")))
          return makeError(ProfileErrorKind::Cancelled, "the trace was cancelled", "", file);
      }
      worker_->kill(SIGKILL); // stuck outside Python, or it died
      worker_.reset();
      spawnWorker(); // warms up while the caller moves on; a failure shows on the next trace
      return makeError(ProfileErrorKind::Cancelled, "the trace was cancelled", "", file);
    }
    if (status == Worker::ReadStatus::Timeout) {
      // Ask the script to stop where it is, so the error names its line; a
      // worker stuck outside Python is killed after the grace period.
      worker_->kill(SIGUSR1);
      const auto grace = Clock::now() + kInterruptGrace;
      while (worker_->readLine(grace, nullptr, line) == Worker::ReadStatus::Line) {
        const json reply = json::parse(line, nullptr, false);
        if (reply.is_discarded() || !reply.is_object() || reply.value("id", int64_t{-1}) != id)
          continue;
        if (reply.contains("error")) {
          ProfileError error = errorFromJson(reply["error"]);
          error.kind = ProfileErrorKind::Timeout;
          return error;
        }
        if (reply.contains("result")) // finished just as the time ran out
          try {
            return traceFromJson(reply["result"]);
          } catch (const std::exception&) {
            break;
          }
      }
      worker_->kill(SIGKILL);
      worker_.reset();
      return makeError(ProfileErrorKind::Timeout,
                       "the trace took longer than " +
                           std::to_string(request.timeout.count() / 1000) + " s and was stopped",
                       "Check the script for an endless loop, or raise the time-out.", file);
    }
    json reply = json::parse(line, nullptr, false);
    if (reply.is_discarded() || !reply.is_object() || reply.value("id", int64_t{-1}) != id)
      continue; // not ours (a late reply to an earlier request): skip
    if (const auto progress = reply.find("progress"); progress != reply.end()) {
      if (options_.progress && progress->is_string())
        options_.progress(progress->get<std::string>());
      continue;
    }
    if (const auto error = reply.find("error"); error != reply.end())
      return errorFromJson(*error);
    if (const auto result = reply.find("result"); result != reply.end()) {
      try {
        Trace trace = traceFromJson(*result);
        const std::string env = workerPythonEnv(options_);
        trace.pythonEnv = env.empty() ? kSystemPythonEnv : env;
        return trace;
      } catch (const std::exception& e) {
        return makeError(ProfileErrorKind::Internal,
                         std::string("the worker sent an unreadable trace: ") + e.what(),
                         "This is a wavecast bug; please report it.", file);
      }
    }
  }
}

} // namespace wavecast
