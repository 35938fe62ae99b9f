// Building collective ops in the agreed trace format (docs/trace-format.md "Collectives"),
// shared by the rank transform and the pipeline stages.
#pragma once

#include "wavecast/predictor/collectives.h"
#include "wavecast/trace.h"

#include <cstdint>
#include <optional>

namespace wavecast {

struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t bytes = 0; // as nccl-tests counts them
  const char* group = "default";
  int groupSize = 1;
  int ranksPerNode = 1; // how many of the group's ranks share a node
  bool async = false;
  std::optional<int64_t> waitOp; // the id of the op that first needs the result
};

// The op `wavecast::<kind>` at `near`'s line and module, in `phase`.
OpRecord collectiveOp(const CollectiveCall& call, const OpRecord& near, Phase phase);
// "all_reduce", ..., "send" for point-to-point.
const char* collectiveOpName(CollectiveKind kind);

} // namespace wavecast
