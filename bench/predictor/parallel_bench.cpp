// Times the multi-GPU what-if: a synthetic GPT-like trace of about 1,000 ops (28 blocks,
// hidden 1,024, 16 heads, sequence 1,024, batch 8) predicted for 10 layouts on an H100
// node (data/systems.json's HGX H100) with predictParallel (the rank transform, every stage's
// prediction, memory and the figures). Prints the median of 7 runs of all 10. Goal: under 1 s.
#include "synthetic_transformer.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/parallel.h"
#include "wavecast/predictor/system_database.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  using namespace wavecast;
  const auto db = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  const DeviceSpec gpu = db.resolve({"H100"})[0];
  const SystemSpec system = SystemDatabase::fromFile(WAVECAST_SYSTEMS_JSON).defaultFor(gpu.id);
  const Trace trace = syntheticTransformer(8, {8, 1024, 1024, 16, 50257, 28});
  const ModelStructure model = analyzeModel(trace);
  std::vector<ParallelConfig> layouts;
  for (const char* text : {"dp1", "dp8", "dp8 zero1", "dp8 zero2", "dp16 fsdp", "dp4 tp2", "tp8",
                           "dp4 tp2 sp", "dp4 pp2 mb8", "tp2 pp4 mb8 gpipe"})
    layouts.push_back(std::get<ParallelTarget>(parseParallelTarget(text)).config);
  PredictorOptions options;
  options.collectives = CollectiveModel::fromFile(WAVECAST_COLLECTIVES_JSON);
  std::vector<double> runs;
  double sink = 0;
  for (int run = 0; run < 7; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& config : layouts) {
      const auto outcome = predictParallel(trace, model, config, gpu, system, options);
      sink += outcome.prediction ? outcome.prediction->summary.iterationMs : -1;
    }
    runs.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(runs.begin(), runs.end());
  std::printf("%zu ops, %zu layouts: %.1f ms (median of %zu; goal < 1000 ms) [%g]\n",
              trace.ops.size(), layouts.size(), runs[runs.size() / 2], runs.size(), sink);
  return 0;
}
