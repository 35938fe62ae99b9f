// OpenXLA's measured collective table (../shared/reference/xla-perf-tables/collectives.csv,
// its README describes the columns), read as NCCL calls priced by estimateCollective.
#pragma once

#include "wavecast/predictor/collectives.h"

#include <cstdint>
#include <string>
#include <vector>

namespace wavecast::bench {

struct MeasuredCollective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t bytes = 0; // as nccl-tests counts (reduce-scatter: the input, the CSV's sweep_bytes)
  int ranks = 0;     // devices per group; every group on one 8-GPU node
  int groups = 0;    // groups running at once
  double us = 0;     // measured time
  int sizeIndex = 0; // log2 of the element count: the held-out split uses its parity
};

// The rows of `arch` ("sm_90") with a throughput; collective-permute rows become
// send/recv between two ranks. Throws std::runtime_error when the file cannot be read.
std::vector<MeasuredCollective> readXlaCollectives(const std::string& path,
                                                   const std::string& arch);

// Even size indices train, odd ones are held out.
bool heldOut(const MeasuredCollective& row);

struct CollectiveError {
  double mape = 0;     // mean |predicted - measured| / measured
  double weighted = 0; // sum |predicted - measured| / sum measured: by time spent
  int rows = 0;
};

// The error of estimateCollective on `rows` on `system` with `model`.
CollectiveError collectiveError(const std::vector<MeasuredCollective>& rows,
                                const SystemSpec& system, const CollectiveModel& model);

} // namespace wavecast::bench
