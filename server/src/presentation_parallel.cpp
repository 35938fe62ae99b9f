// The words of multi-GPU layouts and their communication (docs/parallel.md): labels,
// layout problems, and what the collectives of a line or a layout cost.
#include "presentation.h"

namespace wavecast {

std::string parallelConfigLabel(const ParallelConfig& config, const std::string& gpu) {
  std::string label = std::to_string(config.worldSize()) + "\u00d7 " + gpu;
  switch (config.sharding) {
  case Sharding::None:
    label += config.dp > 1 ? ", DDP" : "";
    break;
  case Sharding::Zero1:
    label += ", ZeRO-1";
    break;
  case Sharding::Zero2:
    label += ", ZeRO-2";
    break;
  case Sharding::Zero3:
    label += ", FSDP";
    break;
  }
  if (config.dp > 1 && (config.tp > 1 || config.pp > 1))
    label += ", dp " + std::to_string(config.dp);
  if (config.tp > 1)
    label += ", tp " + std::to_string(config.tp) + (config.sequenceParallel ? " + SP" : "");
  if (config.ep > 1)
    label += ", ep " + std::to_string(config.ep);
  if (config.pp > 1)
    label += ", pp " + std::to_string(config.pp) + " (" + std::to_string(config.microbatches) +
             " microbatches, " + (config.schedule == PipelineSchedule::GPipe ? "GPipe" : "1F1B") +
             ")";
  if (config.recompute)
    label +=
        config.recomputePolicy == RecomputePolicy::SelectiveOps ? ", recompute ops" : ", recompute";
  if (config.recompute && config.recomputeEvery != 1)
    label += " every " + std::to_string(config.recomputeEvery);
  if (config.paramDtype)
    label += std::string(", ") + precisionWord(*config.paramDtype) + " params";
  if (config.reduceDtype)
    label += std::string(", ") + precisionWord(*config.reduceDtype) + " reduce";
  return label;
}

std::string layoutProblemMessage(const LayoutProblem& problem) {
  const std::string value = std::to_string(problem.value);
  const std::string limit = std::to_string(problem.limit);
  switch (problem.kind) {
  case LayoutProblemKind::BadDegree:
    return "dp, tp, pp, ep and microbatches must each be at least 1 (got " + value + ")";
  case LayoutProblemKind::TpWithoutHeads:
    return "tensor parallelism splits the Linear pairs of repeated blocks (attention, MLP), "
           "and this model has none: use --tp 1 and scale with --dp or --pp";
  case LayoutProblemKind::TpNotDividingHeads:
    return "--tp " + value + " does not divide the model's " + limit +
           " attention heads: choose a tp that divides " + limit;
  case LayoutProblemKind::TpNotDividingHidden:
    return "--tp " + value + " does not divide the hidden size " + limit +
           ": choose a tp that divides " + limit;
  case LayoutProblemKind::EpWithoutExperts:
    return "expert parallelism splits the experts of grouped-GEMM mixture-of-experts layers "
           "(torch._grouped_mm, as transformers and torchtitan run them), and this model has "
           "none: leave out --ep";
  case LayoutProblemKind::EpNotDividingDp:
    return "--ep " + value + " does not divide --dp " + limit +
           ": expert parallelism splits the data-parallel ranks, so choose an ep dividing " + limit;
  case LayoutProblemKind::EpNotDividingExperts:
    return "--ep " + value + " does not divide the " + limit +
           " experts of each mixture-of-experts layer: choose an ep dividing " + limit;
  case LayoutProblemKind::PpExceedsLayers:
    return "--pp " + value + " is more than the model's " + limit +
           " repeated blocks (layers): use --pp " + limit + " or fewer";
  case LayoutProblemKind::WorldSizeNotFittingNodes:
    return value + " GPUs (dp x tp x pp) do not fill whole nodes of " + limit +
           " GPUs: make dp x tp x pp a multiple of " + limit;
  case LayoutProblemKind::TpAcrossNodes:
    return "--tp " + value + " spans more than the " + limit + " GPUs of one node: keep tp at " +
           limit + " or less and scale with --dp or --pp";
  case LayoutProblemKind::BatchNotDivisible:
    return "the batch of " + limit + " per replica does not divide into " + value +
           " microbatches: choose --microbatches dividing " + limit + " or change --batch-size";
  case LayoutProblemKind::RecomputeWithoutBlocks:
    return "activation recomputation reruns each repeated block (layer) before its backward, "
           "and this model has none: leave out --recompute";
  case LayoutProblemKind::RecomputeAlready:
    return "the script already recomputes its blocks' activations in backward "
           "(torch.utils.checkpoint): leave out --recompute";
  case LayoutProblemKind::RecomputeEveryExceedsBlocks:
    return "--recompute-every " + value + " is more than the model's " + limit +
           " repeated blocks (layers), so none would be recomputed: use --recompute-every " +
           limit + " or less";
  case LayoutProblemKind::MixedPrecisionWithoutFsdp:
    return "--param-dtype and --reduce-dtype set the dtypes FSDP gathers parameters and "
           "reduces gradients in: add --fsdp with --dp 2 or more, or leave them out";
  case LayoutProblemKind::ParamDtypeNotTraced: {
    const char* asked = precisionWord(static_cast<ScalarType>(problem.value));
    const char* traced = precisionWord(static_cast<ScalarType>(problem.limit));
    return std::string("--param-dtype ") + asked + " makes every block compute in " + asked +
           ", and the script computes in " + traced + ": run it under torch.autocast(\"cuda\", " +
           "dtype=torch." + toString(static_cast<ScalarType>(problem.value)) +
           ") or leave out --param-dtype";
  }
  }
  return "this layout cannot run";
}

std::string communicationText(double ms, double hiddenMs) {
  return "communication " + formatMs(ms) + ", " + formatMs(hiddenMs) +
         " of it hidden behind compute";
}

std::string microbatchPricingText(const ParallelSummary& summary) {
  const int m = summary.config.microbatches;
  switch (summary.microbatchPricing) {
  case MicrobatchPricing::Whole:
    return "";
  case MicrobatchPricing::Traced:
    return "microbatches of " + std::to_string(summary.batchPerReplica / m) +
           " priced at their own shapes";
  case MicrobatchPricing::Shares:
    return "each microbatch priced as 1/" + std::to_string(m) + " of the batch's ops";
  }
  return "";
}

std::string targetTextProblemMessage(const std::string& text, const TargetTextProblem& problem) {
  const std::string at = "cannot read the target '" + text + "' at '" + problem.word + "': ";
  switch (problem.kind) {
  case TargetTextProblemKind::UnknownWord:
    return at + "write it as words such as \"8x H100-SXM, FSDP\" (NxGPU, dpN, tpN, ppN, mbN, "
                "zero1|zero2|zero3|fsdp|ddp, sp, recompute [ops] [every N], gpipe|1f1b, "
                "param bf16, reduce fp32; docs/parallel.md)";
  case TargetTextProblemKind::BadNumber:
    return at + "counts and degrees are whole numbers of 1 or more, e.g. 8xH100-SXM, tp2";
  case TargetTextProblemKind::CountNotDivisible:
    return at + "the GPU count must be a multiple of tp x pp";
  }
  return at + "see docs/parallel.md";
}

std::string collectiveName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all-reduce";
  case CollectiveKind::AllGather:
    return "all-gather";
  case CollectiveKind::ReduceScatter:
    return "reduce-scatter";
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::AllToAll:
    return "all-to-all";
  case CollectiveKind::SendRecv:
    return "send/receive";
  }
  return "collective";
}

std::string communicationPartText(const CommunicationPart& part) {
  std::string text = collectiveName(part.kind) + " " + formatMs(part.ms);
  if (part.hiddenMs <= 0)
    return text + ", none of it hidden";
  return text + ", " + formatMs(part.hiddenMs) + " of it hidden behind " + toString(part.phase);
}

std::string lineCommunicationText(const LineTimes& times) {
  if (times.communication.empty())
    return times.commMs > 0 ? communicationText(times.commMs, times.commHiddenMs) : "";
  std::string text;
  for (const auto& part : times.communication)
    text += (text.empty() ? "" : "; ") + communicationPartText(part);
  return text;
}

std::string layoutLineText(const ParallelConfig& config, const std::string& gpu,
                           const LineTimes& times) {
  std::string text = "- **" + parallelConfigLabel(config, gpu) + "**: " + formatMs(times.totalMs());
  if (times.commMs > 0)
    text += "; " + lineCommunicationText(times);
  return text + "\n";
}

std::string layoutsHoverSection(const std::string& bullets) {
  if (bullets.empty())
    return "";
  return "\n**Multi-GPU targets** (one rank of each; its collectives run on NCCL's stream):\n" +
         bullets;
}

} // namespace wavecast
