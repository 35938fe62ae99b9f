// Turns a trace into per-op, per-line, per-module and per-GPU predictions.
#pragma once

#include "wavecast/predictor/calibration.h"
#include "wavecast/predictor/collectives.h"
#include "wavecast/predictor/device_spec.h"
#include "wavecast/predictor/host_model.h"
#include "wavecast/predictor/op_time_model.h"
#include "wavecast/predictor/prediction.h"
#include "wavecast/predictor/roofline.h"
#include "wavecast/predictor/system_database.h"
#include "wavecast/trace.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace wavecast {

struct PredictorOptions {
  // Overrides of the script's TF32 settings (the trace's `precision`, else torch's
  // defaults): float32 matmuls (cuBLAS) and convolutions/RNNs (cuDNN) on TF32 cores.
  std::optional<bool> matmulTf32;
  std::optional<bool> convTf32;
  // Efficiencies and launch floor of the analytic model.
  RooflineOptions roofline;
  // What the CPU spends issuing each op; with the GPU times it gives the wall time.
  HostOptions host;
  // Asked first, once for all (op, GPU) pairs; the analytic model answers where it
  // returns nullopt.
  std::shared_ptr<const OpTimeModel> opTimeModel;
  // Measured op times per GPU id (`wavecast calibrate`): an op found there (its shape or a
  // near one) takes the measured time, before any model.
  std::map<std::string, std::shared_ptr<const CalibrationTable>> calibrations;
  // The GPU a "cuda"-mode trace was measured on; enables wave scaling of its kernels.
  std::optional<DeviceSpec> originGpu;
  // Memory outside the caching allocator on every GPU: the CUDA context with PyTorch's
  // kernels loaded and the cuDNN/cuBLAS handles (docs/predictor.md).
  int64_t runtimeReserveBytes = int64_t{512} << 20;
  // cuBLAS workspace PyTorch takes from its caching allocator per cuBLAS handle, that is per
  // thread that runs GEMMs (docs/predictor.md): CUBLAS_WORKSPACE_CONFIG ":4096:2:16:8"
  // (2 x 4 MiB + 8 x 16 KiB); compute capability 9.x uses the 32 MiB cuBLAS recommends for
  // Hopper. cuBLASLt shares it (torch >= 2.10's unified workspace).
  int64_t cublasWorkspaceBytes = (int64_t{8} << 20) + (int64_t{128} << 10);
  int64_t cublasWorkspaceBytesSm90 = int64_t{32} << 20;
  // cuDNN convolution workspace: up to the largest operand of a convolution, at most this.
  int64_t convWorkspaceLimitBytes = int64_t{1} << 30;
  // The node each target GPU runs in, by GPU id (a --system choice); a GPU not listed runs
  // in `systemDatabase->defaultFor(id)`. Collectives on a GPU with neither cost nothing.
  std::map<std::string, SystemSpec> systems;
  std::shared_ptr<const SystemDatabase> systemDatabase;
  // What NCCL sustains by link and message size (data/collectives.json).
  CollectiveModel collectives;
  // A trace with compiled ops is also predicted eagerly, for what compiling changes
  // (advisory::CompiledAgainstEager).
  bool compareCompiledWithEager = true;

  // The node `gpu` runs in, or nullopt when none is known.
  std::optional<SystemSpec> systemFor(const DeviceSpec& gpu) const;
};

class Predictor {
public:
  explicit Predictor(PredictorOptions options = {});
  Prediction predict(const Trace& trace, const std::vector<DeviceSpec>& gpus) const;

private:
  PredictorOptions options_;
};

// Memory one training iteration of `trace` needs on `gpu` (docs/predictor.md).
MemoryEstimate estimateMemory(const Trace& trace, const DeviceSpec& gpu,
                              const PredictorOptions& options);

// The bytes PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp) reserves for
// one request of `bytes`: rounded up to 512 B, and a request of 10 MiB or more gets a
// segment of its own rounded up to 2 MiB.
int64_t allocatorBlockBytes(int64_t bytes);

} // namespace wavecast
