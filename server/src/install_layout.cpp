#include "install_layout.h"

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

std::string fromEnv(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

// The first candidate directory that holds `probe`, else the last candidate.
std::string firstHolding(std::initializer_list<fs::path> candidates, const char* probe) {
  fs::path last;
  for (const auto& dir : candidates) {
    std::error_code ec;
    if (fs::exists(dir / probe, ec))
      return dir.lexically_normal().string();
    last = dir;
  }
  return last.lexically_normal().string();
}

} // namespace

InstallLayout InstallLayout::discover(const char* argv0) {
  const fs::path exeDir = executableDir(argv0);
  const fs::path sourceRoot = WAVECAST_SOURCE_ROOT;
  InstallLayout layout;

  layout.dataDir = fromEnv("WAVECAST_DATA_DIR");
  if (layout.dataDir.empty())
    layout.dataDir = firstHolding(
        {exeDir / "../share/wavecast/data", exeDir / "../../data", sourceRoot / "data"},
        "gpus.json");

  layout.workerPath = fromEnv("WAVECAST_WORKER");
  if (layout.workerPath.empty())
    layout.workerPath = (exeDir / "wavecast-worker").string();

  layout.learnPath = (exeDir / "wavecast-learn").string();

  layout.pythonDir = fromEnv("WAVECAST_PYTHON_DIR");
  if (layout.pythonDir.empty())
    layout.pythonDir =
        firstHolding({exeDir / "../share/wavecast/python", exeDir / "../../profiler/python",
                      sourceRoot / "profiler/python"},
                     "wavecast_tracer");

  // scripts/setup.sh creates build/python-env beside build/bin; an installed
  // package keeps one in lib/wavecast/. Without either the worker uses the
  // system interpreter's packages.
  layout.pythonEnv = fromEnv("WAVECAST_PYTHON_ENV");
  if (layout.pythonEnv.empty()) {
    const std::string found = firstHolding(
        {exeDir / "../python-env", exeDir / "../lib/wavecast/python-env"}, "pyvenv.cfg");
    std::error_code ec;
    if (fs::exists(fs::path(found) / "pyvenv.cfg", ec))
      layout.pythonEnv = found;
  }

  layout.userGpuFile = fromEnv("WAVECAST_GPU_FILE");
  if (layout.userGpuFile.empty()) {
    const std::string config = fromEnv("XDG_CONFIG_HOME");
    const std::string home = fromEnv("HOME");
    if (!config.empty())
      layout.userGpuFile = config + "/wavecast/gpus.json";
    else if (!home.empty())
      layout.userGpuFile = home + "/.config/wavecast/gpus.json";
  }
  return layout;
}

} // namespace wavecast
