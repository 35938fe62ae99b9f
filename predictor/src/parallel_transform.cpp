// The trace one rank of a layout records, made from a single-GPU trace: Megatron tensor
// parallelism (column/row-parallel Linear pairs, attention split by heads, a vocabulary-
// parallel embedding and head, sequence parallelism) here, data parallelism in
// parallel_data.cpp, expert parallelism in parallel_experts.cpp; each collective an op in
// the agreed trace format.
#include "op_tables.h"
#include "parallel_ops.h"
#include "wavecast/predictor/collectives.h"
#include "wavecast/predictor/parallel.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>
#include <variant>

namespace wavecast {
namespace {

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

} // namespace

OpRecord insertedOp(std::string name, const OpRecord& near, Phase phase) {
  OpRecord op;
  op.id = -1;
  op.name = std::move(name);
  op.phase = phase;
  op.loc = near.loc;
  op.stack = near.stack;
  op.module = near.module;
  return op;
}

OpRecord collectiveOp(const CollectiveCall& call, const OpRecord& near, Phase phase) {
  OpRecord op = insertedOp(std::string("wavecast::") + collectiveOpName(call.kind), near, phase);
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

namespace {

// The ranks a parameter is split over: tp for a tensor-parallel one, ep for an expert's.
int64_t rankSplit(const ParameterInfo& p, const ParallelConfig& config) {
  return (p.tensorParallel ? config.tp : 1) * (p.expert ? config.ep : 1);
}

} // namespace

int64_t rankBytes(const ParameterInfo& p, const ParallelConfig& config) {
  const int64_t split = rankSplit(p, config);
  return (p.bytes + split - 1) / split;
}

int64_t rankElements(const ParameterInfo& p, const ParallelConfig& config) {
  const int64_t split = rankSplit(p, config);
  return (p.numel + split - 1) / split;
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
