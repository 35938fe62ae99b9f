// Builders of single op records for the cost-formula tests (op_cost_test.cpp,
// matrix_cost_test.cpp).
#pragma once

#include "wavecast/predictor/op_cost.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace wavecast::testing {

inline TensorMeta tensor(std::vector<int64_t> shape, ScalarType dtype = ScalarType::Float32) {
  TensorMeta t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

inline OpRecord op(std::string name, std::vector<std::optional<TensorMeta>> inputs,
                   std::vector<std::optional<TensorMeta>> outputs,
                   std::map<std::string, ArgValue> args = {}, Phase phase = Phase::Forward) {
  OpRecord record;
  record.name = std::move(name);
  record.inputs = std::move(inputs);
  record.outputs = std::move(outputs);
  record.args = std::move(args);
  record.phase = phase;
  return record;
}

using Ints = std::vector<int64_t>;

} // namespace wavecast::testing
