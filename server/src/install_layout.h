// Where the running wavecast finds its helpers, data files and Python sources:
// in an installation (cmake --install, the .deb) relative to its own
// executable, else in the build tree it was built in.
#pragma once

#include <functional>
#include <string>

namespace wavecast {

// The trace-store folder (--trace-store, WAVECAST_TRACE_STORE) that turns the store off.
inline constexpr const char* kNoTraceStore = "none";

struct InstallLayout {
  std::string dataDir;    // holds gpus.json, systems.json, collectives.json, tensor_core_gemm.json, weights/
  std::string workerPath; // the wavecast-worker executable
  std::string learnPath;  // wavecast-learn: `train` and `eval` (they need LibTorch)
  std::string pythonDir;  // holds the wavecast_tracer package
  // The worker's default environment: a venv (torch 2.x), or kSystemPythonEnv for the
  // embedded interpreter's own packages; empty when none is usable (missingPythonEnv).
  std::string pythonEnv;
  // The venv wavecast was configured with, when it is not on this machine and nothing
  // else chose one: tracing then says so instead of silently using the system's torch.
  std::string missingPythonEnv;
  std::string userGpuFile;    // optional user additions/overrides; may not exist
  std::string userSystemFile; // the same for systems.json
  // Where `wavecast calibrate` writes and predictions read the user's calibration files.
  std::string userCalibrationDir;
  // Where the daemon keeps traces between runs ($XDG_CACHE_HOME/wavecast/traces, or
  // WAVECAST_TRACE_STORE); kNoTraceStore keeps none.
  std::string userTraceStoreDir;
  bool installed = false;  // false: running from the build tree

  std::string gpuDatabasePath() const { return dataDir + "/gpus.json"; }
  std::string tensorCoreGemmPath() const { return dataDir + "/tensor_core_gemm.json"; }
  std::string systemDatabasePath() const { return dataDir + "/systems.json"; }
  std::string collectivesPath() const { return dataDir + "/collectives.json"; }
  // The calibration files shipped with wavecast.
  std::string calibrationDir() const { return dataDir + "/calibration"; }
  // What to do when one of the files above is missing.
  std::string repairAdvice() const;

  // An environment variable's value; empty when unset.
  using Environment = std::function<std::string(const char* name)>;

  // The layout of the running executable (/proc/self/exe, else argv0) with
  // the process environment's overrides.
  static InstallLayout discover(const char* argv0);

  // The layout of an executable in `executableDir`: installed when the data
  // directory sits where cmake --install puts it relative to bin/, else the
  // build tree (helpers beside the executable, data and tracer in the source
  // tree). WAVECAST_DATA_DIR, WAVECAST_WORKER, WAVECAST_PYTHON_DIR,
  // WAVECAST_PYTHON_ENV ('system': the interpreter's own packages) and
  // WAVECAST_GPU_FILE, WAVECAST_SYSTEM_FILE, WAVECAST_CALIBRATION_DIR and WAVECAST_TRACE_STORE
  // override each part; without WAVECAST_PYTHON_ENV the default
  // venv is the one wavecast was configured with (build/python-env) if it exists
  // here, else none (missingPythonEnv).
  static InstallLayout resolve(const std::string& executableDir, const Environment& environment);
};

} // namespace wavecast
