// Turns a prediction into the text people read: numbers, line labels, hover
// markdown, code-lens titles and diagnostics, as docs/presentation.md says
// (the VS Code extension's presentation.ts follows the same page). Pure
// functions; the daemon and the CLI format only through these.
#pragma once

#include "wavecast/predictor/parallel_config.h"
#include "wavecast/predictor/prediction.h"
#include "wavecast/profiler/trace_job.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wavecast {

// `value` with `decimals` decimals, an exact tie rounded away from zero.
std::string formatFixed(double value, int decimals);
std::string formatMs(double ms);       // "0.042 ms", "4.21 ms", "2.57 s"
std::string formatShare(double share); // 0.3464 -> "35%"
std::string formatBytes(double bytes); // "5.1 GiB"
std::string formatUsd(double usd);     // "$0.012"
std::string formatCount(double count); // "3,200"

// `parts` with `separator` between them.
std::string joinedWith(const std::vector<std::string>& parts, const char* separator);
// What to do about a GPU that waits for the CPU (hover and advisory alike), less what the
// script already does: compiled, with or without CUDA graphs.
std::string hostBoundAdvice(std::optional<CompileMode> compiled = std::nullopt);

// The line's largest share of the iteration over the target GPUs.
double lineShare(const LineBreakdown& line);
// Modules with their repeated blocks summed: "encoder.layer.*.attention" holds every
// encoder.layer.N.attention (`modules` of them); "" the ops outside any module (the loss,
// the optimizer, the loop's own). Largest first on the first GPU.
struct ModuleGroup {
  std::string pattern;
  int modules = 0;
  std::vector<double> totalMs; // per GPU
  std::vector<double> share;   // of each GPU's iteration
  // Its largest share over the GPUs, as a line's (lineShare).
  double largestShare() const {
    return share.empty() ? 0.0 : *std::max_element(share.begin(), share.end());
  }
};
std::vector<ModuleGroup> modulesOverRepeats(const Prediction& prediction);
// "bert.encoder.layer.*.attention (12)", "(outside any module: loss, optimizer, loop)".
std::string moduleGroupName(const ModuleGroup& group);
// The line that holds 80% of the iteration or more (a Trainer's `trainer.train()`), when its
// modules tell more than it does (two groups or more); else null. The CLI's modules table
// and that line's hover show them.
const LineBreakdown* lineHoldingIteration(const Prediction& prediction);
// How many module groups the CLI's table and the hover show, largest first.
inline constexpr size_t kModuleGroupsShown = 10;

// "H100-SXM 1.50 ms · T4 12.0 ms (15%)": per-GPU line totals and the line's share.
std::string lineLabel(const Prediction& prediction, const LineBreakdown& line);
// Markdown: the per-GPU table, the host-bound GPUs, the line's ops and the method.
std::string lineHover(const Prediction& prediction, const LineBreakdown& line);
// "H100-SXM: 12.3 ms/iter · 2,600 samples/s · $0.012/1k samples"
std::string summaryTitle(const GpuSummary& summary);
// "batch 32 · peak memory 5.1 GiB · fits on all targets" or which GPUs it does not fit.
std::string memoryTitle(const Prediction& prediction);
// One GPU's method: "measured on H100-SXM", "scaled from H100-SXM", or the models that
// predicted it from shapes ("learned per-op model + analytic roofline").
std::string gpuMethodText(const GpuMethods& methods);
// The whole prediction's: the models used, and for a measured trace which GPU was
// measured and which were scaled from it ("H100-SXM: measured on H100-SXM; T4: ...").
std::string predictionMethodText(const Prediction& prediction);
// Why a calibration file is not used: its GPU is not in the GPU database.
std::string calibrationUnknownGpuNote(const std::string& file, const std::string& gpuName);
// The sentence of an op's cost note, e.g. "no formula for aten::frobnicate; predicted as
// its closest family (elementwise) from its tensors"; empty for CostNote::None.
std::string costNoteText(CostNote note, const std::string& op, CostFamily family);
// "flash attention", "the math decomposition of attention (...)".
std::string attentionBackendName(AttentionBackend backend);
// The sentence of a predictor advisory, e.g. "T4: host-bound: the GPU waits for ...".
std::string advisoryMessage(const Advisory& advisory);
// The sentence of a trace warning, without its location (diagnostics carry that).
std::string traceWarningMessage(const TraceWarning& warning);
// "FILE:LINE: " + the sentence, or the sentence alone for the whole script.
std::string traceWarningLine(const TraceWarning& warning);
// The message, then the hint on a line of its own, for an error diagnostic. A script that
// exited or stopped early adds what it last printed.
std::string errorMessage(const ProfileError& error);
// "torch 2.11.0+cu130 (/home/me/venv)", "torch 1.13.1 (the system python3's packages)".
std::string tracedWith(const std::string& torchVersion, const std::string& pythonEnv);
// "2026-11-26 21:05" in this machine's time zone.
std::string localTime(std::chrono::system_clock::time_point when);
// "file:line: message (hint)" on one line, for a terminal; "; it printed: ..." as above.
std::string errorLine(const ProfileError& error);

// "batch size 12", or with gradient accumulated over batches "batch size 12, 60 samples per
// optimizer step".
std::string batchText(const Prediction& prediction);
// A layout in words: "8x H100-SXM, FSDP, tp 2, pp 2 (8 microbatches, 1F1B)".
std::string parallelConfigLabel(const ParallelConfig& config, const std::string& gpu);
// Why a target's words ("8x H100-SXM, FSPD") cannot be read, and how to write them.
std::string targetTextProblemMessage(const std::string& text, const TargetTextProblem& problem);
// The one sentence saying why a layout cannot run and what to change.
std::string layoutProblemMessage(const LayoutProblem& problem);
// "communication 3.10 ms, 2.40 ms of it hidden behind compute".
std::string communicationText(double ms, double hiddenMs);
// How a layout's microbatches were priced: "microbatches of 4 priced at their own shapes",
// "each microbatch priced as 1/4 of the batch's ops"; empty with one microbatch.
std::string microbatchPricingText(const ParallelSummary& summary);
// "all-reduce", "reduce-scatter", "send/receive".
std::string collectiveName(CollectiveKind kind);
// "all-reduce 3.10 ms, 2.40 ms of it hidden behind backward".
std::string communicationPartText(const CommunicationPart& part);
// A line's collectives, kind by kind: "all-gather 0.41 ms, none of it hidden; reduce-scatter
// 0.40 ms, 0.38 ms of it hidden behind backward".
std::string lineCommunicationText(const LineTimes& times);
// A hover's bullet for a line on one rank of a layout: its time and its collectives.
std::string layoutLineText(const ParallelConfig& config, const std::string& gpu,
                           const LineTimes& times);
// The hover's section of those bullets; empty without any.
std::string layoutsHoverSection(const std::string& bullets);

} // namespace wavecast
