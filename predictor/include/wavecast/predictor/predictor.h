// Turns a trace into per-op, per-line and per-GPU predictions.
#pragma once

#include <vector>

#include "wavecast/predictor/device_spec.h"
#include "wavecast/predictor/prediction.h"
#include "wavecast/trace.h"

namespace wavecast {

struct PredictorOptions {
  // Compute dtype policy: allow TF32 tensor cores for float32 matmuls/convs.
  bool allowTf32 = false;
};

class Predictor {
public:
  explicit Predictor(PredictorOptions options = {});
  Prediction predict(const Trace& trace, const std::vector<DeviceSpec>& gpus) const;

private:
  PredictorOptions options_;
};

} // namespace wavecast
