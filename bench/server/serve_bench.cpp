// Timing program for `wavecast serve`, driven over stdio like an editor:
//   1. idle memory of the daemon before any analysis (no worker yet),
//   2. didSave -> first inlay hints for a sample with a warm worker,
//   3. hover / inlayHint latency while an analysis runs.
// Usage: serve_bench WAVECAST_BIN SAMPLE.py [ROUNDS]
// Goals: (2) under 3 s for samples/resnet50.py, (3) p99 under 5 ms,
// (1) under 50 MB.
#include "wavecast/protocol/framing.h"
#include "wavecast/protocol/jsonrpc.h"
#include "wavecast/protocol/lsp.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <poll.h>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace wavecast::protocol;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class Daemon {
public:
  explicit Daemon(const std::vector<std::string>& argv) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0)
      throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[1]);
      ::close(out[0]);
      std::vector<char*> args;
      for (const auto& arg : argv)
        args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::perror("execv");
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    toDaemon_ = in[1];
    fromDaemon_ = out[0];
  }
  ~Daemon() {
    ::close(toDaemon_);
    ::close(fromDaemon_);
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }

  pid_t pid() const { return pid_; }

  void send(const std::string& body) {
    std::string frame = encodeFrame(body);
    if (::write(toDaemon_, frame.data(), frame.size()) != static_cast<ssize_t>(frame.size()))
      throw std::runtime_error("write to the daemon failed");
  }
  void notify(const std::string& method, const Json& params) {
    send(encodeNotification(method, params));
  }
  int sendRequest(const std::string& method, const Json& params) {
    int id = nextId_++;
    send(encodeRequest(id, method, params));
    return id;
  }
  // Reads until the response to `id`; notifications are kept, requests answered.
  Json awaitResponse(int id, double timeoutMs = 600000) {
    auto start = Clock::now();
    for (;;) {
      Json message = next(timeoutMs - msSince(start));
      if (message.contains("method")) {
        if (message.contains("id"))
          send(encodeResult(message["id"], nullptr));
        else
          notifications.push_back(message);
        continue;
      }
      if (message.value("id", Json()) == id)
        return message;
    }
  }
  Json request(const std::string& method, const Json& params) {
    return awaitResponse(sendRequest(method, params));
  }
  // Waits for a notification matching `match` (including ones already received).
  template <typename Match> Json awaitNotification(Match match, double timeoutMs = 600000) {
    auto start = Clock::now();
    for (;;) {
      for (size_t i = 0; i < notifications.size(); ++i) {
        if (match(notifications[i])) {
          Json found = notifications[i];
          notifications.erase(notifications.begin() + static_cast<long>(i));
          return found;
        }
      }
      Json message = next(timeoutMs - msSince(start));
      if (message.contains("method") && message.contains("id"))
        send(encodeResult(message["id"], nullptr));
      else if (message.contains("method"))
        notifications.push_back(message);
    }
  }

  std::vector<Json> notifications;

private:
  Json next(double timeoutMs) {
    for (;;) {
      if (auto frame = decoder_.next()) {
        if (auto* body = std::get_if<std::string>(&*frame))
          return Json::parse(*body);
        throw std::runtime_error("bad frame from the daemon");
      }
      pollfd fd{fromDaemon_, POLLIN, 0};
      if (timeoutMs <= 0 || ::poll(&fd, 1, static_cast<int>(timeoutMs)) <= 0)
        throw std::runtime_error("timed out waiting for the daemon");
      char buffer[65536];
      ssize_t size = ::read(fromDaemon_, buffer, sizeof buffer);
      if (size <= 0)
        throw std::runtime_error("the daemon closed its output");
      decoder_.feed(std::string_view(buffer, static_cast<size_t>(size)));
    }
  }

  pid_t pid_ = -1;
  int toDaemon_ = -1;
  int fromDaemon_ = -1;
  int nextId_ = 1;
  FrameDecoder decoder_;
};

long rssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return -1;
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: serve_bench WAVECAST_BIN SAMPLE.py [ROUNDS]\n";
    return 2;
  }
  const std::string bin = argv[1];
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  fs::path dir = fs::temp_directory_path() / ("wavecast-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path sample = dir / fs::path(argv[2]).filename();
  fs::copy_file(argv[2], sample, fs::copy_options::overwrite_existing);
  std::string original;
  {
    std::ifstream in(sample);
    std::stringstream text;
    text << in.rdbuf();
    original = text.str();
  }
  const std::string uri = pathToUri(sample.string());

  try {
    Daemon daemon({bin, "serve", "--gpu", "H100,A100,T4", "--debounce-ms", "0"});
    daemon.request("initialize",
                   {{"processId", nullptr},
                    {"capabilities", {{"textDocument", {{"inlayHint", Json::object()}}}}},
                    {"initializationOptions", {{"protocol_version", 2}}}});
    daemon.notify("initialized", Json::object());
    daemon.notify("textDocument/didOpen",
                  {{"textDocument",
                    {{"uri", uri}, {"languageId", "python"}, {"version", 1}, {"text", original}}}});
    daemon.request("wavecast/listGpus", nullptr); // everything above is processed
    std::printf("idle RSS (initialized, document open, no worker): %.1f MB\n",
                static_cast<double>(rssKiB(daemon.pid())) / 1024.0);

    auto isDone = [&](const Json& n) {
      return n["method"] == "wavecast/resultsChanged" && n["params"]["uri"] == uri &&
             n["params"]["state"] != "analyzing";
    };
    const Json hintParams = {{"textDocument", {{"uri", uri}}},
                             {"range",
                              {{"start", {{"line", 0}, {"character", 0}}},
                               {"end", {{"line", 100000}, {"character", 0}}}}}};

    // Warm-up: starts the worker (imports torch) and fills the results.
    auto start = Clock::now();
    daemon.notify("textDocument/didSave", {{"textDocument", {{"uri", uri}}}});
    Json first = daemon.awaitNotification(isDone);
    std::printf("cold didSave -> results (worker start included): %.0f ms (%s)\n", msSince(start),
                first["params"]["state"].get<std::string>().c_str());
    if (first["params"]["state"] != "ready") {
      std::cerr << daemon.request("wavecast/results", {{"uri", uri}}).dump(2) << "\n";
      return 1;
    }

    // Hover the busiest line of the sample: the largest answer hover produces.
    Json prediction = daemon.request("wavecast/results", {{"uri", uri}})["result"]["prediction"];
    int busiest = 1;
    size_t mostOps = 0;
    for (const auto& line : prediction["lines"])
      if (line["file"] == sample.string() && line["ops"].size() >= mostOps) {
        mostOps = line["ops"].size();
        busiest = line["line"].get<int>();
      }
    const Json hoverParams = {{"textDocument", {{"uri", uri}}},
                              {"position", {{"line", busiest - 1}, {"character", 4}}}};

    std::vector<double> saveToHints, hoverMs, hintMs;
    for (int round = 0; round < rounds; ++round) {
      // New content (a comment) so the cache cannot answer.
      std::string edited = original + "\n# bench round " + std::to_string(round) + "\n";
      std::ofstream(sample) << edited;
      daemon.notify("textDocument/didChange",
                    {{"textDocument", {{"uri", uri}, {"version", round + 2}}},
                     {"contentChanges", {{{"text", edited}}}}});
      start = Clock::now();
      daemon.notify("textDocument/didSave", {{"textDocument", {{"uri", uri}}}});
      // While the analysis runs: hover and inlay hints answer from the last results.
      bool done = false;
      while (!done) {
        auto t = Clock::now();
        daemon.request("textDocument/hover", hoverParams);
        hoverMs.push_back(msSince(t));
        t = Clock::now();
        daemon.request("textDocument/inlayHint", hintParams);
        hintMs.push_back(msSince(t));
        for (const auto& n : daemon.notifications)
          done = done || isDone(n);
        ::usleep(2000);
      }
      daemon.awaitNotification(isDone);
      Json hints = daemon.request("textDocument/inlayHint", hintParams);
      saveToHints.push_back(msSince(start));
      if (hints["result"].empty())
        throw std::runtime_error("no inlay hints after the analysis");
    }
    std::sort(saveToHints.begin(), saveToHints.end());
    std::printf(
        "warm didSave -> first inlay hints: median %.0f ms, min %.0f, max %.0f (%d rounds)\n",
        percentile(saveToHints, 0.5), saveToHints.front(), saveToHints.back(), rounds);
    std::printf("hover while analysing: p50 %.3f ms, p99 %.3f ms, max %.3f ms (%zu requests)\n",
                percentile(hoverMs, 0.5), percentile(hoverMs, 0.99),
                *std::max_element(hoverMs.begin(), hoverMs.end()), hoverMs.size());
    std::printf("inlayHint while analysing: p50 %.3f ms, p99 %.3f ms, max %.3f ms (%zu requests)\n",
                percentile(hintMs, 0.5), percentile(hintMs, 0.99),
                *std::max_element(hintMs.begin(), hintMs.end()), hintMs.size());
    daemon.request("shutdown", nullptr);
    daemon.notify("exit", nullptr);
  } catch (const std::exception& error) {
    std::cerr << "serve_bench: " << error.what() << "\n";
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  return 0;
}
