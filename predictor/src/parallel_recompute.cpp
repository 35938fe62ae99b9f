// Activation recomputation on a rank's trace: which blocks rerun, what they keep.
#include "parallel_ops.h"

#include <iterator>
#include <variant>

namespace wavecast {

std::vector<int64_t> insertRecompute(const ModelStructure& model, int every, Edits& edits) {
  std::vector<int64_t> recomputed(model.blocks.size(), 0);
  const auto tensorParallel = [](const OpRecord& op) {
    const auto group = op.args.find("group");
    const auto* name = group != op.args.end() ? std::get_if<std::string>(&group->second) : nullptr;
    return op.phase == Phase::Forward && name && *name == "tp";
  };
  bool inputKept = false; // the previous block's output, saved: this block's input
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    const RepeatedBlock& block = model.blocks[b];
    std::vector<size_t> members, arithmetic; // the block's forward ops; those not views
    for (size_t i = block.firstForward; i <= block.lastForward; ++i)
      if (model.opBlock[i] == static_cast<int>(b) && edits.ops[i].phase == Phase::Forward) {
        members.push_back(i);
        if (!isMetadata(edits.ops[i]))
          arithmetic.push_back(i);
      }
    if (arithmetic.empty() || !block.firstBackward) {
      inputKept = false;
      continue;
    }
    const size_t output = arithmetic.back();
    if ((b + 1) % every != 0) { // runs as traced
      inputKept = edits.ops[output].savedBytes.value_or(0) > 0;
      continue;
    }
    size_t lastNeeded = arithmetic.front();
    for (size_t i : arithmetic)
      if (i != output && edits.ops[i].savedBytes.value_or(0) > 0)
        lastNeeded = i;
    std::vector<OpRecord> rerun;
    const auto again = [&](OpRecord op) {
      op.id = -1;
      op.phase = Phase::Backward;
      op.forwardId.reset();
      op.savedBytes.reset();
      rerun.push_back(std::move(op));
    };
    for (size_t i : members) {
      if (i <= lastNeeded) {
        for (const auto& collective : edits.before[i])
          if (tensorParallel(collective))
            again(collective);
        again(edits.ops[i]);
        for (const auto& collective : edits.after[i])
          if (tensorParallel(collective))
            again(collective);
      }
      if (i != output) {
        recomputed[b] += edits.ops[i].savedBytes.value_or(0);
        edits.ops[i].savedBytes.reset();
      }
    }
    OpRecord& first = edits.ops[arithmetic.front()];
    if (!inputKept && first.input(0))
      first.savedBytes = first.input(0)->bytes();
    inputKept = edits.ops[output].savedBytes.value_or(0) > 0;
    auto& before = edits.before[*block.firstBackward];
    before.insert(before.end(), std::make_move_iterator(rerun.begin()),
                  std::make_move_iterator(rerun.end()));
  }
  return recomputed;
}

} // namespace wavecast
