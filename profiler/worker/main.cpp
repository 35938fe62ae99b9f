// wavecast-worker: embeds CPython and serves trace requests from its parent
// (wavecast_profiler) over dedicated file descriptors. The request loop is
// wavecast_tracer.worker.serve; this program only prepares the interpreter.
#include "python_environment.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <pybind11/embed.h>
#include <string>
#include <unistd.h>

namespace py = pybind11;
namespace fs = std::filesystem;

namespace {

struct WorkerArgs {
  int requestFd = -1;
  int responseFd = -1;
  int crashFd = -1;
  std::string pythonPath;
  std::string pythonEnv;
  bool showTorchLogs = false;
  bool warmUp = false;
  std::string scratch;
};

const char* kUsage = "usage: wavecast-worker --request-fd N --response-fd N --crash-fd N "
                     "--python-path DIR [--python-env VENV|VENV/bin/python] "
                     "[--torch-logs hidden|shown] [--warm-up yes|no] [--scratch DIR]\n"
                     "Started by wavecast; not meant to be run by hand.\n";

bool parseArgs(int argc, char** argv, WorkerArgs& args) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--request-fd")
      args.requestFd = std::atoi(value.c_str());
    else if (key == "--response-fd")
      args.responseFd = std::atoi(value.c_str());
    else if (key == "--crash-fd")
      args.crashFd = std::atoi(value.c_str());
    else if (key == "--python-path")
      args.pythonPath = value;
    else if (key == "--python-env")
      args.pythonEnv = value;
    else if (key == "--torch-logs" && (value == "hidden" || value == "shown"))
      args.showTorchLogs = value == "shown";
    else if (key == "--warm-up" && (value == "yes" || value == "no"))
      args.warmUp = value == "yes";
    else if (key == "--scratch")
      args.scratch = value;
    else
      return false;
  }
  return argc % 2 == 1 && args.requestFd >= 0 && args.responseFd >= 0 && args.crashFd >= 0 &&
         !args.pythonPath.empty();
}

std::string jsonEscape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// Reports a start-up failure as the worker's "ready" event, then exits.
int failStartup(int responseFd, const std::string& message, const std::string& hint,
                const std::string& traceback = "") {
  const std::string line = "{\"event\":\"ready\",\"error\":{\"kind\":\"environment_error\","
                           "\"message\":\"" +
                           jsonEscape(message) + "\",\"hint\":\"" + jsonEscape(hint) +
                           "\",\"traceback\":\"" + jsonEscape(traceback) +
                           "\",\"file\":\"\",\"line\":0}}\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(responseFd, line.data() + done, line.size() - done);
    if (n <= 0)
      break;
    done += static_cast<size_t>(n);
  }
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  WorkerArgs args;
  if (!parseArgs(argc, argv, args)) {
    std::fputs(kUsage, stderr);
    return 64;
  }
  const std::string ours =
      std::to_string(PY_MAJOR_VERSION) + "." + std::to_string(PY_MINOR_VERSION);
  wavecast::worker::PythonEnvironment env; // no --python-env: the interpreter's own packages
  if (!args.pythonEnv.empty()) {
    auto resolved = wavecast::worker::resolvePythonEnvironment(args.pythonEnv, ours,
                                                               WAVECAST_PYTHON_EXECUTABLE);
    if (auto* error = std::get_if<wavecast::worker::PythonEnvironmentError>(&resolved))
      return failStartup(args.responseFd, error->message, error->hint);
    env = std::get<wavecast::worker::PythonEnvironment>(resolved);
  }

  // Python derives its prefix (stdlib, site-packages) from the program name,
  // found on PATH by default: a pyenv or conda python3 first on the user's
  // PATH would hide the interpreter this worker was built against (and its
  // torch). Name that interpreter explicitly.
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  PyConfig_SetBytesString(&config, &config.program_name, WAVECAST_PYTHON_EXECUTABLE);
  py::scoped_interpreter interpreter(&config);
  try {
    py::module_ sys = py::module_::import("sys");
    py::list path = sys.attr("path");
    path.insert(0, args.pythonPath);
    if (!env.seesSystemPackages) {
      // A venv made without --system-site-packages sees only its own packages,
      // as its own python would.
      py::module_ site = py::module_::import("site");
      py::list systemSites = site.attr("getsitepackages")();
      systemSites.append(site.attr("getusersitepackages")());
      for (const auto& dir : systemSites)
        while (path.contains(dir))
          path.attr("remove")(dir);
    }
    if (!env.sitePackages.empty()) {
      // site.addsitedir also processes the venv's .pth files; its entries must
      // win over the system's dist-packages, so they move to the front.
      const auto before = py::len(path);
      py::module_::import("site").attr("addsitedir")(env.sitePackages.string());
      py::list added = path[py::slice(before, py::len(path), 1)];
      for (size_t i = 0; i < py::len(added); ++i)
        path.attr("remove")(added[i]);
      for (size_t i = py::len(added); i-- > 0;)
        path.insert(1, added[i]);
    }
    // Looked up, not imported (that takes seconds): a venv's own torch, or one its .pth
    // files or PYTHONPATH reach.
    if (!env.root.empty() && !env.seesSystemPackages &&
        py::module_::import("importlib.util").attr("find_spec")("torch").is_none())
      return failStartup(args.responseFd,
                         "the Python environment " + env.root.string() + " has no torch",
                         "Install it there (" + (env.root / "bin" / "pip").string() +
                             " install torch) or choose another Python environment.");
    sys.attr("dont_write_bytecode") = true; // never leave stale .pyc files in the user's project
    // Errors name the environment and its pip, which the embedded interpreter cannot tell.
    py::module_::import("wavecast_tracer.environment")
        .attr("configure")(env.root.empty() ? py::object(py::none())
                                            : py::object(py::str(env.root.string())));
    py::module_ worker = py::module_::import("wavecast_tracer.worker");
    return worker
        .attr("serve")(
            args.requestFd, args.responseFd, args.crashFd,
            py::arg("show_torch_logs") = args.showTorchLogs, py::arg("warm_up") = args.warmUp,
            py::arg("scratch") =
                args.scratch.empty() ? py::object(py::none()) : py::object(py::str(args.scratch)),
            py::arg("wavecast_version") = WAVECAST_VERSION)
        .cast<int>();
  } catch (const py::error_already_set& error) {
    return failStartup(args.responseFd,
                       std::string("cannot start the Python tracer: ") + error.what(),
                       "Check that the wavecast_tracer package is in " + args.pythonPath +
                           " and that the Python environment is complete.");
  }
}
