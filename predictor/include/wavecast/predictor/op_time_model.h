// A pluggable per-op time model (e.g. the learned models of predictor/learned)
// that the Predictor asks before falling back to its analytic model.
#pragma once

#include "wavecast/predictor/device_spec.h"
#include "wavecast/trace.h"

#include <optional>
#include <string>
#include <vector>

namespace wavecast {

struct OpTimeQuery {
  const OpRecord* op = nullptr;
  const DeviceSpec* gpu = nullptr;
};

class OpTimeModel {
public:
  virtual ~OpTimeModel() = default;
  // One answer per query, in order; nullopt where this model does not cover the op.
  virtual std::vector<std::optional<double>>
  predictMs(const std::vector<OpTimeQuery>& queries) const = 0;
  virtual std::string name() const = 0;
  // Whether measurements of `gpu` itself went into the model; when not, its
  // answers for that GPU rest on the spec sheet alone and users are told so.
  virtual bool measuredOn(const DeviceSpec&) const { return true; }
};

} // namespace wavecast
