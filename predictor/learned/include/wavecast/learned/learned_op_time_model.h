// The learned models as the Predictor's OpTimeModel plug-in: FP32 GEMMs
// (addmm, mm, bmm, matmul, linear), 2-D convolutions, layer norm, softmax and
// elementwise ops are answered from the op's shapes and the GPU's spec sheet;
// anything else (other dtypes, grouped or dilated convolutions, ...) is left
// to the analytic model.
#pragma once

#include "wavecast/learned/kernel_shape.h"
#include "wavecast/learned/learned_models.h"
#include "wavecast/predictor/op_time_model.h"

#include <optional>
#include <set>
#include <string>

namespace wavecast::learned {

// The kernel the learned models would time for `op`; nullopt when not covered.
std::optional<KernelShape> kernelShapeOf(const OpRecord& op);

class LearnedOpTimeModel : public OpTimeModel {
public:
  explicit LearnedOpTimeModel(LearnedModels models);
  // Opens `weightsDir` (see LearnedModels::open).
  static std::shared_ptr<LearnedOpTimeModel> open(const std::string& weightsDir);

  std::vector<std::optional<double>>
  predictMs(const std::vector<OpTimeQuery>& queries) const override;
  std::string name() const override { return "MLPs trained on NeuSight's GPU measurements"; }
  // The training GPUs are NeuSight folder names, which the GPU database lists as
  // aliases ("Tesla_T4").
  bool measuredOn(const DeviceSpec& gpu) const override;

private:
  LearnedModels models_;
  std::set<std::string> measuredGpus_; // training GPUs, normalizedGpuName
};

} // namespace wavecast::learned
