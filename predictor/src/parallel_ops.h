// The parts of a layout's transform, shared between its files: collective ops in the agreed
// trace format (docs/trace-format.md "Collectives"), the edits to a rank's trace,
// recomputation, the parameters' dtype, and a rank's iteration over microbatches.
#pragma once

#include "wavecast/predictor/collectives.h"
#include "wavecast/predictor/parallel.h"
#include "wavecast/trace.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

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

// An op the layout adds, `name` at `near`'s line, stack and module, in `phase`; numbered
// (id -1) where it is inserted.
OpRecord insertedOp(std::string name, const OpRecord& near, Phase phase);
// The op `wavecast::<kind>` at `near`'s line and module, in `phase`.
OpRecord collectiveOp(const CollectiveCall& call, const OpRecord& near, Phase phase);
// "all_reduce", ..., "send" for point-to-point.
const char* collectiveOpName(CollectiveKind kind);

// Where the ops of the rank trace go: the original ops (edited) with collectives before and
// after some of them.
struct Edits {
  std::vector<OpRecord> ops; // the original ops, edited in place
  std::vector<std::vector<OpRecord>> before, after;
  std::vector<bool> dropped; // [op]: the rank does not run it
  // Ids for inserted ops another op must name (a wait point); the rest get theirs in order.
  int64_t nextId = 0;
  explicit Edits(const Trace& trace)
      : ops(trace.ops), before(trace.ops.size()), after(trace.ops.size()),
        dropped(trace.ops.size(), false) {
    for (const auto& op : trace.ops)
      nextId = std::max(nextId, op.id + 1);
  }
};

// A collective's group ("dp", "tp", "pp", or the traced group's name); "" for other ops.
inline std::string_view collectiveGroup(const OpRecord& op) {
  const auto group = op.args.find("group");
  const auto* name = group != op.args.end() ? std::get_if<std::string>(&group->second) : nullptr;
  return name ? std::string_view(*name) : std::string_view();
}

// The shape's dimension `dim` split `factor` ways (rounded up).
inline void divide(std::optional<TensorMeta>& tensor, size_t dim, int factor) {
  if (tensor && dim < tensor->shape.size())
    tensor->shape[dim] = (tensor->shape[dim] + factor - 1) / factor;
}

// Data parallelism (parallel_data.cpp). DDP's gradient buckets, or ZeRO-1/2's reduce-
// scatters and the gathers after the step.
void insertGradientBuckets(const ModelStructure& model, const ParallelConfig& config,
                           int gpusPerNode, Edits& edits);
// ZeRO-3 / FSDP: each block's parameters gathered and its gradients reduce-scattered.
void insertFullySharded(const ModelStructure& model, const ParallelConfig& config, int gpusPerNode,
                        Edits& edits);
// Autocast's casts of the parameters (and their gradients' back), which FSDP's mixed
// precision makes unneeded.
void dropParameterCasts(const ModelStructure& model, ScalarType gathered, Edits& edits);
// The optimizer's tensors cut to the rank's share.
void shardOptimizer(const ModelStructure& model, const ParallelConfig& config, Edits& edits);
// Expert parallelism (parallel_experts.cpp): the experts split and the token all-to-alls.
// Its forward ops (the counts' bookkeeping and the all-to-alls) carry this argument: a
// recomputed block runs them again.
inline constexpr const char* kExpertDispatch = "expert_dispatch";
void splitExperts(const ModelStructure& model, const ParallelConfig& config, int gpusPerNode,
                  Edits& edits);

// A parameter's bytes and elements on one rank after tensor and expert parallelism.
int64_t rankBytes(const ParameterInfo& p, const ParallelConfig& config);
int64_t rankElements(const ParameterInfo& p, const ParallelConfig& config);
// The ranks ZeRO/FSDP shard a parameter over: dp, or an expert's dp / ep replicas.
int zeroShards(const ParameterInfo& p, const ParallelConfig& config);

// Views and other ops that launch no work (op_tables' metadata ops).
bool isMetadata(const OpRecord& op);

// Activation recomputation (torch.utils.checkpoint around every block, or every
// `recomputeEvery`-th one, as torchtitan's layer checkpointing picks them): a recomputed
// block's forward keeps only its input for backward (and, under the per-op policy, the
// outputs of the ops it saves, which do not run again), and runs again, tensor-parallel collectives
// included, right before the block's backward (after FSDP's gather of its parameters).
// The rerun stops once every tensor the block's backward needs is made again, as the
// non-reentrant checkpoint (torch's default, FSDP's checkpoint wrapper) does: a
// transformer block's last GEMM and residual add do not run again. A block's output is
// the next block's input, kept as it was (by whatever saved it). What the rerun saves lives
// only while that backward runs: returned per block (0 for a block run as traced), for
// memory, in `rerunSaved`; in `policyKept`, what the per-op policy keeps from forward.
void insertRecompute(const ModelStructure& model, const ParallelConfig& config, Edits& edits,
                     std::vector<int64_t>& rerunSaved, std::vector<int64_t>& policyKept);

// The parameters' dtype, from their size per element (a 2-byte one taken as bf16: a copy
// costs the same either way).
ScalarType dtypeOf(const ParameterInfo& param);
// The model's parameters' dtype (its first's; fp32 when none were found).
ScalarType parameterDtype(const ModelStructure& model);

// An op the layout inserted, with no single-GPU op of its own (a pipeline stage's send).
constexpr size_t kNoOrigin = std::numeric_limits<size_t>::max();

// A rank's iteration over m microbatches of its batch (a pipeline stage's, or gradient
// accumulation's): each microbatch's forward, then its backward, as 1F1B runs a stage's own
// work (GPipe runs every forward first: the same ops, the same host calls), and the
// optimizer once. Each copy of a traced op runs on 1/m of the batch (`batchShare`), and the
// activations its collectives move are 1/m as large; the data-parallel collectives run
// once, on the first microbatch's forward (FSDP's gathers, kept until backward) and the
// last one's backward (gradients reduced once: DDP's no_sync). From the second microbatch
// on, each parameter's new gradient is added to the one kept (AccumulateGrad's add_).
// `origin` gives each op of `stage` its op in `single` (or kNoOrigin). Where `single` was
// traced at one microbatch's batch (`tracedPerMicrobatch`), its ops are copied as they are.
struct Microbatches {
  int count = 1;
  bool tracedPerMicrobatch = false;
};
Trace runMicrobatches(const Trace& stage, const std::vector<size_t>& origin, const Trace& single,
                      const ModelStructure& model, const ParallelConfig& config,
                      Microbatches microbatches);

} // namespace wavecast
