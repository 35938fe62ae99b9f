// Times Predictor::predict on a synthetic 10,000-op training trace (a ResNet-like mix of
// convolutions, norms, elementwise ops, their backward ops and an Adam step) on 20 GPUs,
// plus predictionToJson. Prints the median of 15 runs. Goal: < 100 ms.
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/predictor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

namespace {

using wavecast::OpRecord;
using wavecast::Phase;
using wavecast::TensorMeta;

TensorMeta tensor(std::vector<int64_t> shape) {
  TensorMeta t;
  t.shape = std::move(shape);
  return t;
}

OpRecord record(int64_t id, const char* name, Phase phase, int line,
                std::vector<std::optional<TensorMeta>> inputs,
                std::vector<std::optional<TensorMeta>> outputs) {
  OpRecord op;
  op.id = id;
  op.name = name;
  op.phase = phase;
  op.loc = {"/bench/model.py", line, "forward"};
  op.module = "layer" + std::to_string(line % 50);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  return op;
}

wavecast::Trace syntheticTrace(int opCount) {
  wavecast::Trace trace;
  trace.batchSize = 64;
  trace.memory = {100 << 20, 100 << 20, 200 << 20};
  const auto x = tensor({64, 256, 28, 28});
  const auto w = tensor({256, 256, 3, 3});
  const auto c = tensor({256});
  int64_t id = 0;
  while (static_cast<int>(trace.ops.size()) < opCount) {
    const int line = 10 + static_cast<int>(id % 400);
    auto conv = record(id++, "aten::convolution", Phase::Forward, line, {x, w, std::nullopt}, {x});
    conv.args = {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1}}};
    trace.ops.push_back(conv);
    auto bn = record(id++, "aten::native_batch_norm", Phase::Forward, line + 1, {x, c, c, c, c},
                     {x, c, c});
    bn.args = {{"training", true}};
    trace.ops.push_back(bn);
    trace.ops.push_back(record(id++, "aten::relu_", Phase::Forward, line + 2, {x}, {x}));
    trace.ops.push_back(record(id++, "aten::view", Phase::Forward, line + 2, {x}, {x}));
    trace.ops.push_back(
        record(id++, "aten::threshold_backward", Phase::Backward, line + 2, {x, x}, {x}));
    trace.ops.push_back(record(id++, "aten::native_batch_norm_backward", Phase::Backward, line + 1,
                               {x, x, c}, {x, c, c}));
    auto back = record(id++, "aten::convolution_backward", Phase::Backward, line, {x, x, w},
                       {x, w, std::nullopt});
    back.args = {{"output_mask", std::vector<int64_t>{1, 1, 0}}};
    trace.ops.push_back(back);
    trace.ops.push_back(record(id++, "aten::mm", Phase::Forward, line + 3,
                               {tensor({512, 1024}), tensor({1024, 1024})}, {tensor({512, 1024})}));
    trace.ops.push_back(record(id++, "aten::_softmax", Phase::Forward, line + 4,
                               {tensor({512, 1024})}, {tensor({512, 1024})}));
    trace.ops.push_back(
        record(id++, "aten::_foreach_addcdiv_", Phase::Optimizer, 500, {w, w, w}, {}));
  }
  trace.ops.resize(opCount);
  return trace;
}

} // namespace

int main() {
  const auto db = wavecast::GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  std::vector<wavecast::DeviceSpec> gpus(db.all().begin(), db.all().begin() + 20);
  const wavecast::Trace trace = syntheticTrace(10000);
  const wavecast::Predictor predictor;
  std::vector<double> predictMs, jsonMs;
  size_t sink = 0;
  for (int run = 0; run < 15; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    const wavecast::Prediction prediction = predictor.predict(trace, gpus);
    const auto t1 = std::chrono::steady_clock::now();
    const nlohmann::json doc = wavecast::predictionToJson(prediction);
    const auto t2 = std::chrono::steady_clock::now();
    sink += prediction.lines.size() + doc.size();
    predictMs.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    jsonMs.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::sort(predictMs.begin(), predictMs.end());
  std::sort(jsonMs.begin(), jsonMs.end());
  std::printf("predict: %zu ops x %zu GPUs: median %.1f ms (min %.1f, max %.1f); goal < 100 ms\n",
              trace.ops.size(), gpus.size(), predictMs[7], predictMs.front(), predictMs.back());
  std::printf("predictionToJson of that result: median %.1f ms (not part of the goal)\n",
              jsonMs[7]);
  return sink == 0;
}
