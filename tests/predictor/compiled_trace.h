// Ops of a traced compiled region, written by hand for the predictor's tests: tensors that
// say which op wrote them, and ops marked compiled.
#pragma once

#include "op_record_builders.h"
#include "wavecast/trace.h"

#include <optional>
#include <string>
#include <vector>

namespace wavecast::testing {

// Output `output` of op `op`: what wrote a tensor.
inline TensorMeta::Source from(int64_t op, int output = 0) {
  return {op, output};
}

// Op `id` at line 10 + id of /p/model.py, compiled in the default mode unless `compiled` is
// false.
inline OpRecord record(int64_t id, std::string name, std::vector<std::optional<TensorMeta>> inputs,
                       std::vector<std::optional<TensorMeta>> outputs, bool compiled = true,
                       Phase phase = Phase::Forward) {
  OpRecord op;
  op.id = id;
  op.name = std::move(name);
  op.phase = phase;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.loc = {"/p/model.py", 10 + static_cast<int>(id), "forward"};
  if (compiled)
    op.compiled = CompileMode::Default;
  return op;
}

} // namespace wavecast::testing
