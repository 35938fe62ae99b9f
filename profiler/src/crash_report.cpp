#include "crash_report.h"

#include <csignal>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <sys/wait.h>

namespace wavecast {
namespace {

std::string signalName(int signal) {
  switch (signal) {
  case SIGSEGV:
    return "SIGSEGV (segmentation fault)";
  case SIGBUS:
    return "SIGBUS (bus error)";
  case SIGABRT:
    return "SIGABRT (abort)";
  case SIGILL:
    return "SIGILL (illegal instruction)";
  case SIGFPE:
    return "SIGFPE (arithmetic exception)";
  case SIGKILL:
    return "SIGKILL";
  default: {
    const char* text = ::strsignal(signal);
    return "signal " + std::to_string(signal) + (text ? std::string(" (") + text + ")" : "");
  }
  }
}

bool insideProject(const std::string& file, const std::string& root) {
  return !root.empty() && file.size() > root.size() && file.compare(0, root.size(), root) == 0 &&
         file[root.size()] == '/' && file.find("/site-packages/") == std::string::npos &&
         file.find("/dist-packages/") == std::string::npos;
}

} // namespace

std::vector<CrashFrame> parseFaultHandlerFrames(const std::string& report) {
  // Lines look like:   File "/abs/path.py", line 12 in function_name
  std::vector<CrashFrame> frames;
  std::istringstream lines(report);
  std::string text;
  const std::string filePrefix = "File \"";
  while (std::getline(lines, text)) {
    const auto start = text.find(filePrefix);
    if (start == std::string::npos)
      continue;
    const auto fileBegin = start + filePrefix.size();
    const auto fileEnd = text.find("\", line ", fileBegin);
    if (fileEnd == std::string::npos)
      continue;
    CrashFrame frame;
    frame.file = text.substr(fileBegin, fileEnd - fileBegin);
    const auto numberBegin = fileEnd + std::strlen("\", line ");
    size_t consumed = 0;
    try {
      frame.line = std::stoi(text.substr(numberBegin), &consumed);
    } catch (const std::exception&) {
      continue;
    }
    const auto in = text.find(" in ", numberBegin + consumed);
    if (in != std::string::npos)
      frame.function = text.substr(in + 4);
    frames.push_back(std::move(frame));
  }
  return frames;
}

ProfileError crashError(int waitStatus, const std::string& crashReport,
                        const std::string& entryFile) {
  ProfileError error;
  error.traceback = crashReport;
  const std::string root = std::filesystem::path(entryFile).parent_path().string();
  for (const auto& frame : parseFaultHandlerFrames(crashReport)) {
    if (insideProject(frame.file, root)) {
      error.file = frame.file;
      error.line = frame.line;
      break;
    }
  }
  if (error.file.empty())
    error.file = entryFile;

  if (WIFSIGNALED(waitStatus) && WTERMSIG(waitStatus) == SIGKILL) {
    error.kind = ProfileErrorKind::OutOfMemory;
    error.message =
        "the worker was killed by SIGKILL, most likely by the system's out-of-memory killer";
    error.hint = "Use a smaller batch size or model, or trace in shape mode.";
  } else if (WIFSIGNALED(waitStatus)) {
    error.kind = ProfileErrorKind::WorkerCrashed;
    error.message = "the worker crashed with " + signalName(WTERMSIG(waitStatus)) +
                    " while running your script";
    error.hint = error.line > 0 ? "The crash happened in native code called from the line shown; "
                                  "check the extension or the arguments passed to it."
                                : "The crash happened in native code; check the extensions your "
                                  "script uses.";
  } else if (WIFEXITED(waitStatus) && WEXITSTATUS(waitStatus) == 127) {
    error.kind = ProfileErrorKind::EnvironmentError;
    error.message = "the profiler worker could not be executed";
    error.hint = "Rebuild wavecast (ninja wavecast-worker).";
  } else {
    error.kind = ProfileErrorKind::WorkerCrashed;
    error.message = "the worker exited with status " +
                    std::to_string(WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus) : -1) +
                    " while running your script";
    error.hint = "Remove calls to sys.exit/os._exit from the code the providers run.";
  }
  return error;
}

} // namespace wavecast
