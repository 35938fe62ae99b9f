// What the multi-GPU tests share: a node of eight H100s on NVSwitch and InfiniBand, and
// layouts predicted with the collectives priced as the CLI prices them.
#pragma once

#include "wavecast/predictor/collectives.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/parallel.h"

#include <gtest/gtest.h>

namespace wavecast::parallel_fixtures {

inline SystemSpec node8() {
  SystemSpec system;
  system.id = "test-node";
  system.gpusPerNode = 8;
  system.fabric = IntraNodeFabric::NvSwitch;
  system.intraNodeGBs = 450;
  system.network = InterNodeNetwork::InfiniBand;
  system.interNodeGbpsPerGpu = 400;
  system.pricePerHourUsd = 80;
  return system;
}

inline const DeviceSpec& h100() {
  static const DeviceSpec gpu = GpuDatabase::fromFile(WAVECAST_GPUS_JSON).resolve({"H100"})[0];
  return gpu;
}

// What NCCL sustains (data/collectives.json): collectives are priced as the CLI prices them.
inline PredictorOptions collectiveOptions() {
  PredictorOptions options;
  options.collectives = CollectiveModel::fromFile(WAVECAST_COLLECTIVES_JSON);
  return options;
}

inline ParallelSummary predictLayout(const Trace& trace, ParallelConfig config) {
  auto outcome =
      predictParallel(trace, analyzeModel(trace), config, h100(), node8(), collectiveOptions());
  EXPECT_FALSE(outcome.problem.has_value());
  return outcome.prediction->summary;
}

} // namespace wavecast::parallel_fixtures
