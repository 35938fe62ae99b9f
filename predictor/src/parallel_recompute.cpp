// Activation recomputation on a rank's trace: which blocks rerun, what they keep.
#include "parallel_ops.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <string_view>

namespace wavecast {
namespace {

// torchtitan's per-op policy (torchtitan/models/llama3/infra/parallelize.py, `_save_list`):
// these ops' outputs are saved, every second `aten::mm` excepted; the rest is recomputed.
constexpr std::array<std::string_view, 5> kSavedBySelectivePolicy = {
    "aten::mm", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_cudnn_attention",
    "aten::max"};

// Whether the per-op policy keeps `op`'s output from forward; `matmuls` counts the block's
// `aten::mm` calls so far.
bool savedBySelectivePolicy(const OpRecord& op, int& matmuls) {
  if (std::find(kSavedBySelectivePolicy.begin(), kSavedBySelectivePolicy.end(), op.name) ==
      kSavedBySelectivePolicy.end())
    return false;
  return op.name != "aten::mm" || ++matmuls % 2 == 1;
}

int64_t outputBytes(const OpRecord& op) {
  int64_t bytes = 0;
  for (const auto& t : op.outputs)
    bytes += t ? t->bytes() : 0;
  return bytes;
}

} // namespace

void insertRecompute(const ModelStructure& model, const ParallelConfig& config, Edits& edits,
                     std::vector<int64_t>& rerunSaved, std::vector<int64_t>& policyKept) {
  const bool selective = config.recomputePolicy == RecomputePolicy::SelectiveOps;
  rerunSaved.assign(model.blocks.size(), 0);
  policyKept.assign(model.blocks.size(), 0);
  // What a block's rerun issues besides its ops: tensor parallelism's all-reduces, and
  // expert parallelism's dispatch, except under the per-op policy, whose save list keeps
  // all-to-alls' outputs (torchtitan's, "to avoid re-communication").
  const auto runsAgain = [&](const OpRecord& op) {
    return op.phase == Phase::Forward &&
           (collectiveGroup(op) == "tp" ||
            (!selective && op.boolArg(kExpertDispatch).value_or(false)));
  };
  bool inputKept = false; // the previous block's output, saved: this block's input
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    const RepeatedBlock& block = model.blocks[b];
    std::vector<size_t> members, arithmetic; // the block's forward ops; those not views
    for (size_t i = block.firstForward; i <= block.lastForward; ++i)
      if (model.opBlock[i] == static_cast<int>(b) && edits.ops[i].phase == Phase::Forward &&
          !edits.dropped[i]) {
        members.push_back(i);
        if (!isMetadata(edits.ops[i]))
          arithmetic.push_back(i);
      }
    if (arithmetic.empty() || !block.firstBackward) {
      inputKept = false;
      continue;
    }
    const size_t output = arithmetic.back();
    if ((b + 1) % config.recomputeEvery != 0) { // runs as traced
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
    int matmuls = 0;
    for (size_t i : members) {
      // An op the per-op policy saves keeps its outputs from forward and is not run again.
      if (selective && savedBySelectivePolicy(edits.ops[i], matmuls)) {
        edits.ops[i].savedBytes =
            std::max(edits.ops[i].savedBytes.value_or(0), outputBytes(edits.ops[i]));
        policyKept[b] += *edits.ops[i].savedBytes;
        continue;
      }
      if (i <= lastNeeded) {
        for (const auto& inserted : edits.before[i])
          if (runsAgain(inserted))
            again(inserted);
        again(edits.ops[i]);
        for (const auto& inserted : edits.after[i])
          if (runsAgain(inserted))
            again(inserted);
      }
      if (i != output) {
        rerunSaved[b] += edits.ops[i].savedBytes.value_or(0);
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
}

} // namespace wavecast
