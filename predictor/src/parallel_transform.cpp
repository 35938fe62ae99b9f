// The trace one rank of a layout records, made from a single-GPU trace: Megatron tensor
// parallelism (column/row-parallel Linear pairs, attention split by heads, a vocabulary-
// parallel embedding and head, sequence parallelism), DDP's gradient buckets and ZeRO/FSDP's
// gathers and reduce-scatters, each collective an op in the agreed trace format.
#include "op_tables.h"
#include "parallel_ops.h"
#include "wavecast/predictor/collectives.h"
#include "wavecast/predictor/parallel.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

namespace wavecast {
namespace {

void divide(std::optional<TensorMeta>& tensor, size_t dim, int factor) {
  if (tensor && dim < tensor->shape.size())
    tensor->shape[dim] = (tensor->shape[dim] + factor - 1) / factor;
}
void divide(OpRecord& op, bool output, size_t index, size_t dim, int factor) {
  auto& list = output ? op.outputs : op.inputs;
  if (index < list.size())
    divide(list[index], dim, factor);
}

class TensorParallel {
public:
  TensorParallel(const ModelStructure& model, const ParallelConfig& config, Edits& edits)
      : model_(model), tp_(config.tp), sp_(config.sequenceParallel), edits_(edits) {
    tokens_ = model.batch * std::max<int64_t>(model.sequence, 1);
  }

  void apply() {
    std::vector<int> interiorGroup(edits_.ops.size(), -1);
    for (size_t g = 0; g < model_.groups.size(); ++g)
      for (size_t i = model_.groups[g].firstOp + 1; i < model_.groups[g].rowOp; ++i)
        interiorGroup[i] = static_cast<int>(g);
    std::vector<bool> lossOp(edits_.ops.size(), false);
    if (model_.headOp)
      for (size_t i = *model_.headOp + 1; i < edits_.ops.size(); ++i)
        lossOp[i] = edits_.ops[i].phase == Phase::Forward && model_.opBlock[i] < 0;
    for (size_t i = 0; i < edits_.ops.size(); ++i) {
      OpRecord& op = edits_.ops[i];
      if (isMetadata(op) || op.phase == Phase::Optimizer)
        continue;
      const size_t origin = model_.opForward[i];
      const int linear = model_.opLinear[i];
      if (linear >= 0 && model_.linears[linear].role != LinearRole::Replicated) {
        shardLinear(op, model_.linears[linear]);
      } else if (linear >= 0 && model_.linears[linear].op == model_.headOp) {
        shardLinear(op, headCall());
      } else if (interiorGroup[origin] >= 0) {
        shardInterior(op);
      } else if (lossOp[origin] || (model_.embeddingOp && origin == *model_.embeddingOp)) {
        shardVocabulary(op);
      } else if (sp_ && model_.opBlock[i] >= 0) {
        shardSequence(op);
      }
    }
    insertCollectives();
  }

private:
  const LinearCall& headCall() {
    if (!head_) {
      head_.emplace();
      head_->module = edits_.ops[*model_.headOp].module;
      head_->in = model_.hidden;
      head_->out = model_.vocab;
      head_->role = LinearRole::Column;
    }
    return *head_;
  }

  void scaleSaved(OpRecord& op) {
    if (op.savedBytes)
      *op.savedBytes /= tp_;
    op.liveBytes.reset(); // the whole rank's live bytes: not known op by op once split
  }

  // A GEMM of a split Linear: column-parallel splits N, row-parallel K; in backward, the
  // input gradient [T,N]x[N,K] and the weight gradient [N,T]x[T,K] split the same ways.
  void shardLinear(OpRecord& op, const LinearCall& linear) {
    const bool column = linear.role == LinearRole::Column;
    const int64_t split = column ? linear.out : linear.in;
    if (op.phase == Phase::Forward) {
      if (op.name == "aten::linear") {
        divide(op, false, 1, column ? 0 : 1, tp_);
        if (column) {
          divide(op, false, 2, 0, tp_);
          divide(op, true, 0,
                 op.outputs.empty() || !op.outputs[0] ? 0 : op.outputs[0]->shape.size() - 1, tp_);
        } else if (op.input(0)) {
          divide(op, false, 0, op.input(0)->shape.size() - 1, tp_);
        }
      } else {
        const size_t a = op.name == "aten::addmm" ? 1 : 0;
        if (column) {
          divide(op, false, a + 1, 1, tp_);
          divide(op, true, 0, 1, tp_);
          if (a == 1)
            divide(op, false, 0, 0, tp_);
        } else {
          divide(op, false, a, 1, tp_);
          divide(op, false, a + 1, 0, tp_);
        }
      }
      scaleSaved(op);
      return;
    }
    const auto* A = op.input(0);
    if ((op.name == "aten::mm") && A && A->shape.size() == 2) {
      if (!column) { // the split K is the output's columns in both gradients
        divide(op, false, 1, 1, tp_);
        divide(op, true, 0, 1, tp_);
      } else if (A->shape[1] == split) { // input gradient: N contracted
        divide(op, false, 0, 1, tp_);
        divide(op, false, 1, 0, tp_);
      } else { // weight gradient: N rows
        divide(op, false, 0, 0, tp_);
        divide(op, true, 0, 0, tp_);
      }
      return;
    }
    if (column) // the bias gradient and anything else over the split columns
      for (auto* list : {&op.inputs, &op.outputs})
        for (auto& t : *list)
          if (t && !t->shape.empty() && t->shape.back() == split)
            divide(t, t->shape.size() - 1, tp_);
  }

  // Between a column-parallel Linear and its row-parallel closer everything is split by
  // heads or by the intermediate columns; broadcast buffers (a causal mask) are not.
  void shardInterior(OpRecord& op) {
    const int64_t batch = model_.batch, heads = model_.heads;
    for (auto* list : {&op.inputs, &op.outputs})
      for (auto& t : *list) {
        if (!t)
          continue;
        const auto& s = t->shape;
        if (s.size() >= 4 && heads > 0) {
          // [B,H,L,D], [B,L,H,D], and a fused projection's [B,L,3,H,D] or [3,B,H,L,D]: the
          // first inner dimension holding the heads.
          for (size_t d = 1; d + 1 < s.size(); ++d)
            if (s[d] == heads) {
              divide(t, d, tp_);
              break;
            }
        } else if (s.size() == 3 && heads > 0 && s[0] == batch * heads)
          divide(t, 0, tp_);
        else if (s.size() == 3 && s[0] == batch)
          divide(t, 2, tp_);
        else if (s.size() == 2 && s[0] == tokens_)
          divide(t, 1, tp_);
      }
    scaleSaved(op);
  }

  void shardVocabulary(OpRecord& op) {
    for (auto* list : {&op.inputs, &op.outputs})
      for (auto& t : *list)
        if (t)
          for (size_t d = 0; d < t->shape.size(); ++d)
            if (t->shape[d] == model_.vocab) {
              divide(t, d, tp_);
              break;
            }
    scaleSaved(op);
  }

  // Sequence parallelism: norms, dropout and residuals of a block on 1/tp of the tokens.
  void shardSequence(OpRecord& op) {
    for (auto* list : {&op.inputs, &op.outputs})
      for (auto& t : *list) {
        if (!t || t->shape.empty() || t->shape.back() != model_.hidden)
          continue;
        if (t->shape.size() == 3 && t->shape[0] == model_.batch)
          divide(t, 1, tp_);
        else if (t->shape.size() == 2 && t->shape[0] == tokens_)
          divide(t, 0, tp_);
      }
    scaleSaved(op);
  }

  // Two syncs per group and pass: forward after the row GEMM, backward after the column
  // Linears' input gradients. Sequence parallelism turns each into a reduce-scatter where
  // the all-reduce was and an all-gather where the full sequence is needed again.
  void insertCollectives() {
    // Each Linear's backward ops, first and last (those whose forward_id is its GEMM).
    std::unordered_map<size_t, std::pair<size_t, size_t>> backwardSpan; // linear -> span
    for (size_t i = 0; i < edits_.ops.size(); ++i)
      if (edits_.ops[i].phase == Phase::Backward && model_.opLinear[i] >= 0) {
        auto [it, fresh] = backwardSpan.emplace(model_.opLinear[i], std::make_pair(i, i));
        it->second.second = i;
      }
    for (const auto& group : model_.groups) {
      const OpRecord& row = edits_.ops[group.rowOp];
      const int64_t bytes = tokens_ * model_.hidden * elementSizeOf(row);
      std::optional<size_t> columnGrad, rowGrad;
      for (size_t c : group.columns)
        if (const auto it = backwardSpan.find(c); it != backwardSpan.end())
          columnGrad = std::max(columnGrad.value_or(0), it->second.second);
      if (const auto it = backwardSpan.find(group.row); it != backwardSpan.end())
        rowGrad = it->second.first;
      const OpRecord& first = edits_.ops[group.firstOp];
      if (!sp_) {
        edits_.after[group.rowOp].push_back(
            tensorParallelOp(CollectiveKind::AllReduce, bytes, row, Phase::Forward));
        if (columnGrad)
          edits_.after[*columnGrad].push_back(
              tensorParallelOp(CollectiveKind::AllReduce, bytes, first, Phase::Backward));
        continue;
      }
      edits_.before[group.firstOp].push_back(
          tensorParallelOp(CollectiveKind::AllGather, bytes, first, Phase::Forward));
      edits_.after[group.rowOp].push_back(
          tensorParallelOp(CollectiveKind::ReduceScatter, bytes, row, Phase::Forward));
      if (rowGrad)
        edits_.before[*rowGrad].push_back(
            tensorParallelOp(CollectiveKind::AllGather, bytes, row, Phase::Backward));
      if (columnGrad)
        edits_.after[*columnGrad].push_back(
            tensorParallelOp(CollectiveKind::ReduceScatter, bytes, first, Phase::Backward));
    }
    // The vocabulary-parallel embedding sums its partial lookups; the head's input gradient
    // is summed over the vocabulary shards.
    if (model_.embeddingOp) {
      const OpRecord& embedding = edits_.ops[*model_.embeddingOp];
      const int64_t bytes = tokens_ * model_.hidden * elementSizeOf(embedding);
      edits_.after[*model_.embeddingOp].push_back(
          tensorParallelOp(CollectiveKind::AllReduce, bytes, embedding, Phase::Forward));
    }
    if (model_.headOp) {
      const OpRecord& head = edits_.ops[*model_.headOp];
      if (const auto it = backwardSpan.find(model_.opLinear[*model_.headOp]);
          it != backwardSpan.end())
        edits_.after[it->second.second].push_back(
            tensorParallelOp(CollectiveKind::AllReduce,
                             tokens_ * model_.hidden * elementSizeOf(head), head, Phase::Backward));
    }
  }

  static int elementSizeOf(const OpRecord& op) {
    for (const auto& t : op.outputs)
      if (t)
        return t->elementSize();
    return 4;
  }

  OpRecord tensorParallelOp(CollectiveKind kind, int64_t bytes, const OpRecord& near, Phase phase) {
    return collectiveOp({kind, bytes, "tp", tp_, tp_, false, std::nullopt}, near, phase);
  }

  const ModelStructure& model_;
  int tp_;
  bool sp_;
  Edits& edits_;
  int64_t tokens_ = 0;
  std::optional<LinearCall> head_;
};

// Megatron's rank order (tp fastest, then dp, then pp): a dp group's ranks are tp apart,
// so a node holds gpusPerNode / tp of them.
int dpPerNode(const ParallelConfig& config, int gpusPerNode) {
  return std::max(1, std::min(config.dp, gpusPerNode / std::max(1, config.tp)));
}

// An expert-parallel group's ranks are consecutive dp ranks, tp apart.
int epPerNode(const ParallelConfig& config, int gpusPerNode) {
  return std::max(1, std::min(config.ep, gpusPerNode / std::max(1, config.tp)));
}

// The replicas of an expert (dp / ep of them) are tp x ep ranks apart.
int expertDpPerNode(const ParallelConfig& config, int gpusPerNode) {
  const int replicas = config.dp / std::max(1, config.ep);
  return std::max(1, std::min(replicas, gpusPerNode / std::max(1, config.tp * config.ep)));
}

int64_t rankElements(const ParameterInfo& p, const ParallelConfig& config) {
  const int split = (p.tensorParallel ? config.tp : 1) * (p.expert ? config.ep : 1);
  return (p.numel + split - 1) / split;
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
bool inGroup(const ParameterInfo& p, const ReductionGroup& group, const ParallelConfig& config) {
  return (p.expert && config.ep > 1) == group.experts;
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
  OpRecord op;
  op.id = -1; // numbered with the other inserted ops
  op.name = name;
  op.phase = phase;
  op.loc = near.loc;
  op.stack = near.stack;
  op.module = near.module;
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
      if (group.size > 1 && inGroup(model.parameters[p], group, config))
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
      const auto& group = groups[param.expert && groups.size() > 1 ? 1 : 0];
      if (group.size <= 1)
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
  for (const auto& group : reductionGroups(config, gpusPerNode)) {
    if (group.size <= 1)
      continue;
    // Elements per block (and outside the blocks: the root) on this rank, after tp and ep.
    std::vector<int64_t> blockElements(model.blocks.size(), 0);
    int64_t rootElements = 0;
    for (const auto& p : model.parameters)
      if (inGroup(p, group, config))
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

// Expert parallelism: each rank keeps experts / ep of every layer's experts; the tokens
// routed to the others go to their ranks and come back by an all-to-all each way, in
// forward and again (the gradients) in backward, as torchtitan's token dispatch runs them.
// Each rank first tells the others how many tokens it sends to each expert (an all-to-all
// of counts, read on the host as split sizes). With a balanced router a rank receives as
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
    return collectiveOp({CollectiveKind::AllToAll, bytes, "ep", ep, perNode, false, std::nullopt},
                        edits.ops[near], phase);
  };
  for (const auto& layer : model.expertLayers) {
    auto& before = edits.before[layer.firstForward];
    before.push_back(allToAll(layer.experts * int64_t{8}, layer.firstForward, Phase::Forward));
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

} // namespace

OpRecord collectiveOp(const CollectiveCall& call, const OpRecord& near, Phase phase) {
  OpRecord op;
  op.id = -1; // numbered where it is inserted
  op.name = std::string("wavecast::") + collectiveOpName(call.kind);
  op.phase = phase;
  op.loc = near.loc;
  op.stack = near.stack;
  op.module = near.module;
  op.args["collective"] = std::string(collectiveOpName(call.kind));
  op.args["bytes"] = call.bytes;
  op.args["group"] = std::string(call.group);
  op.args["group_size"] = int64_t{call.groupSize};
  op.args["ranks_per_node"] = int64_t{call.ranksPerNode};
  op.args["async"] = call.async;
  if (call.waitOp)
    op.args["wait_op"] = *call.waitOp;
  return op;
}

int64_t rankBytes(const ParameterInfo& p, const ParallelConfig& config) {
  const int split = (p.tensorParallel ? config.tp : 1) * (p.expert ? config.ep : 1);
  return (p.bytes + split - 1) / split;
}

int zeroShards(const ParameterInfo& p, const ParallelConfig& config) {
  return p.expert && config.ep > 1 ? config.dp / config.ep : config.dp;
}

bool isMetadata(const OpRecord& op) {
  return op_tables::metadataOps().count(op.name.substr(op.name.rfind(':') + 1)) > 0;
}

ScalarType parameterDtype(const ModelStructure& model) {
  return model.parameters.empty() ? ScalarType::Float32 : dtypeOf(model.parameters.front());
}

ScalarType dtypeOf(const ParameterInfo& param) {
  const int64_t size = param.numel > 0 ? param.bytes / param.numel : 4;
  return size == 8 ? ScalarType::Float64 : size == 2 ? ScalarType::BFloat16 : ScalarType::Float32;
}

const char* collectiveOpName(CollectiveKind kind) {
  return kind == CollectiveKind::SendRecv ? "send" : toString(kind);
}

RankTrace transformForRank(const Trace& trace, const ModelStructure& model,
                           const ParallelConfig& config, int gpusPerNode) {
  Edits edits(trace);
  if (config.tp > 1)
    TensorParallel(model, config, edits).apply();
  if (config.dp > 1) {
    if (config.sharding == Sharding::Zero3) {
      insertFullySharded(model, config, gpusPerNode, edits);
      if (config.paramDtype)
        dropParameterCasts(model, *config.paramDtype, edits);
    } else
      insertGradientBuckets(model, config, gpusPerNode, edits);
  }
  if (config.ep > 1)
    splitExperts(model, config, gpusPerNode, edits);
  if (config.tp > 1 || config.ep > 1 || (config.dp > 1 && config.sharding != Sharding::None))
    shardOptimizer(model, config, edits);

  RankTrace rank;
  if (config.recompute)
    insertRecompute(model, config, edits, rank.recomputedSavedBytes, rank.recomputeKeptBytes);
  rank.trace = trace;
  rank.trace.ops.clear();
  rank.trace.ops.reserve(trace.ops.size());
  if (!config.singleGpu()) {
    DistributedInfo distributed;
    distributed.worldSize = config.worldSize();
    distributed.localWorldSize = std::min(distributed.worldSize, gpusPerNode);
    distributed.groups = {
        {"default", config.worldSize()}, {"dp", config.dp}, {"tp", config.tp}, {"pp", config.pp}};
    if (config.ep > 1)
      distributed.groups.insert(distributed.groups.end(),
                                {{"ep", config.ep}, {"edp", config.dp / config.ep}});
    rank.trace.distributed = std::move(distributed);
  }
  int64_t nextId = edits.nextId;
  auto add = [&](OpRecord&& op, size_t origin, bool fresh) {
    if (fresh && op.id < 0)
      op.id = nextId++;
    rank.trace.ops.push_back(std::move(op));
    rank.opBlock.push_back(model.opBlock[origin]);
    rank.opOrigin.push_back(origin);
  };
  for (size_t i = 0; i < edits.ops.size(); ++i) {
    for (auto& op : edits.before[i])
      add(std::move(op), i, true);
    if (!edits.dropped[i])
      add(std::move(edits.ops[i]), i, false);
    for (auto& op : edits.after[i])
      add(std::move(op), i, true);
  }
  for (const auto& p : model.parameters)
    rank.parameterBytesPerRank += rankBytes(p, config);
  if (model.parameters.empty())
    rank.parameterBytesPerRank = model.parameterBytes();
  if (config.sharding == Sharding::Zero3) {
    // Each parameter's shard: of dp ranks, an expert's of its dp / ep replicas.
    rank.parameterBytesPerRank = 0;
    for (const auto& p : model.parameters)
      rank.parameterBytesPerRank += rankBytes(p, config) / zeroShards(p, config);
    if (model.parameters.empty())
      rank.parameterBytesPerRank = model.parameterBytes() / config.dp;
  }
  return rank;
}

} // namespace wavecast
