// Where the running wavecast finds its data files, worker and Python sources.
#pragma once

#include <string>

namespace wavecast {

struct InstallLayout {
  std::string dataDir;     // holds gpus.json and weights/
  std::string workerPath;  // the wavecast-worker executable
  std::string learnPath;   // wavecast-learn: `train` and `eval` (they need LibTorch)
  std::string pythonDir;   // holds the wavecast_tracer package
  std::string pythonEnv;   // the worker's default venv (torch 2.x); empty: the system's
  std::string userGpuFile; // optional user additions/overrides; may not exist

  std::string gpuDatabasePath() const { return dataDir + "/gpus.json"; }

  // Resolves from the executable's location, then the source tree compiled in;
  // WAVECAST_DATA_DIR, WAVECAST_WORKER, WAVECAST_PYTHON_DIR and
  // WAVECAST_PYTHON_ENV override each part.
  static InstallLayout discover(const char* argv0);
};

} // namespace wavecast
