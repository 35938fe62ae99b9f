#include "install_layout.h"

#include "wavecast/profiler/profiler.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace wavecast {
namespace fs = std::filesystem;

namespace {

fs::path executableDir(const char* argv0) {
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    self = fs::absolute(argv0 ? argv0 : "wavecast", ec);
  return self.parent_path();
}

std::string normal(const fs::path& path) {
  return path.lexically_normal().string();
}

} // namespace

std::string InstallLayout::repairAdvice() const {
  return installed ? "reinstall wavecast (cmake --install, or its package)"
                   : "rebuild wavecast (scripts/setup.sh build)";
}

InstallLayout InstallLayout::discover(const char* argv0) {
  return resolve(executableDir(argv0).string(), [](const char* name) {
    const char* value = std::getenv(name);
    return value ? std::string(value) : std::string();
  });
}

InstallLayout InstallLayout::resolve(const std::string& executableDir,
                                     const Environment& environment) {
  const fs::path bin = executableDir;
  InstallLayout layout;
  std::error_code ec;
  layout.installed = fs::is_directory(bin / WAVECAST_BIN_TO_DATA, ec);

  const fs::path helpers = layout.installed ? bin / WAVECAST_BIN_TO_HELPERS : bin;
  layout.workerPath = normal(helpers / WAVECAST_WORKER_NAME);
  layout.learnPath = normal(helpers / WAVECAST_LEARN_NAME);
  layout.dataDir = normal(layout.installed ? bin / WAVECAST_BIN_TO_DATA
                                           : fs::path(WAVECAST_BUILD_TREE_DATA_DIR));
  layout.pythonDir = normal(layout.installed ? bin / WAVECAST_BIN_TO_PYTHON
                                             : fs::path(WAVECAST_BUILD_TREE_PYTHON_DIR));

  // The venv recorded at configure time serves the build tree and an
  // installation on the machine that built it. Elsewhere it does not exist, and
  // the system's torch (Debian's 1.13) would trace differently: only used when asked.
  const fs::path configuredEnv = WAVECAST_CONFIGURED_PYTHON_ENV;
  if (configuredEnv.empty())
    layout.pythonEnv = kSystemPythonEnv; // configured for the system's packages
  else if (fs::exists(configuredEnv / "pyvenv.cfg", ec))
    layout.pythonEnv = configuredEnv.string();
  else
    layout.missingPythonEnv = configuredEnv.string();

  const auto override = [&](std::string& part, const char* name) {
    std::string value = environment(name);
    if (!value.empty())
      part = std::move(value);
  };
  override(layout.dataDir, "WAVECAST_DATA_DIR");
  override(layout.workerPath, "WAVECAST_WORKER");
  override(layout.pythonDir, "WAVECAST_PYTHON_DIR");
  if (const std::string chosen = environment("WAVECAST_PYTHON_ENV"); !chosen.empty()) {
    layout.pythonEnv = chosen;
    layout.missingPythonEnv.clear();
  }

  const std::string config = environment("XDG_CONFIG_HOME");
  const std::string home = environment("HOME");
  const std::string userConfig = !config.empty() ? config + "/wavecast"
                                 : !home.empty() ? home + "/.config/wavecast"
                                                 : std::string();
  // Each user file: its environment variable, else its place in the user's config folder.
  const auto userPath = [&](const char* variable, const char* name) {
    std::string path = environment(variable);
    return !path.empty() || userConfig.empty() ? path : userConfig + "/" + name;
  };
  layout.userGpuFile = userPath("WAVECAST_GPU_FILE", "gpus.json");
  layout.userCalibrationDir = userPath("WAVECAST_CALIBRATION_DIR", "calibration");
  layout.userSystemFile = userPath("WAVECAST_SYSTEM_FILE", "systems.json");
  const std::string cache = environment("XDG_CACHE_HOME");
  layout.userTraceStoreDir = environment("WAVECAST_TRACE_STORE");
  if (layout.userTraceStoreDir.empty())
    layout.userTraceStoreDir = !cache.empty()  ? cache + "/wavecast/traces"
                               : !home.empty() ? home + "/.cache/wavecast/traces"
                                               : std::string(kNoTraceStore);
  return layout;
}

} // namespace wavecast
