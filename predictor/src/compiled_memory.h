// What a compiled region keeps for backward (docs/predictor.md, "Compiled regions"):
// AOTAutograd's min-cut partitioner saves the cheapest set of forward tensors from which
// its backward can recompute the rest, where eager autograd keeps every tensor a backward
// formula reads.
#pragma once

#include "wavecast/predictor/op_cost.h"
#include "wavecast/trace.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace wavecast::compiled {

struct SavedForBackward {
  int64_t eagerBytes = 0;    // compiled ops' forward tensors that backward ops read
  int64_t compiledBytes = 0; // what the partitioner saves of those ops instead
  // Per op of the trace: bytes of saved tensors eager holds while it runs beyond those the
  // compiled run holds (negative where the compiled run holds more).
  std::vector<int64_t> heldBeyondCompiled;
};

// Nullopt for a trace without compiled ops whose inputs say which op wrote them, or without
// a backward pass. `costs`: the trace's, fused (fuseRegions) or not.
std::optional<SavedForBackward> savedForBackward(const Trace& trace,
                                                 const std::vector<OpCost>& costs);

} // namespace wavecast::compiled
