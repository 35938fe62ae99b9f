// Times Predictor::predict on a synthetic 10,000-op training trace (a ResNet-like mix of
// convolutions, norms, elementwise ops, their backward ops and an Adam step, with a shape
// trace's memory figures) on 20 GPUs,
// then the results JSON's text (resultsJsonText), freeing it and the teardown. Prints medians
// of 15 runs, and the text without the per-op detail (what the editor asks for). Goals:
// predict < 100 ms; the results JSON written and freed < 30 ms.
#include "results_json.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/predictor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string>
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
  trace.memory.parametersBytes = 100 << 20;
  trace.memory.gradientsBytes = 100 << 20;
  trace.memory.optimizerStateBytes = 200 << 20;
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
  // The memory figures of a shape trace, so the per-op workspace pass is timed too: bytes
  // live after each op that allocates, rising and falling with the layers.
  int64_t peak = 0;
  for (auto& op : trace.ops) {
    if (op.outputs.empty() || op.name == "aten::view" || op.name.back() == '_')
      continue;
    op.liveBytes = (int64_t{1} << 30) + (op.id % 100) * (int64_t{1} << 20);
    peak = std::max(peak, *op.liveBytes);
  }
  trace.memory.peakLiveBytes = peak;
  return trace;
}

double medianMs(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// A warm daemon keeps its heap: glibc would otherwise return freed pages to the system and
// fault them in again, and it defers merging freed chunks until a later large allocation,
// which then pays for the teardown of the previous run. Both are kept out of the timings.
void keepHeapMapped() {
#ifdef __GLIBC__
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
#endif
}

void settleAllocator() {
#ifdef __GLIBC__
  free(malloc(1 << 20)); // a large request merges the freed small chunks first
#endif
}

} // namespace

int main() {
  keepHeapMapped();
  const auto db = wavecast::GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  std::vector<wavecast::DeviceSpec> gpus(db.all().begin(), db.all().begin() + 20);
  const wavecast::Trace trace = syntheticTrace(10000);
  const wavecast::Predictor predictor;
  std::vector<double> predictMs, jsonMs, freeJsonMs, leanJsonMs, teardownMs;
  size_t sink = 0, bytes = 0, leanBytes = 0;
  for (int run = 0; run < 15; ++run) {
    settleAllocator();
    const auto t0 = std::chrono::steady_clock::now();
    auto prediction = std::make_unique<wavecast::Prediction>(predictor.predict(trace, gpus));
    const auto t1 = std::chrono::steady_clock::now();
    // What the daemon sends for wavecast/results: the text, written straight from the result.
    auto text = std::make_unique<std::string>(
        wavecast::resultsJsonText(*prediction, wavecast::traceFacts(trace)));
    const auto t2 = std::chrono::steady_clock::now();
    sink += prediction->lines.size() + text->size();
    bytes = text->size();
    text.reset();
    settleAllocator();
    const auto t3 = std::chrono::steady_clock::now();
    // What the editor asks for: lines, modules and summaries, without the per-op detail.
    const std::string lean =
        wavecast::resultsJsonText(*prediction, wavecast::traceFacts(trace), {}, {}, {false});
    const auto t3b = std::chrono::steady_clock::now();
    leanBytes = lean.size();
    prediction.reset();
    settleAllocator();
    const auto t4 = std::chrono::steady_clock::now();
    const auto ms = [](auto a, auto b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    predictMs.push_back(ms(t0, t1));
    jsonMs.push_back(ms(t1, t2));
    freeJsonMs.push_back(ms(t2, t3));
    leanJsonMs.push_back(ms(t3, t3b));
    teardownMs.push_back(ms(t3b, t4));
  }
  std::vector<double> jsonTotalMs;
  for (size_t i = 0; i < jsonMs.size(); ++i)
    jsonTotalMs.push_back(jsonMs[i] + freeJsonMs[i]);
  std::printf("predict: %zu ops x %zu GPUs: median %.1f ms (min %.1f); goal < 100 ms\n",
              trace.ops.size(), gpus.size(), medianMs(predictMs),
              *std::min_element(predictMs.begin(), predictMs.end()));
  std::printf(
      "results JSON text (%.1f MB): written in median %.1f ms (min %.1f), freed in %.1f ms; "
      "together %.1f ms; goal < 30 ms\n",
      bytes / 1e6, medianMs(jsonMs), *std::min_element(jsonMs.begin(), jsonMs.end()),
      medianMs(freeJsonMs), medianMs(jsonTotalMs));
  std::printf(
      "results JSON text without the per-op detail, as the editor asks (%.2f MB): written in "
      "median %.1f ms\n",
      leanBytes / 1e6, medianMs(leanJsonMs));
  std::printf("freeing the prediction: median %.1f ms\n", medianMs(teardownMs));
  return sink == 0;
}
