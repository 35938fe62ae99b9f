// Fitted per-family models predicting a kernel's time on a GPU from the op's
// shape and the GPU's spec sheet. Each model predicts log(time / roofline
// bound), i.e. minus the log of the kernel's utilisation of the roofline, and
// the time is the bound divided by that utilisation. Torch stays behind the pimpl.
#pragma once

#include "wavecast/learned/kernel_shape.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace wavecast::learned {

struct KernelQuery {
  KernelShape shape;
  GpuFeatures gpu;
};

class LearnedModels {
public:
  // Reads `weightsDir`/manifest.json; each family's weights load on first use.
  // Throws std::runtime_error telling how to produce the weights when missing.
  static LearnedModels open(const std::string& weightsDir);

  LearnedModels(LearnedModels&&) noexcept;
  LearnedModels& operator=(LearnedModels&&) noexcept;
  ~LearnedModels();

  bool covers(KernelFamily family) const;
  // The fastest time any training row of `family` shows: each was timed with CUDA
  // events around one call, so this is launch and timer overhead, not a kernel. The
  // networks model such timings; below the floor they say nothing of kernel time.
  double timingFloorMs(KernelFamily family) const;
  // One answer per query (ms), in order, run batched per family; nullopt when the
  // family has no model or the shape or GPU is invalid.
  std::vector<std::optional<double>> predictMs(const std::vector<KernelQuery>& queries) const;
  // GPUs whose measurements trained the models (device_configs stems).
  std::vector<std::string> trainingGpus() const;
  const std::string& directory() const;

private:
  struct Impl;
  explicit LearnedModels(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace wavecast::learned
