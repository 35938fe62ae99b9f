// Expert parallelism on a rank's trace (--ep): the grouped GEMMs' experts split over the
// ep ranks, and the token all-to-alls of torchtitan's dispatch.
#include "parallel_ops.h"
#include "wavecast/predictor/parallel.h"

#include <algorithm>
#include <utility>

namespace wavecast {
namespace {

// An expert-parallel group's ranks are consecutive dp ranks, tp apart.
int epPerNode(const ParallelConfig& config, int gpusPerNode) {
  return std::max(1, std::min(config.ep, gpusPerNode / std::max(1, config.tp)));
}

// An op of the dispatch's bookkeeping on the token counts, in forward.
OpRecord countsOp(const char* name, std::vector<std::optional<TensorMeta>> inputs,
                  std::vector<std::optional<TensorMeta>> outputs, const OpRecord& near) {
  OpRecord op = insertedOp(name, near, Phase::Forward);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.args[kExpertDispatch] = true;
  return op;
}

} // namespace

// Expert parallelism: each rank keeps experts / ep of every layer's experts; the tokens
// routed to the others go to their ranks and come back by an all-to-all each way, in
// forward and again (the gradients) in backward, as torchtitan's token dispatch runs them.
// Each rank first tells the others how many tokens it sends to each expert (an all-to-all
// of float32 counts, read on the host as split sizes). With a balanced router a rank receives as
// many tokens as it sends: its grouped GEMMs keep their rows and run experts / ep groups of
// ep times as many rows each.
void splitExperts(const ModelStructure& model, const ParallelConfig& config, int gpusPerNode,
                  Edits& edits) {
  const int ep = config.ep;
  for (size_t i = 0; i < edits.ops.size(); ++i) {
    const int layer = i < model.opExpertLayer.size() ? model.opExpertLayer[i] : -1;
    if (layer < 0)
      continue;
    const int64_t experts = model.expertLayers[layer].experts;
    OpRecord& op = edits.ops[i];
    // The offsets, the per-expert bias and the expert weights (and their gradients).
    for (auto* list : {&op.inputs, &op.outputs})
      for (size_t j = 0; j < list->size(); ++j) {
        auto& t = (*list)[j];
        const bool offsets = list == &op.inputs && j == 2 && t && t->shape.size() == 1;
        if (t && !t->shape.empty() && t->shape[0] == experts &&
            (offsets || t->shape.size() == 3 || (list == &op.inputs && j == 3)))
          t->shape[0] /= ep;
      }
  }
  const int perNode = epPerNode(config, gpusPerNode);
  const auto allToAll = [&](int64_t bytes, size_t near, Phase phase) {
    OpRecord op =
        collectiveOp({CollectiveKind::AllToAll, bytes, "ep", ep, perNode, false, std::nullopt},
                     edits.ops[near], phase);
    op.args[kExpertDispatch] = true;
    return op;
  };
  for (const auto& layer : model.expertLayers) {
    auto& before = edits.before[layer.firstForward];
    const OpRecord& near = edits.ops[layer.firstForward];
    // The counts as torchtitan makes them: torch.histc's float32s.
    before.push_back(allToAll(layer.experts * int64_t{4}, layer.firstForward, Phase::Forward));
    // Each rank's tokens out and in: the counts summed per rank, read on the host, where the
    // CPU waits for the GPU (torchtitan synchronizes there before the token all-to-all).
    const TensorMeta counts{{ep, layer.experts / ep}, ScalarType::Float32};
    const TensorMeta splits{{ep}, ScalarType::Float32};
    for (int side = 0; side < 2; ++side)
      before.push_back(countsOp("aten::sum", {counts}, {splits}, near));
    before.push_back(countsOp("aten::_local_scalar_dense", {splits}, {}, near));
    before.push_back(allToAll(layer.dispatchBytes, layer.firstForward, Phase::Forward));
    edits.after[layer.lastForward].push_back(
        allToAll(layer.combineBytes, layer.lastForward, Phase::Forward));
    if (!layer.firstBackward)
      continue;
    edits.before[*layer.firstBackward].push_back(
        allToAll(layer.combineBytes, *layer.firstBackward, Phase::Backward));
    edits.after[*layer.lastBackward].push_back(
        allToAll(layer.dispatchBytes, *layer.lastBackward, Phase::Backward));
  }
}

} // namespace wavecast
