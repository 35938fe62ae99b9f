// A small traced iteration and the op builders the prediction tests share
// (predictor_test.cpp, op_pricing_test.cpp).
#pragma once

#include "op_record_builders.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/trace.h"

#include <optional>
#include <string>
#include <vector>

namespace wavecast::testing {

inline const GpuDatabase& db() {
  static const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  return database;
}

inline OpRecord op(int64_t id, std::string name, Phase phase, int line,
                   std::vector<std::optional<TensorMeta>> inputs,
                   std::vector<std::optional<TensorMeta>> outputs, std::string module = "") {
  return tracedOp(id, std::move(name), phase, {"/p/model.py", line, "forward"}, std::move(inputs),
                  std::move(outputs), std::move(module));
}

// conv (line 10) -> view (line 11) -> relu (line 11) -> sum (line 12); backward credits
// lines 12, 11 and 10; the optimizer step is line 20.
inline Trace smallTrace() {
  Trace trace;
  trace.batchSize = 32;
  trace.memory.parametersBytes = 1000000;
  trace.memory.gradientsBytes = 1000000;
  trace.memory.optimizerStateBytes = 2000000;
  const auto x = tensor({32, 3, 32, 32});
  const auto w = tensor({16, 3, 3, 3});
  const auto y = tensor({32, 16, 32, 32});
  trace.ops.push_back(
      op(0, "aten::convolution", Phase::Forward, 10, {x, w, tensor({16})}, {y}, "features.0"));
  trace.ops.back().args = {{"stride", std::vector<int64_t>{1, 1}},
                           {"padding", std::vector<int64_t>{1, 1}}};
  trace.ops.push_back(op(1, "aten::view", Phase::Forward, 11, {y}, {y}, "features.1"));
  trace.ops.push_back(op(2, "aten::relu", Phase::Forward, 11, {y}, {y}, "features.1"));
  trace.ops.push_back(op(3, "aten::sum", Phase::Forward, 12, {y}, {tensor({})}));
  trace.ops.push_back(op(4, "aten::expand", Phase::Backward, 12, {tensor({})}, {y}));
  trace.ops.push_back(
      op(5, "aten::threshold_backward", Phase::Backward, 11, {y, y}, {y}, "features.1"));
  trace.ops.push_back(op(6, "aten::convolution_backward", Phase::Backward, 10, {y, x, w},
                         {std::nullopt, w, tensor({16})}, "features.0"));
  trace.ops.back().args = {{"output_mask", std::vector<int64_t>{0, 1, 1}}};
  trace.ops.push_back(
      op(7, "aten::_foreach_add_", Phase::Optimizer, 20, {w, tensor({16}), w, tensor({16})}, {}));
  trace.ops.back().args = {{"num_tensors", int64_t{2}}};
  for (auto& record : trace.ops)
    if (record.phase == Phase::Backward)
      record.forwardId = 0;
  return trace;
}

} // namespace wavecast::testing
