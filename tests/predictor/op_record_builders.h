// Builders of tensors and single op records for the predictor's tests; the other builder
// headers (compiled_trace.h, prediction_fixtures.h) start from these tensors.
#pragma once

#include "wavecast/predictor/op_cost.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace wavecast::testing {

inline TensorMeta tensor(std::vector<int64_t> shape, ScalarType dtype = ScalarType::Float32,
                         std::optional<TensorMeta::Source> source = std::nullopt) {
  TensorMeta t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.source = source;
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

// An op as a trace records it: its place in the trace, its line and its module.
inline OpRecord tracedOp(int64_t id, std::string name, Phase phase, SourceLocation loc,
                         std::vector<std::optional<TensorMeta>> inputs,
                         std::vector<std::optional<TensorMeta>> outputs, std::string module = "") {
  OpRecord record = op(std::move(name), std::move(inputs), std::move(outputs), {}, phase);
  record.id = id;
  record.loc = std::move(loc);
  record.module = std::move(module);
  return record;
}

using Ints = std::vector<int64_t>;

} // namespace wavecast::testing
