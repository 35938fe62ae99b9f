// Prints medians of: worker start-up (torch import included), a warm
// ResNet-50 batch-32 shape trace, and a warm GPT-2-large (36 layers, d=1280,
// seq 1024) batch-8 shape trace. Goal: warm ResNet-50 re-trace under 2 s.
#include "wavecast/profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

wavecast::ProfilerOptions options() {
  wavecast::ProfilerOptions o;
  o.workerPath = WAVECAST_WORKER_PATH;
  o.pythonPath = WAVECAST_TRACER_PYTHON_DIR;
  return o;
}

// Seconds per call of `run`, `repeats` times; false when a run failed.
bool timeRuns(int repeats, const std::function<bool()>& run, std::vector<double>& seconds) {
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    if (!run())
      return false;
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return true;
}

bool traceOk(wavecast::Profiler& profiler, const std::string& sample, int64_t batch, size_t& ops) {
  wavecast::TraceRequest request;
  request.file = std::string(WAVECAST_SAMPLES_DIR) + "/" + sample;
  request.batchSize = batch;
  const auto result = profiler.trace(request);
  if (const auto* error = std::get_if<wavecast::ProfileError>(&result)) {
    std::fprintf(stderr, "%s: %s: %s\n", sample.c_str(), toString(error->kind),
                 error->message.c_str());
    return false;
  }
  ops = std::get<wavecast::Trace>(result).ops.size();
  return true;
}

} // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  // The worker inherits the environment: the GPT-2 sample reads its size from it.
  setenv("WAVECAST_GPT2_SIZE", "large", 1);

  std::vector<double> startup;
  const bool started = timeRuns(
      repeats,
      [] {
        wavecast::Profiler profiler(options());
        return !profiler.start().has_value();
      },
      startup);
  if (!started) {
    std::fprintf(stderr, "the worker did not start\n");
    return 1;
  }
  std::printf("worker start-up (incl. import torch): median %.3f s of %d\n", median(startup),
              repeats);

  wavecast::Profiler profiler(options());
  size_t ops = 0;
  if (!traceOk(profiler, "resnet50.py", 32, ops)) // warm-up: first imports of torchvision etc.
    return 1;
  std::vector<double> resnet;
  if (!timeRuns(
          repeats, [&] { return traceOk(profiler, "resnet50.py", 32, ops); }, resnet))
    return 1;
  std::printf("warm ResNet-50 batch 32 shape trace: median %.3f s of %d (%zu ops; goal < 2 s)\n",
              median(resnet), repeats, ops);

  std::vector<double> gpt2;
  if (!timeRuns(
          std::max(1, repeats / 2), [&] { return traceOk(profiler, "gpt2.py", 8, ops); }, gpt2))
    return 1;
  std::printf("warm GPT-2-large batch 8 seq 1024 shape trace: median %.3f s of %zu (%zu ops)\n",
              median(gpt2), gpt2.size(), ops);
  return 0;
}
