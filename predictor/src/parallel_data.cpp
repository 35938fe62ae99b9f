// Data parallelism on a rank's trace: DDP's gradient buckets, ZeRO-1/2's reduce-scatters
// and gathers after the step, ZeRO-3/FSDP's gathers and reduce-scatters per block, the
// optimizer on the rank's shards; under expert parallelism, experts over their replicas.
#include "parallel_ops.h"
#include "wavecast/predictor/parallel.h"

#include <algorithm>
#include <utility>

namespace wavecast {
namespace {

// Megatron's rank order (tp fastest, then dp, then pp): a dp group's ranks are tp apart,
// so a node holds gpusPerNode / tp of them.
int dpPerNode(const ParallelConfig& config, int gpusPerNode) {
  return std::max(1, std::min(config.dp, gpusPerNode / std::max(1, config.tp)));
}

// The replicas of an expert (dp / ep of them) are tp x ep ranks apart.
int expertDpPerNode(const ParallelConfig& config, int gpusPerNode) {
  const int replicas = config.dp / std::max(1, config.ep);
  return std::max(1, std::min(replicas, gpusPerNode / std::max(1, config.tp * config.ep)));
}

// The data-parallel groups gradients are reduced over: every parameter's dp ranks, and,
// under expert parallelism, an expert's replicas (dp / ep ranks, "edp") for its weights.
struct ReductionGroup {
  const char* name = "dp";
  int size = 1;
  int perNode = 1;
  bool experts = false;
};
std::vector<ReductionGroup> reductionGroups(const ParallelConfig& config, int gpusPerNode) {
  std::vector<ReductionGroup> groups = {{"dp", config.dp, dpPerNode(config, gpusPerNode), false}};
  if (config.ep > 1)
    groups.push_back({"edp", config.dp / config.ep, expertDpPerNode(config, gpusPerNode), true});
  return groups;
}
// The group of `groups` a parameter's gradient is reduced over.
const ReductionGroup& groupOf(const ParameterInfo& p, const std::vector<ReductionGroup>& groups,
                              const ParallelConfig& config) {
  return p.expert && config.ep > 1 ? groups.back() : groups.front();
}

std::optional<size_t> lastOf(const Edits& edits, Phase phase) {
  for (size_t i = edits.ops.size(); i-- > 0;)
    if (edits.ops[i].phase == phase)
      return i;
  return std::nullopt;
}
std::optional<size_t> firstOf(const Edits& edits, Phase phase) {
  for (size_t i = 0; i < edits.ops.size(); ++i)
    if (edits.ops[i].phase == phase)
      return i;
  return std::nullopt;
}

// A memory-bound copy the data-parallel wrappers make around their collectives: it reads
// `elements` of `dtype` and writes as many, at `near`'s line, in `phase`.
OpRecord copyOp(const char* name, int64_t elements, ScalarType dtype, const OpRecord& near,
                Phase phase) {
  OpRecord op = insertedOp(name, near, phase);
  const TensorMeta tensor{{elements}, dtype};
  op.inputs = {tensor, tensor};
  op.outputs = {tensor};
  return op;
}

// DDP's reducer on one gradient: `aten::mul` reads it and writes the bucket, `aten::copy_`
// the way back.
OpRecord reducerOp(const char* name, const ParameterInfo& param, int64_t elements,
                   const OpRecord& near) {
  return copyOp(name, elements, dtypeOf(param), near, Phase::Backward);
}

} // namespace

// DDP (and ZeRO-1/2's reduce-scatter): buckets in reverse registration order, the first of
// `firstBucketBytes`, then `bucketBytes` (a bucket closes once it reaches its cap, as
// compute_bucket_assignment_by_size does); each goes out when its last gradient is made.
// DDP's reducer also moves every gradient twice (reducer.cpp): into its bucket as it is
// made, divided by the world size (`mul_out`), and back into `.grad` once the bucket's
// all-reduce is waited for, at the end of backward (`finalize_bucket_dense`; not with
// gradient_as_bucket_view, which this models as off, DDP's default).
void insertGradientBuckets(const ModelStructure& model, const ParallelConfig& config,
                           int gpusPerNode, Edits& edits) {
  const auto lastBackward = lastOf(edits, Phase::Backward);
  if (!lastBackward)
    return;
  const bool ddp = config.sharding == Sharding::None && !model.parameters.empty();
  const auto firstStep = firstOf(edits, Phase::Optimizer);
  const int64_t copyBack = ddp ? edits.nextId++ : 0;
  const std::optional<int64_t> wait = ddp         ? std::optional<int64_t>(copyBack)
                                      : firstStep ? std::optional<int64_t>(edits.ops[*firstStep].id)
                                                  : std::nullopt;
  const auto kind =
      config.sharding == Sharding::None ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter;
  std::vector<std::pair<ReductionGroup, int64_t>> buckets;
  auto emit = [&](const ReductionGroup& group, int64_t bytes, size_t readyOp) {
    edits.after[readyOp].push_back(
        collectiveOp({kind, bytes, group.name, group.size, group.perNode, true, wait},
                     edits.ops[readyOp], Phase::Backward));
    buckets.emplace_back(group, bytes);
  };
  const auto groups = reductionGroups(config, gpusPerNode);
  if (model.parameters.empty())
    emit(groups.front(), model.parameterBytes(), *lastBackward);
  for (const auto& group : groups) {
    // This group's parameters in reverse registration order; a group of one rank (experts
    // with ep = dp) has nothing to reduce.
    std::vector<size_t> reduced;
    for (size_t p = model.parameters.size(); p-- > 0;)
      if (group.size > 1 && &groupOf(model.parameters[p], groups, config) == &group)
        reduced.push_back(p);
    int64_t bytes = 0;
    size_t ready = 0;
    for (size_t r = 0; r < reduced.size(); ++r) {
      const auto& param = model.parameters[reduced[r]];
      bytes += rankBytes(param, config);
      const size_t made = param.gradientOp.value_or(*lastBackward);
      ready = std::max(ready, made);
      if (ddp)
        edits.after[made].push_back(
            reducerOp("aten::mul", param, rankElements(param, config), edits.ops[made]));
      const int64_t cap = buckets.empty() ? config.firstBucketBytes : config.bucketBytes;
      if (bytes >= cap || r + 1 == reduced.size()) {
        emit(group, bytes, ready);
        bytes = 0;
        ready = 0;
      }
    }
  }
  if (ddp) {
    bool first = true;
    for (size_t p = model.parameters.size(); p-- > 0;) {
      const auto& param = model.parameters[p];
      if (groupOf(param, groups, config).size <= 1)
        continue;
      OpRecord copy =
          reducerOp("aten::copy_", param, rankElements(param, config), edits.ops[*lastBackward]);
      if (std::exchange(first, false))
        copy.id = copyBack;
      edits.after[*lastBackward].push_back(std::move(copy));
    }
  }
  if (config.sharding == Sharding::None)
    return;
  // ZeRO-1/2: each rank updated its shard; the parameters are gathered back after the step.
  if (const auto lastStep = lastOf(edits, Phase::Optimizer))
    for (const auto& [group, bytes] : buckets)
      edits.after[*lastStep].push_back(
          collectiveOp({CollectiveKind::AllGather, bytes, group.name, group.size, group.perNode,
                        false, std::nullopt},
                       edits.ops[*lastStep], Phase::Optimizer));
}

// ZeRO-3 / FSDP: each block's parameters are gathered before its forward and again before
// its backward, prefetched while the block before it runs, and its gradients reduce-
// scattered after its backward. Parameters outside the blocks are gathered once at the
// start and kept (FSDP's root), reduce-scattered at the end of backward.
//
// FSDP2 also copies around each collective (torch/distributed/fsdp/_fully_shard/
// _fsdp_collectives.py): the rank's shards into the all-gather's input
// (`all_gather_copy_in`) and the gathered buffer out into the parameters
// (`split_with_sizes_copy`, where the compute stream waits for the gather); the gradients
// into the reduce-scatter's input (`chunk_cat`). Each is a copy (`aten::copy_`, priced by
// its bytes; FSDP2's own op names have no formula). Under a MixedPrecisionPolicy the copy-in
// casts each shard to the param dtype, which is gathered, and `chunk_cat` casts the
// gradients to the reduce dtype, which is reduce-scattered.
void insertFullySharded(const ModelStructure& model, const ParallelConfig& config, int gpusPerNode,
                        Edits& edits) {
  const ScalarType dtype = parameterDtype(model);
  const int64_t elementSize = wavecast::elementSize(dtype);
  const ScalarType gathered = config.paramDtype.value_or(dtype);
  const ScalarType reduced = config.reduceDtype.value_or(gathered);
  const auto copy = [&](const char* name, int64_t elements, ScalarType from, ScalarType to,
                        size_t near, Phase phase) {
    OpRecord op = copyOp(name, elements, to, edits.ops[near], phase);
    op.inputs[1]->dtype = from;
    return op;
  };
  const auto firstForward = firstOf(edits, Phase::Forward);
  const auto lastBackward = lastOf(edits, Phase::Backward);
  // Each group shards its parameters over its ranks: every parameter over dp, and under
  // expert parallelism the rank's experts over their replicas (FSDP over dp / ep).
  const auto groups = reductionGroups(config, gpusPerNode);
  for (const auto& group : groups) {
    if (group.size <= 1)
      continue;
    // Elements per block (and outside the blocks: the root) on this rank, after tp and ep.
    std::vector<int64_t> blockElements(model.blocks.size(), 0);
    int64_t rootElements = 0;
    for (const auto& p : model.parameters)
      if (&groupOf(p, groups, config) == &group)
        (p.block >= 0 ? blockElements[p.block] : rootElements) +=
            rankBytes(p, config) / elementSize;
    if (model.parameters.empty())
      rootElements = model.parameterBytes() / elementSize;
    auto op = [&](CollectiveKind kind, int64_t elements, ScalarType type, bool async,
                  std::optional<int64_t> wait, size_t near, Phase phase) {
      return collectiveOp({kind, elements * wavecast::elementSize(type), group.name, group.size,
                           group.perNode, async, wait},
                          edits.ops[near], phase);
    };
    if (firstForward && rootElements > 0)
      edits.before[*firstForward].push_back(op(CollectiveKind::AllGather, rootElements, gathered,
                                               false, std::nullopt, *firstForward, Phase::Forward));
    // A block's gather: copied in where it is issued, copied out (its wait) before `first`.
    const auto gather = [&](int64_t elements, size_t issue, size_t first, Phase phase) {
      if (elements <= 0 && group.experts)
        return;
      OpRecord out = copy("aten::copy_", elements, gathered, gathered, first, phase);
      out.id = edits.nextId++;
      edits.before[issue].push_back(
          copy("aten::copy_", elements / group.size, dtype, gathered, issue, phase));
      edits.before[issue].push_back(
          op(CollectiveKind::AllGather, elements, gathered, true, out.id, first, phase));
      edits.before[first].push_back(std::move(out));
    };
    // The gradients, made in the dtype the block computed in, into the reduce-scatter's input.
    const auto scatter = [&](int64_t elements, size_t after) {
      if (elements <= 0 && group.experts)
        return;
      edits.after[after].push_back(
          copy("aten::copy_", elements, gathered, reduced, after, Phase::Backward));
      edits.after[after].push_back(op(CollectiveKind::ReduceScatter, elements, reduced, true,
                                      std::nullopt, after, Phase::Backward));
    };
    for (size_t b = 0; b < model.blocks.size(); ++b) {
      const auto& block = model.blocks[b];
      const size_t issue = b > 0 ? model.blocks[b - 1].firstForward : block.firstForward;
      gather(blockElements[b], issue, block.firstForward, Phase::Forward);
      if (!block.firstBackward)
        continue;
      const auto& later =
          b + 1 < model.blocks.size() ? model.blocks[b + 1].firstBackward : block.firstBackward;
      gather(blockElements[b], later.value_or(*block.firstBackward), *block.firstBackward,
             Phase::Backward);
      scatter(blockElements[b], *block.lastBackward);
    }
    if (lastBackward && rootElements > 0)
      scatter(rootElements, *lastBackward);
  }
}

// Under FSDP's mixed precision the blocks get their parameters gathered in the param dtype:
// the casts autocast made of them in forward (and their gradients' casts back in backward)
// do not run.
void dropParameterCasts(const ModelStructure& model, ScalarType gathered, Edits& edits) {
  // A backward op comes after the forward op it differentiates (opForward[i] <= i).
  for (size_t i = 0; i < edits.ops.size(); ++i) {
    const OpRecord& op = edits.ops[i];
    if (op.name != "aten::_to_copy")
      continue;
    const OpRecord& forward = edits.ops[model.opForward[i]];
    edits.dropped[i] = forward.phase == Phase::Forward && forward.name == "aten::_to_copy" &&
                       forward.boolArg("of_parameter").value_or(false) && forward.output(0) &&
                       forward.output(0)->dtype == gathered;
  }
}

// The optimizer step on this rank's parameters: tensor-parallel ones split by tp, expert
// weights by ep, and all of them under ZeRO by the ranks sharing them (a flat shard of each:
// dp, or an expert's dp / ep replicas).
void shardOptimizer(const ModelStructure& model, const ParallelConfig& config, Edits& edits) {
  const size_t count = model.parameters.size();
  const bool zero = config.sharding != Sharding::None;
  for (auto& op : edits.ops) {
    if (op.phase != Phase::Optimizer)
      continue;
    for (auto* list : {&op.inputs, &op.outputs})
      for (size_t j = 0; j < list->size(); ++j) {
        auto& t = (*list)[j];
        if (!t || t->numel() <= 1)
          continue;
        const ParameterInfo* param = count > 0 && model.parameters[j % count].shape == t->shape
                                         ? &model.parameters[j % count]
                                         : nullptr;
        const bool expert = param && param->expert && config.ep > 1;
        if (config.tp > 1 && param && param->tensorParallel)
          divide(t, 0, config.tp);
        if (expert)
          divide(t, 0, config.ep);
        const int shards = !zero ? 1 : param ? zeroShards(*param, config) : config.dp;
        if (shards > 1)
          t->shape = {(t->numel() + shards - 1) / shards};
      }
  }
}

} // namespace wavecast
