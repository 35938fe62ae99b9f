#include "wavecast/predictor/op_cost.h"

#include "cost_shapes.h"
#include "family_costs.h"
#include "op_tables.h"

#include <algorithm>

namespace wavecast {
namespace {

using namespace cost_shapes;
using namespace family_costs;
using namespace op_tables;

// "add_" -> "add" (in place); "_foreach_add_" -> "_foreach_add"; "__and__" stays.
std::string withoutInplaceSuffix(const std::string& stem, bool& inplace) {
  inplace = stem.size() > 1 && stem.back() == '_' && stem[stem.size() - 2] != '_';
  return inplace ? stem.substr(0, stem.size() - 1) : stem;
}

OpCost exactFamily(const OpRecord& op, const std::string& stem, bool inplace, bool& known) {
  known = true;
  if (isConvolutionBackward(stem))
    return convolutionBackward(op);
  if (isConvolution(stem))
    return convolution(op);
  if (isAttention(stem))
    return attention(op, stem);
  if (isGemm(stem))
    return gemm(op, stem);
  if (isGroupedGemm(stem))
    return groupedGemm(op, stem);
  if (isGroupedGemmBackward(stem))
    return groupedGemmBackward(op);
  if (isNormalization(stem))
    return normalization(op, stem);
  if (isFft(stem))
    return fft(op, stem);
  if (contains(stem, "softmax"))
    return softmax(op, stem);
  if (isEmbedding(stem)) {
    const bool backward = contains(stem, "backward");
    OpCost cost = embedding(op, backward ? "embedding_dense_backward" : "embedding");
    if (stem != "embedding" && stem != "embedding_dense_backward") {
      cost.approximate = true;
      cost.note = CostNote::EmbeddingLike;
    }
    return cost;
  }
  if (isPooling(stem))
    return pooling(op, stem);
  if (isRecurrent(stem))
    return recurrent(op, stem);
  if (isLoss(stem))
    return loss(op, stem);
  if (stem.rfind("_foreach_", 0) == 0 || contains(stem, "_fused_adam") ||
      contains(stem, "_fused_sgd") || stem == "_amp_foreach_non_finite_check_and_unscale")
    return optimizerForeach(op, stem, inplace);
  if (reductionOps().count(stem))
    return reduction(op, stem);
  if (copyOps().count(stem))
    return copyLike(op, stem);
  if (elementwiseOps().count(stem) || contains(stem, "upsample"))
    return elementwise(op, stem, inplace);
  known = false;
  return {};
}

// No formula of its own: the family its name suggests, else elementwise over its tensors.
OpCost closestFamily(const OpRecord& op, const std::string& stem, bool inplace) {
  OpCost cost;
  if (contains(stem, "conv")) {
    cost = convolution(op);
  } else if (contains(stem, "mm") || contains(stem, "matmul") || contains(stem, "linear")) {
    cost = gemm(op, "matmul");
  } else if (contains(stem, "norm")) {
    cost = normalization(op, stem);
  } else if (contains(stem, "attention")) {
    cost = attention(op, stem);
  } else if (contains(stem, "sum") || contains(stem, "mean") || contains(stem, "reduce")) {
    cost = reduction(op, stem);
  } else if (contains(stem, "copy") || contains(stem, "index") || contains(stem, "scatter") ||
             contains(stem, "gather") || contains(stem, "pad")) {
    cost = copyLike(op, stem);
  } else {
    cost = elementwise(op, stem, inplace);
  }
  cost.approximate = true;
  cost.note = CostNote::NoFormula;
  return cost;
}

// An op the tracer or the what-if transform marked as an NCCL collective
// (args.collective); nullopt for every other op.
std::optional<OpCost> collective(const OpRecord& op) {
  const auto it = op.args.find("collective");
  if (it == op.args.end() || !std::holds_alternative<std::string>(it->second))
    return std::nullopt;
  const auto kind = collectiveKindFromString(std::get<std::string>(it->second));
  if (!kind)
    return std::nullopt;
  OpCost cost;
  cost.family = CostFamily::Collective;
  cost.collective.kind = *kind;
  cost.collective.bytes = std::max<int64_t>(0, op.intArg("bytes").value_or(0));
  cost.collective.groupSize =
      static_cast<int>(std::max<int64_t>(1, op.intArg("group_size").value_or(1)));
  cost.collective.ranksPerNode =
      static_cast<int>(std::max<int64_t>(0, op.intArg("ranks_per_node").value_or(0)));
  cost.collective.async = op.boolArg("async").value_or(false);
  cost.collective.waitOp = op.intArg("wait_op");
  cost.collective.sideStream = op.boolArg("side_stream").value_or(false);
  cost.bytes = static_cast<double>(cost.collective.bytes);
  cost.kernels = cost.collective.bytes > 0 ? 1 : 0;
  return cost;
}

// The tracer's record of a copy between host memory and the GPU (docs/trace-format.md);
// nullopt for every other op.
std::optional<OpCost> hostTransfer(const OpRecord& op) {
  std::optional<TransferDirection> direction;
  if (op.name == kHostToDeviceOp)
    direction = TransferDirection::ToDevice;
  else if (op.name == kDeviceToHostOp)
    direction = TransferDirection::ToHost;
  if (!direction)
    return std::nullopt;
  OpCost cost;
  cost.family = CostFamily::HostTransfer;
  cost.transfer.direction = *direction;
  cost.bytes = static_cast<double>(std::max<int64_t>(0, op.intArg("bytes").value_or(0)));
  cost.transfer.pageable = !op.boolArg("pinned").value_or(false);
  cost.transfer.blocking = !op.boolArg("non_blocking").value_or(false);
  cost.transfer.sideStream = op.boolArg("side_stream").value_or(false);
  if (cost.transfer.pageable)
    cost.transfer.stagingMs = std::max(0.0, op.floatArg("staging_ms").value_or(0.0));
  return cost;
}

} // namespace

OpCost estimateOpCost(const OpRecord& op) {
  const std::string stem = stemOf(op.name);
  bool inplace = false;
  const std::string base = withoutInplaceSuffix(stem, inplace);

  OpCost cost;
  if (auto comm = collective(op)) {
    cost = std::move(*comm);
  } else if (auto transfer = hostTransfer(op)) {
    cost = std::move(*transfer);
  } else if (op.name == kSynchronizeOp) {
    cost.family = CostFamily::Metadata;
    cost.kernels = 0;
    cost.note = CostNote::WaitsForGpu;
  } else if (metadataOps().count(stem) || metadataOps().count(base)) {
    cost.family = CostFamily::Metadata;
    cost.kernels = 0;
    cost.note = CostNote::ViewOrAllocation;
  } else {
    bool known = false;
    cost = exactFamily(op, base, inplace, known);
    if (!known)
      cost = closestFamily(op, base, inplace);
    if (op.phase == Phase::Optimizer && cost.family == CostFamily::Elementwise)
      cost.family = CostFamily::Optimizer;
  }
  cost.dtype = computeDtype(op);

  // Shapes the profiler should never emit; predict as empty, flag, and say so.
  for (const auto* list : {&op.inputs, &op.outputs})
    for (const auto& t : *list)
      if (t && std::any_of(t->shape.begin(), t->shape.end(), [](int64_t d) { return d < 0; })) {
        cost.approximate = true;
        cost.note = CostNote::NegativeDimension;
      }
  if (op.onHost && !cost.metadataOnly()) {
    cost.kernels = 0;
    cost.note = CostNote::OnHost;
    cost.approximate = false; // no GPU work: no GPU formula is missing
  }
  if (!cost.metadataOnly() && cost.bytes <= 0 && cost.flops <= 0 &&
      cost.family != CostFamily::Collective) {
    cost.kernels = 0; // PyTorch launches nothing for empty tensors
    if (cost.note == CostNote::None)
      cost.note = CostNote::EmptyTensors;
  }
  return cost;
}

bool groupedGemmLoops(const OpCost& cost, const DeviceSpec& gpu) {
  if (cost.grouped.groups == 0)
    return false;
  const bool groupedKernel = gpu.vendor == GpuVendor::Nvidia &&
                             (gpu.computeCapabilityMajor == 9 || gpu.computeCapabilityMajor == 10);
  return !(cost.grouped.groupedKernel && groupedKernel);
}

bool runsOnCudnn(const OpCost& cost) {
  return cost.family == CostFamily::Conv || cost.family == CostFamily::Rnn;
}

bool runsInTf32(const OpCost& cost, const FloatPrecision& precision) {
  if (cost.unit != ComputeUnit::Matrix || cost.dtype != ScalarType::Float32)
    return false;
  return runsOnCudnn(cost) ? precision.cudnnTf32 : precision.matmulTf32;
}

std::string mathPrecision(const OpCost& cost) {
  return cost.tf32 ? "tf32" : toString(cost.dtype);
}

} // namespace wavecast
