// Multi-GPU what-if from a single-GPU trace (docs/parallel.md): find the model's repeated
// blocks, Linear pairs and parameters; turn the trace into the one a rank of a layout would
// record (sharded compute, `wavecast::` collective ops in the agreed format,
// docs/trace-format.md); price it with the ordinary predictor; schedule pipeline stages
// over microbatches on top.
#pragma once

#include "wavecast/predictor/parallel_config.h"
#include "wavecast/predictor/predictor.h"
#include "wavecast/predictor/system_spec.h"
#include "wavecast/trace.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace wavecast {

// ---- Parsing: one parser for every way a layout is written ------------------------------

// A target written as words: "8xH100-SXM fsdp tp2", "dp4 tp2 pp2 mb8 zero1 sp gpipe".
// Words: NxGPU (GPU count and GPU), dpN, tpN, ppN, epN, mbN, zero1|zero2|zero3|fsdp, sp,
// recompute, gpipe|1f1b, bucketN (MiB). A count without dp gives dp = count / (tp x pp).
struct ParallelTarget {
  std::string gpu;  // empty: not given
  int gpuCount = 0; // 0: not given
  ParallelConfig config;
};
std::variant<ParallelTarget, TargetTextProblem> parseParallelTarget(std::string_view text);
// The canonical words of a layout ("dp8 tp2 pp1 mb1 zero3 1f1b"), which parse back to it.
std::string parallelConfigText(const ParallelConfig& config);

// ---- What the trace says of the model ---------------------------------------------------

enum class LinearRole { Replicated, Column, Row };

// One nn.Linear (or HF Conv1D) call in forward.
struct LinearCall {
  size_t op = 0; // index in trace.ops of its GEMM
  std::string module;
  int64_t in = 0;  // K
  int64_t out = 0; // N
  int block = -1;
  LinearRole role = LinearRole::Replicated;
  int group = -1; // the column/row pair it belongs to
};

// A column-parallel group and the row-parallel Linear that closes it.
struct TensorParallelGroup {
  int block = -1;
  std::vector<size_t> columns; // LinearCall indices
  size_t row = 0;
  size_t firstOp = 0; // trace.ops index of the first column GEMM
  size_t rowOp = 0;   // of the row GEMM
};

struct ParameterInfo {
  int64_t numel = 0;
  int64_t bytes = 0;
  std::vector<int64_t> shape;
  int block = -1;                   // -1: outside the repeated blocks
  std::optional<size_t> gradientOp; // the backward op that produces its gradient
  bool tensorParallel = false;      // split by tp (column/row weights, vocabulary rows)
  bool expert = false;              // split by ep: [experts, ...] of a grouped GEMM
};

// A mixture-of-experts layer whose experts run as grouped GEMMs (torch._grouped_mm,
// transformers' fallback loop): what expert parallelism splits, and where its token
// all-to-alls go (before the first grouped GEMM and after the last, and mirrored in
// backward).
struct ExpertLayer {
  int64_t experts = 0;                      // the groups: the offsets' length
  size_t firstForward = 0, lastForward = 0; // trace.ops of its first and last grouped GEMM
  std::optional<size_t> firstBackward, lastBackward;
  // The routed tokens the experts receive (the first grouped GEMM's 2-D operand) and give
  // back (the last one's output).
  int64_t dispatchBytes = 0, combineBytes = 0;
};

struct RepeatedBlock {
  std::string path;                         // "blocks.3"
  size_t firstForward = 0, lastForward = 0; // trace.ops indices
  std::optional<size_t> firstBackward, lastBackward;
};

struct ModelStructure {
  int64_t batch = 0;
  int64_t hidden = 0;
  int heads = 0;
  int64_t sequence = 0; // 0: no sequence dimension found
  int64_t vocab = 0;    // rows of the largest embedding; 0: none
  std::vector<RepeatedBlock> blocks;
  bool recomputesBlocks = false; // the script reruns its blocks' forward in backward already
  std::vector<int> opBlock;      // [op]: its block, -1 outside
  std::vector<size_t> opForward; // [op]: the forward op it differentiates (itself in forward)
  std::vector<int> opLinear;     // [op]: the Linear call it is or differentiates, -1 none
  std::vector<LinearCall> linears;
  std::vector<TensorParallelGroup> groups;
  std::optional<size_t> embeddingOp;     // the vocabulary embedding's forward op
  std::optional<size_t> headOp;          // the output Linear onto the vocabulary
  std::vector<ParameterInfo> parameters; // registration order (the optimizer's lists)
  std::vector<ExpertLayer> expertLayers;
  std::vector<int> opExpertLayer; // [op]: the expert layer of a grouped GEMM (or its gradient)
  int64_t tracedParameterBytes = 0;      // the trace's figure, used when no list was found
  // The dtype its matrices compute in: the script's CUDA autocast dtype, else the
  // parameters'.
  ScalarType computeDtype = ScalarType::Float32;
  int64_t parameterBytes() const;
};

ModelStructure analyzeModel(const Trace& trace);

// ---- Layout problems --------------------------------------------------------------------

// The first reason `config` cannot run the model on `system` with `batchPerReplica`.
std::optional<LayoutProblem> validateLayout(const ParallelConfig& config,
                                            const ModelStructure& model, int64_t batchPerReplica,
                                            const SystemSpec& system);

// ---- The rank's trace -------------------------------------------------------------------

// How the transform split the model: for tests and the per-stage pricing.
struct RankTrace {
  Trace trace;                       // the ops one rank runs (every block: stages split it later)
  std::vector<int> opBlock;          // [op of trace]: its repeated block, -1 outside
  std::vector<size_t> opOrigin;      // [op of trace]: the single-GPU op it is or sits beside
  int64_t parameterBytesPerRank = 0; // after tp (and zero3: of its own shard)
  // With recomputation: [block] what its recomputed forward saves for its backward, live
  // only while that backward runs (the rank's forward ops keep only each recomputed block's
  // input); 0 for a block that is not recomputed.
  std::vector<int64_t> recomputedSavedBytes;
  // Under the per-op policy: [block] the outputs its forward keeps of the ops not run again,
  // freed once that block's backward is done.
  std::vector<int64_t> recomputeKeptBytes;
};

// The trace one rank of `config` records for the whole model (tensor parallelism, data
// parallel gradient collectives, ZeRO/FSDP gathers, recomputed blocks) on nodes of
// `gpusPerNode`. Pipeline stages are cut from it.
RankTrace transformForRank(const Trace& trace, const ModelStructure& model,
                           const ParallelConfig& config, int gpusPerNode = 8);

// Contiguous blocks per stage: [stage] -> first block; balanced so the slowest stage is as
// fast as it can be for `blockMs` (each block's time; `headMs`/`tailMs` go to the first and
// last stage).
std::vector<int> balanceStages(const std::vector<double>& blockMs, double headMs, double tailMs,
                               int stages);

// The pipeline's iteration for per-microbatch stage times (forward + backward) over m
// microbatches: sum of the stages + (m - 1) x the slowest; its bubble is the time each
// stage waits.
struct PipelineTime {
  double ms = 0;
  double bubbleFraction = 0; // the first stage's idle share of `ms`
};
PipelineTime pipelineTime(const std::vector<double>& stageMs, int microbatches);

// ---- Prediction -------------------------------------------------------------------------

struct ParallelPrediction {
  ParallelSummary summary;
  Prediction rank; // per line and op: one rank of the first stage
};

// Everything for one layout on one GPU and system; `problem` set instead when it cannot run.
// The rank's collectives are priced on `system` (whatever `options.systems` says of `gpu`).
struct ParallelOutcome {
  std::optional<LayoutProblem> problem;
  std::optional<ParallelPrediction> prediction;
};
// The batch at which to trace the script again so that predictParallel prices each of
// `config`'s microbatches at its own shapes (trace.batchSize / microbatches); nullopt where
// there is one microbatch, where the batch is not the script's providers' to set (a script
// run as written, a torch.distributed one) or where it does not split evenly.
std::optional<int64_t> microbatchBatchSize(const Trace& trace, const ParallelConfig& config);

// `microbatchTrace`: the same script traced at one microbatch's batch (trace.batchSize /
// config.microbatches); where it traced the same ops, each microbatch's ops are priced at
// its shapes (a quarter-batch GEMM is not a quarter of the whole one's time). Without it,
// or where the ops differ, each microbatch runs the whole batch's ops at 1/m of their work.
ParallelOutcome predictParallel(const Trace& trace, const ModelStructure& model,
                                const ParallelConfig& config, const DeviceSpec& gpu,
                                const SystemSpec& system, PredictorOptions options,
                                const Trace* microbatchTrace = nullptr);

} // namespace wavecast
