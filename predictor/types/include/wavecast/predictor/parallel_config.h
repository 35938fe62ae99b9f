// A multi-GPU layout (data, tensor and pipeline parallelism, ZeRO/FSDP sharding) and what
// the predictor says of one: the value types the CLI, the daemon and the results JSON pass
// around (docs/parallel.md).
#pragma once

#include "wavecast/predictor/prediction.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wavecast {

// How optimizer states, gradients and parameters are split over the data-parallel ranks.
enum class Sharding {
  None,  // DDP: everything replicated, gradients all-reduced in buckets
  Zero1, // optimizer states sharded
  Zero2, // + gradients reduce-scattered and sharded
  Zero3, // + parameters sharded, gathered per block (FSDP)
};
constexpr const char* toString(Sharding sharding) {
  switch (sharding) {
  case Sharding::None:
    return "none";
  case Sharding::Zero1:
    return "zero1";
  case Sharding::Zero2:
    return "zero2";
  case Sharding::Zero3:
    return "zero3";
  }
  return "unknown";
}
inline std::optional<Sharding> shardingFromString(std::string_view text) {
  if (text == "fsdp")
    return Sharding::Zero3;
  for (Sharding s : {Sharding::None, Sharding::Zero1, Sharding::Zero2, Sharding::Zero3})
    if (text == toString(s))
      return s;
  return std::nullopt;
}

// The order pipeline stages run microbatches in.
enum class PipelineSchedule {
  GPipe,    // every forward, then every backward: m microbatches in flight
  OneFOneB, // one forward, one backward: at most p in flight on the first stage
};
constexpr const char* toString(PipelineSchedule schedule) {
  switch (schedule) {
  case PipelineSchedule::GPipe:
    return "gpipe";
  case PipelineSchedule::OneFOneB:
    return "1f1b";
  }
  return "unknown";
}
inline std::optional<PipelineSchedule> pipelineScheduleFromString(std::string_view text) {
  for (PipelineSchedule s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB})
    if (text == toString(s))
      return s;
  return std::nullopt;
}

// What a recomputed block runs again in backward.
enum class RecomputePolicy {
  WholeBlock, // its forward (torch.utils.checkpoint, Megatron's full recompute)
  // All but the ops torchtitan's per-op policy saves: attention and every other matmul
  // (`aten::mm`), whose outputs the forward keeps.
  SelectiveOps,
};
constexpr const char* toString(RecomputePolicy policy) {
  switch (policy) {
  case RecomputePolicy::WholeBlock:
    return "block";
  case RecomputePolicy::SelectiveOps:
    return "ops";
  }
  return "unknown";
}

// The words a layout names a floating-point dtype with ("bf16", "fp16", "fp32"); torch's
// names ("bfloat16") are read too.
inline const char* precisionWord(ScalarType type) {
  switch (type) {
  case ScalarType::BFloat16:
    return "bf16";
  case ScalarType::Float16:
    return "fp16";
  case ScalarType::Float32:
    return "fp32";
  default:
    return toString(type);
  }
}
inline std::optional<ScalarType> precisionFromWord(std::string_view word) {
  for (ScalarType t : {ScalarType::BFloat16, ScalarType::Float16, ScalarType::Float32})
    if (word == precisionWord(t) || word == toString(t))
      return t;
  return std::nullopt;
}

struct ParallelConfig {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int microbatches = 1; // per iteration and data-parallel replica
  // Expert parallelism (torchtitan's, DeepSpeed-MoE's): the grouped GEMMs' experts split
  // over ep of the dp ranks, tokens sent to their experts' ranks and back by all-to-alls.
  // It divides dp and adds no GPUs: an expert's replicas are dp / ep apart.
  int ep = 1;
  Sharding sharding = Sharding::None;
  bool sequenceParallel = false; // Megatron's: norms and dropout on 1/tp of the sequence
  // Activation recomputation of repeated blocks (torch.utils.checkpoint around a block,
  // Megatron's --recompute-granularity full): autograd keeps only a recomputed block's
  // input, and its forward runs again before its backward.
  bool recompute = false;
  // With recompute, the blocks recomputed: every k-th (blocks k-1, 2k-1, ...: torchtitan's
  // layer checkpointing with selective_ac_option k); 1, every block.
  int recomputeEvery = 1;
  RecomputePolicy recomputePolicy = RecomputePolicy::WholeBlock;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  // FSDP2's MixedPrecisionPolicy: the dtype each shard is cast to and gathered (and the
  // blocks compute) in, and the one gradients are reduce-scattered in. nullopt: the
  // parameters' own; for the reduction, the gathered dtype (FSDP2's default).
  std::optional<ScalarType> paramDtype;
  std::optional<ScalarType> reduceDtype;
  // DDP's bucket_cap_mb (25 MiB) and its first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES).
  int64_t bucketBytes = int64_t{25} << 20;
  int64_t firstBucketBytes = int64_t{1} << 20;

  int worldSize() const { return dp * tp * pp; }
  bool singleGpu() const { return worldSize() == 1; }
};

// Why a layout written as words (parseParallelTarget) cannot be read: `word` is the culprit.
enum class TargetTextProblemKind { UnknownWord, BadNumber, CountNotDivisible };
struct TargetTextProblem {
  TargetTextProblemKind kind = TargetTextProblemKind::UnknownWord;
  std::string word;
};

// Why a layout cannot run; presentation.cpp writes the one sentence naming what to change.
enum class LayoutProblemKind {
  BadDegree,                   // a degree below 1: `value`
  TpWithoutHeads,              // tp > 1 on a model without attention / Linear pairs to split
  TpNotDividingHeads,          // tp `value` does not divide the `limit` attention heads
  TpNotDividingHidden,         // tp `value` does not divide the hidden size `limit`
  EpWithoutExperts,            // ep `value` on a model without grouped-GEMM experts
  EpNotDividingDp,             // ep `value` does not divide dp `limit`
  EpNotDividingExperts,        // ep `value` does not divide the `limit` experts of a layer
  PpExceedsLayers,             // pp `value` is more than the `limit` repeated blocks
  WorldSizeNotFittingNodes,    // `value` GPUs over nodes of `limit`: not a multiple
  TpAcrossNodes,               // tp `value` is more than the `limit` GPUs of one node
  BatchNotDivisible,           // batch `limit` per replica is not divisible by `value` microbatches
  RecomputeWithoutBlocks,      // recompute asked of a model without repeated blocks
  RecomputeAlready,            // recompute asked of a script that checkpoints its blocks
  RecomputeEveryExceedsBlocks, // every `value`-th block recomputed, of `limit` blocks: none
  MixedPrecisionWithoutFsdp,   // param/reduce dtypes asked without FSDP's gathered parameters
  // param dtype `value` (a ScalarType) differs from the trace's compute (`limit`, also one:
  // its autocast dtype or its parameters')
  ParamDtypeNotTraced,
};
constexpr const char* toString(LayoutProblemKind kind) {
  switch (kind) {
  case LayoutProblemKind::BadDegree:
    return "bad_degree";
  case LayoutProblemKind::TpWithoutHeads:
    return "tp_without_heads";
  case LayoutProblemKind::TpNotDividingHeads:
    return "tp_not_dividing_heads";
  case LayoutProblemKind::TpNotDividingHidden:
    return "tp_not_dividing_hidden";
  case LayoutProblemKind::EpWithoutExperts:
    return "ep_without_experts";
  case LayoutProblemKind::EpNotDividingDp:
    return "ep_not_dividing_dp";
  case LayoutProblemKind::EpNotDividingExperts:
    return "ep_not_dividing_experts";
  case LayoutProblemKind::PpExceedsLayers:
    return "pp_exceeds_layers";
  case LayoutProblemKind::WorldSizeNotFittingNodes:
    return "world_size_not_fitting_nodes";
  case LayoutProblemKind::TpAcrossNodes:
    return "tp_across_nodes";
  case LayoutProblemKind::BatchNotDivisible:
    return "batch_not_divisible";
  case LayoutProblemKind::RecomputeWithoutBlocks:
    return "recompute_without_blocks";
  case LayoutProblemKind::RecomputeAlready:
    return "recompute_already";
  case LayoutProblemKind::RecomputeEveryExceedsBlocks:
    return "recompute_every_exceeds_blocks";
  case LayoutProblemKind::MixedPrecisionWithoutFsdp:
    return "mixed_precision_without_fsdp";
  case LayoutProblemKind::ParamDtypeNotTraced:
    return "param_dtype_not_traced";
  }
  return "unknown";
}
struct LayoutProblem {
  LayoutProblemKind kind = LayoutProblemKind::BadDegree;
  int64_t value = 0; // the degree (or microbatches) given
  int64_t limit = 0; // what it must divide or stay under
};

// A layout asked for that the model cannot run on its GPU and node, and why.
struct ParallelRefusal {
  ParallelConfig config;
  std::string gpuId;
  std::string systemId;
  LayoutProblem problem;
};

// Communication of one kind in one iteration of one rank.
struct CommunicationTotals {
  double ms = 0;        // the collectives' time on the communication stream
  double exposedMs = 0; // the part the compute stream waited for
  double hiddenMs() const { return ms - exposedMs; }
};

// One pipeline stage's share of the model and what it needs.
struct StageSummary {
  int firstBlock = 0; // repeated blocks [firstBlock, lastBlock)
  int lastBlock = 0;
  double forwardMs = 0;  // per microbatch, its communication exposed included
  double backwardMs = 0; // per microbatch
  double optimizerMs = 0;
  int microbatchesInFlight = 1; // activations kept at once
  MemoryEstimate memory;        // per rank of this stage
  bool fitsInMemory = true;
};

// How each microbatch's ops were priced.
enum class MicrobatchPricing {
  Whole,  // one microbatch: the batch's ops as traced
  Traced, // at their own shapes, from the script traced again at one microbatch's batch
  Shares, // the whole batch's ops, each at 1/m of its work (no trace of one microbatch)
};
constexpr const char* toString(MicrobatchPricing pricing) {
  switch (pricing) {
  case MicrobatchPricing::Whole:
    return "whole";
  case MicrobatchPricing::Traced:
    return "traced";
  case MicrobatchPricing::Shares:
    return "shares";
  }
  return "unknown";
}

// A layout on one GPU and system: the per-configuration figures (docs/results-json.md).
struct ParallelSummary {
  ParallelConfig config;
  std::string gpuId;
  std::string systemId;
  int gpus = 1;
  int nodes = 1;
  int64_t batchPerReplica = 0;
  int64_t globalBatch = 0;
  int64_t sequenceLength = 0; // 0: the input has no sequence dimension
  MicrobatchPricing microbatchPricing = MicrobatchPricing::Whole;
  double iterationMs = 0;
  double computeMs = 0;      // the slowest stage's compute per iteration
  double bubbleMs = 0;       // the pipeline's idle time
  double bubbleFraction = 0; // of the iteration
  double pointToPointMs = 0; // activation sends on the critical path
  CommunicationTotals communication;
  double samplesPerSecond = 0; // the whole cluster
  double samplesPerSecondPerGpu = 0;
  double tokensPerSecond = 0; // 0 without a sequence dimension
  double tokensPerSecondPerGpu = 0;
  double modelFlops = 0;    // per iteration, every replica (forward + backward)
  double mfu = 0;           // modelFlops / (iteration x peak of the precision x GPUs)
  std::string mfuPrecision; // the matrix precision whose peak MFU divides by
  double clusterPricePerHourUsd = 0;
  double costPer1kSamplesUsd = 0;
  std::vector<StageSummary> stages;
  bool fitsInMemory = true; // every rank
  // What the layout itself should tell (a tensor-parallel plan leaving the experts whole).
  std::vector<Advisory> advisories;
};

} // namespace wavecast
