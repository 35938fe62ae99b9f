// What the predictor produces for one trace on a set of GPUs.
#pragma once

#include "wavecast/predictor/collective_kind.h"
#include "wavecast/predictor/cost_family.h"
#include "wavecast/trace.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace wavecast {

// How an op's time on a GPU was obtained; Measured: its kernels' times on this very GPU;
// Calibrated: its shape (or a near one) measured on this GPU by `wavecast calibrate`;
// Collective: NCCL's model on the GPU's system (docs/collectives.md).
enum class PredictionMethod {
  Roofline,
  WaveScaling,
  Learned,
  Fallback,
  Measured,
  Calibrated,
  Collective
};
inline constexpr size_t kPredictionMethodCount =
    static_cast<size_t>(PredictionMethod::Collective) + 1;

// How one GPU's op times were obtained: the methods that timed them and, for a measured
// trace, the GPU it was measured on (presentation.h writes this as "scaled from H100-SXM").
struct GpuMethods {
  std::array<bool, kPredictionMethodCount> used{}; // indexed by PredictionMethod
  std::string origin;                              // the measured GPU; empty: a shape trace
  std::string calibratedOn; // the GPU of the calibration file used, as torch names it
  bool uses(PredictionMethod method) const { return used[static_cast<size_t>(method)]; }
};
constexpr const char* toString(PredictionMethod method) {
  switch (method) {
  case PredictionMethod::Roofline:
    return "roofline";
  case PredictionMethod::WaveScaling:
    return "wave_scaling";
  case PredictionMethod::Learned:
    return "learned";
  case PredictionMethod::Fallback:
    return "fallback";
  case PredictionMethod::Measured:
    return "measured";
  case PredictionMethod::Calibrated:
    return "calibrated";
  case PredictionMethod::Collective:
    return "collective_model";
  }
  return "unknown";
}

struct OpPrediction {
  int64_t opId = 0;
  CostFamily family = CostFamily::Elementwise;
  PredictionMethod method = PredictionMethod::Roofline;
  double timeMs = 0;       // GPU time on the GPU of the enclosing vector index
  double wallMs = 0;       // how much the op moved the iteration's end (host model)
  double gpuIdleMs = 0;    // the GPU waiting for the CPU to launch this op's kernels
  double commHiddenMs = 0; // a collective (timeMs on NCCL's stream): the part compute hid
  double flops = 0;
  double bytes = 0;
  bool approximate = false; // no formula for this op: predicted by its closest family
};

// Per source line, per GPU: the wall time of its forward ops, of the backward ops
// credited to it and of its optimizer ops (they sum to the iteration's wall time), and
// what part of that the GPU computes or waits for the CPU.
// A span's collectives of one kind issued in one phase: their time on NCCL's stream and
// the part compute hid (docs/collectives.md, "Overlap with compute").
struct CommunicationPart {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Phase phase = Phase::Forward;
  double ms = 0;
  double hiddenMs = 0;
};

struct LineTimes {
  double forwardMs = 0;
  double backwardMs = 0;
  double optimizerMs = 0;
  double inputMs =
      0; // the loop waiting for its batch (before forward): a DataLoader's work not hidden
  double shareOfIteration = 0; // 0..1
  double gpuMs = 0;            // kernel time of the same ops
  double gpuIdleMs = 0;        // the GPU waiting for the CPU to launch them
  double commMs = 0;           // collectives' time on NCCL's stream (not in gpuMs)
  double commHiddenMs = 0;     // the part of commMs hidden behind compute or the host
  std::vector<CommunicationPart> communication{}; // commMs by kind and phase, first-seen order
  bool hostBound = false; // the GPU idles for most of this span (HostOptions::hostBoundIdleShare)
  double totalMs() const { return inputMs + forwardMs + backwardMs + optimizerMs; }
};

// What the trace says of an op, once per op (not per GPU).
struct OpInfo {
  int64_t id = 0;
  std::string name;
  Phase phase = Phase::Forward;
  SourceLocation loc;
  std::string module;
  CostNote note = CostNote::None; // why approximate / zero
  double hostMs = 0;              // CPU time issuing it (host model; the same on every GPU)
};

struct LineBreakdown {
  SourceLocation loc;
  std::vector<LineTimes> perGpu;    // same order as Prediction::gpus
  std::vector<std::string> opNames; // distinct forward op names on this line, in order
  int opCount = 0;
  // Bytes the line's forward ops keep alive for backward (MemoryEstimate::activationsSource).
  int64_t activationBytes = 0;
};

// Per nn.Module path (ops outside any module: empty path), per GPU.
struct ModuleBreakdown {
  std::string module;
  std::vector<LineTimes> perGpu; // same order as Prediction::gpus
  int opCount = 0;
};

// Where the activation figures come from.
enum class ActivationsSource {
  Traced,    // the tracer followed every tensor: saved-for-backward and peak live bytes
  UpperBound // older trace: every fresh forward output counts as kept for backward
};
constexpr const char* toString(ActivationsSource source) {
  switch (source) {
  case ActivationsSource::Traced:
    return "traced";
  case ActivationsSource::UpperBound:
    return "upper_bound";
  }
  return "unknown";
}

// Peak memory as PyTorch's caching allocator sees it, three nested figures:
// allocated (torch.cuda.max_memory_allocated: live tensors, the cuBLAS workspace the
// allocator hands out, and what one op's workspace adds while it runs) <= reserved
// (max_memory_reserved: plus the blocks' rounding and the largest workspace's segment,
// kept cached once freed) <= process (plus the CUDA context, which nvidia-smi shows and
// the card must hold).
struct MemoryEstimate {
  int64_t weightsBytes = 0;
  int64_t gradientsBytes = 0;
  int64_t optimizerStateBytes = 0;
  // Everything else live at the peak: activations kept for backward, temporaries, the batch.
  int64_t activationsBytes = 0;
  int64_t cublasWorkspaceBytes = 0; // one per thread running GEMMs, kept from its first GEMM on
  // What an op's own workspace (cuDNN's, an op's temporaries) adds to the tensors' peak:
  // the most that live tensors plus one op's workspace exceed it by.
  int64_t transientBytes = 0;
  int64_t cachedBytes = 0;  // reserved, not allocated: rounding, the largest workspace
  int64_t contextBytes = 0; // the CUDA context, outside the allocator
  ActivationsSource activationsSource = ActivationsSource::UpperBound;
  int64_t activationsSavedBytes = 0; // kept by autograd for backward (part of activationsBytes)
  std::optional<Phase> peakPhase;    // where the tensors peak (traced only)
  std::optional<int64_t> peakOpId;
  int64_t tensorBytes() const {
    return weightsBytes + gradientsBytes + optimizerStateBytes + activationsBytes;
  }
  int64_t allocatedPeakBytes() const {
    return tensorBytes() + cublasWorkspaceBytes + transientBytes;
  }
  int64_t reservedPeakBytes() const { return allocatedPeakBytes() + cachedBytes; }
  int64_t processPeakBytes() const { return reservedPeakBytes() + contextBytes; }
  // Everything beyond the tensors: workspaces, allocator slack, context.
  int64_t workspaceBytes() const { return processPeakBytes() - tensorBytes(); }
  // What the card must hold; the out-of-memory verdict compares it with the card's memory.
  int64_t peakBytes() const { return processPeakBytes(); }
};

struct GpuSummary {
  std::string gpuId;
  std::string gpuName;
  GpuMethods methods;     // how this GPU's times were obtained
  double iterationMs = 0; // wall time: input + forward + backward + optimizer
  double inputMs = 0;     // the loop waiting for its batches (LineTimes::inputMs)
  double forwardMs = 0;   // wall time per phase
  double backwardMs = 0;
  double optimizerMs = 0;
  double gpuMs = 0;        // kernel time (the GPU busy)
  double hostMs = 0;       // CPU time issuing the iteration
  double gpuIdleMs = 0;    // wall time with no kernel running
  double commMs = 0;       // collectives' time on NCCL's stream
  double commHiddenMs = 0; // the part of it hidden behind compute or the host
  bool hostBound = false;  // the GPU idles for most of the iteration
  double samplesPerSecond = 0;
  double costPer1kSamplesUsd = 0;
  double pricePerHourUsd = 0;
  MemoryEstimate memory;
  int64_t memoryCapacityBytes = 0;
  bool fitsInMemory = true;
};

// The arithmetic one family of matrix work runs in ("tf32", "bfloat16", ...):
// what the script's precision settings and autocast made of it.
struct FamilyPrecision {
  CostFamily family = CostFamily::Gemm; // conv, gemm, attention, rnn
  std::string precision;                // the precision of most of the family's FLOPs
};

// What the predictor wants the user to know, as facts (docs/results-json.md
// "advisories"); the sentences are written at the edge (server/src/presentation.cpp).
namespace advisory {
// A trace measured on a GPU without kernels (an older wavecast): the analytic model ran.
struct MeasuredWithoutKernels {};
// Measured on `device`, which the GPU database does not know: the analytic model ran.
struct UnknownMeasuredGpu {
  std::string device;
};
// Learned models predicted these GPUs without ever having been trained on them.
struct UntrainedGpus {
  std::vector<std::string> gpus;
};
// `kernel` cannot launch on `gpu` as recorded (`problem`): one block per SM was assumed.
struct WaveScalingAssumption {
  std::string gpu;
  std::string kernel;
  LaunchProblem problem;
  int count = 0;
};
// `gpu` (compute capability `computeCapability`) has no `traced` kernel: `count`
// attention ops are priced as `runs`, which torch runs there instead.
struct AttentionSubstituted {
  std::string gpu;
  std::string computeCapability;
  AttentionBackend traced = AttentionBackend::None;
  AttentionBackend runs = AttentionBackend::None;
  int count = 0;
};
// `count` calls of `op` have no formula of their own: priced as their closest `family`.
struct ApproximateOp {
  std::string op;
  CostFamily family = CostFamily::Elementwise;
  int count = 0;
  CostNote note = CostNote::NoFormula; // why it is approximate
};
// `gpu` waits for the CPU for most of an iteration.
struct HostBound {
  std::string gpu;
  double gpuIdleMs = 0;
  double iterationMs = 0;
  double gpuMs = 0;
  // The torch.compile mode the iteration's compiled code runs in: its advice is not to
  // compile it.
  std::optional<CompileMode> compiled{};
};
// On `gpu` the loop waits `waitMs` of each `iterationMs` for its DataLoader's `workers`
// worker processes, which take `loaderMs` to make the iteration's batches (their time on
// the CPU that traced the script, over their number).
struct InputBound {
  std::string gpu;
  // workers 0: the loop makes its batches itself, `waitMs` (= loaderMs) of each iteration
  double waitMs = 0;
  double iterationMs = 0;
  double loaderMs = 0;
  int workers = 0;
};
// On `gpu`, `count` copies of host tensors to the GPU (`bytes` in all) hold the CPU until
// they are done, from pageable memory (`pageable`: any of them) or with non_blocking=False,
// and add `copyMs` to each `iterationMs`.
struct HeldByCopies {
  std::string gpu;
  double copyMs = 0;
  double iterationMs = 0;
  int64_t bytes = 0;
  int count = 0;
  bool pageable = false;
};
// The iteration's predicted peak memory exceeds `gpu`'s.
struct OutOfMemory {
  std::string gpu;
  int64_t peakBytes = 0;
  int64_t capacityBytes = 0;
  bool activationsUpperBound = false; // an older trace: activations are an upper bound
};
// A layout with tensor parallelism `tensorParallel` leaves the `count` grouped GEMMs of a
// mixture of experts whole on every rank: each rank holds and runs every expert.
struct ReplicatedExperts {
  int tensorParallel = 1;
  int count = 0;
};
// What torch.compile changes on `gpu`: the iteration as predicted (its compiled ops as
// Inductor runs them) against the same ops run eagerly.
struct CompiledAgainstEager {
  std::string gpu;
  double compiledMs = 0;
  double eagerMs = 0;
  int64_t compiledPeakBytes = 0; // allocated
  int64_t eagerPeakBytes = 0;
};
} // namespace advisory

// In the variant's order.
enum class AdvisoryKind {
  MeasuredWithoutKernels,
  UnknownMeasuredGpu,
  UntrainedGpus,
  WaveScalingAssumption,
  AttentionSubstituted,
  ApproximateOp,
  HostBound,
  InputBound,
  HeldByCopies,
  OutOfMemory,
  ReplicatedExperts,
  CompiledAgainstEager,
};
constexpr const char* toString(AdvisoryKind kind) {
  switch (kind) {
  case AdvisoryKind::MeasuredWithoutKernels:
    return "measured_without_kernels";
  case AdvisoryKind::UnknownMeasuredGpu:
    return "unknown_measured_gpu";
  case AdvisoryKind::UntrainedGpus:
    return "untrained_gpus";
  case AdvisoryKind::WaveScalingAssumption:
    return "wave_scaling_assumption";
  case AdvisoryKind::AttentionSubstituted:
    return "attention_substituted";
  case AdvisoryKind::ApproximateOp:
    return "approximate_op";
  case AdvisoryKind::HostBound:
    return "host_bound";
  case AdvisoryKind::InputBound:
    return "input_bound";
  case AdvisoryKind::HeldByCopies:
    return "held_by_copies";
  case AdvisoryKind::OutOfMemory:
    return "out_of_memory";
  case AdvisoryKind::ReplicatedExperts:
    return "replicated_experts";
  case AdvisoryKind::CompiledAgainstEager:
    return "compiled_against_eager";
  }
  return "unknown";
}

struct Advisory {
  std::variant<advisory::MeasuredWithoutKernels, advisory::UnknownMeasuredGpu,
               advisory::UntrainedGpus, advisory::WaveScalingAssumption,
               advisory::AttentionSubstituted, advisory::ApproximateOp, advisory::HostBound,
               advisory::InputBound, advisory::HeldByCopies, advisory::OutOfMemory,
               advisory::ReplicatedExperts, advisory::CompiledAgainstEager>
      facts;
  AdvisoryKind kind() const { return static_cast<AdvisoryKind>(facts.index()); }
  // Out of memory, host- and input-bound change what the user should do; the rest say how the
  // figures were obtained.
  Severity severity() const {
    return kind() == AdvisoryKind::OutOfMemory || kind() == AdvisoryKind::HostBound ||
                   kind() == AdvisoryKind::InputBound || kind() == AdvisoryKind::HeldByCopies ||
                   kind() == AdvisoryKind::UnknownMeasuredGpu ||
                   kind() == AdvisoryKind::MeasuredWithoutKernels
               ? Severity::Warning
               : Severity::Info;
  }
  // The facts as `Facts`, or null.
  template <class Facts> const Facts* as() const { return std::get_if<Facts>(&facts); }
};

struct Prediction {
  // The learned per-op model's name when it timed any op; with each summary's methods it
  // says how the prediction was made (presentation.h).
  std::string learnedModel;
  std::vector<FamilyPrecision> precisions; // matrix families, by FLOPs (largest first)
  // The most experts a mixture-of-experts layer routes tokens to (a grouped GEMM's offsets;
  // 0: none): what expert parallelism can split.
  int64_t routedExperts = 0;
  int64_t batchSize = 0;
  int64_t samplesPerIteration = 0;   // batchSize x the batches one optimizer step trains on
  std::vector<std::string> gpus;     // ids, in the order the caller asked
  std::vector<GpuSummary> summaries; // same order as gpus
  std::vector<LineBreakdown> lines;  // sorted by file, line
  std::vector<std::vector<OpPrediction>> ops; // [gpu][op index in trace]
  std::vector<OpInfo> opInfo;                 // [op index in trace]
  std::vector<ModuleBreakdown> modules;       // sorted by module path
  std::vector<Advisory> advisories;
};

} // namespace wavecast
