// `wavecast calibrate`: runs the calibration suite (wavecast_tracer.calibrate) with the
// python of the user's environment, the one whose torch traces their scripts. It is a
// plain child process, not the worker: it needs the GPU and torch, nothing the worker
// embeds. Its progress lines reach the terminal on stderr as they come; its last stdout
// line says where the file went, or why this machine cannot calibrate.
#include "cli/commands.h"
#include "cli/shared.h"
#include "wavecast/profiler/profiler.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace wavecast::cli {
namespace {

namespace fs = std::filesystem;

// The interpreter of --python-env (else the layout's environment): VENV/bin/python, a
// python executable itself, or the system's python3.
std::string pythonOf(const InstallLayout& layout, const CommandLine& args) {
  std::string env = args.value("python-env").value_or(layout.pythonEnv);
  if (env.empty()) {
    if (!layout.missingPythonEnv.empty())
      throw CommandError("the Python environment wavecast was built with, " +
                         layout.missingPythonEnv +
                         ", does not exist here; pass --python-env with one that has a CUDA "
                         "build of torch");
    env = kSystemPythonEnv;
  }
  if (env == kSystemPythonEnv)
    return "python3";
  std::error_code ec;
  if (fs::is_directory(env, ec)) {
    const fs::path python = fs::path(env) / "bin" / "python";
    if (!fs::exists(python, ec))
      throw CommandError("'" + env + "' has no bin/python; pass --python-env a virtualenv");
    return python.string();
  }
  if (!fs::exists(env, ec))
    throw CommandError("Python environment '" + env + "' does not exist");
  return env;
}

// Runs `argv` with PYTHONPATH led by `pythonPath`, its stderr on ours; returns its stdout
// and exit status. Ctrl-C reaches the child (same process group), which writes what it
// measured: this process ignores SIGINT meanwhile, then reports it.
std::pair<std::string, int> runSuite(const std::vector<std::string>& words,
                                     const std::string& pythonPath) {
  int out[2];
  if (pipe(out) != 0)
    throw CommandError(std::string("cannot create a pipe: ") + std::strerror(errno));
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &previous);
  const pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &previous, nullptr);
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    const char* existing = std::getenv("PYTHONPATH");
    const std::string path =
        existing && *existing ? pythonPath + ":" + existing : std::string(pythonPath);
    setenv("PYTHONPATH", path.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& word : words)
      argv.push_back(const_cast<char*>(word.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::cerr << "wavecast: error: cannot run " << words[0] << ": " << std::strerror(errno)
              << "\n";
    _exit(127);
  }
  close(out[1]);
  if (pid < 0) {
    close(out[0]);
    sigaction(SIGINT, &previous, nullptr);
    throw CommandError(std::string("cannot start the calibration: ") + std::strerror(errno));
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n > 0)
      text.append(buffer, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  sigaction(SIGINT, &previous, nullptr);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {text, code};
}

// The suite's answer: the last line of its stdout that is a JSON object.
nlohmann::json lastAnswer(const std::string& text) {
  size_t end = text.size();
  while (end > 0) {
    const size_t start = text.rfind('\n', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    const auto doc = nlohmann::json::parse(text.substr(from, end - from), nullptr, false);
    if (!doc.is_discarded() && doc.is_object())
      return doc;
    if (start == std::string::npos)
      break;
    end = start;
  }
  return nlohmann::json();
}

int runCalibrate(const CommandLine& args, const InstallLayout& layout) {
  const std::string python = pythonOf(layout, args);
  std::vector<std::string> words{python, "-m", "wavecast_tracer.calibrate"};
  if (const auto out = args.value("out")) {
    words.insert(words.end(), {"--out", fs::absolute(*out).lexically_normal().string()});
  } else {
    if (layout.userCalibrationDir.empty())
      throw CommandError("no folder for calibration files: set HOME, XDG_CONFIG_HOME or "
                         "WAVECAST_CALIBRATION_DIR, or pass --out FILE");
    words.insert(words.end(), {"--out-dir", layout.userCalibrationDir});
  }
  if (args.has("quick"))
    words.push_back("--quick");
  if (const auto timer = args.value("timer")) {
    if (*timer != "events" && *timer != "cupti")
      throw UsageError("--timer must be events or cupti, not '" + *timer + "'");
    words.insert(words.end(), {"--timer", *timer});
  }

  const auto [output, status] = runSuite(words, layout.pythonDir);
  const nlohmann::json answer = lastAnswer(output);
  if (const auto error = answer.find("error"); error != answer.end() && error->is_object())
    throw CommandError(error->value("message", std::string("cannot calibrate")) + " (" +
                       error->value("hint", std::string()) + ")");
  const auto result = answer.find("result");
  if (result == answer.end() || !result->is_object())
    throw CommandError("the calibration suite stopped (" + python + " exited with status " +
                       std::to_string(status) + "); its messages are above");
  const bool complete = result->value("complete", false);
  std::cerr << "wavecast: wrote " << result->value("entries", 0) << " op timings of "
            << result->value("gpu", std::string()) << " to " << result->value("path", std::string())
            << (complete ? "" : " (incomplete: interrupted before every case ran)") << "\n";
  return status;
}

} // namespace

Command calibrateCommand() {
  return {{"calibrate",
           "[--quick] [--out FILE] [--python-env DIR]",
           "Benchmark this machine's GPU and write a calibration file that predictions for it "
           "use. With your torch, in at most 10 minutes (--quick: 2), it times GEMMs, "
           "convolutions, attention, norms, elementwise ops and optimizers in fp32, TF32, bf16 "
           "and fp16, forward and backward, and the CPU's cost per op (docs/calibration.md). "
           "Ctrl-C keeps what was measured.",
           {{"quick", "", "the quick cases only, about 2 minutes"},
            {"out", "FILE",
             "where to write (default: ~/.config/wavecast/calibration/<gpu>.json, where "
             "predictions find it)"},
            {"timer", "events|cupti",
             "time each op with CUDA events (default) or by its kernels' time from CUPTI"},
            pythonEnvOption()},
           0,
           0},
          runCalibrate,
          {}};
}

} // namespace wavecast::cli
