// Turns a prediction into what editors display: inlay-hint labels, hover
// markdown, code-lens titles and diagnostics. Pure functions, no LSP state.
#pragma once

#include "wavecast/predictor/prediction.h"
#include "wavecast/profiler/profiler.h"

#include <map>
#include <string>
#include <vector>

namespace wavecast::lsp {

// "0.42ms", "12.3ms", "1.25s": short enough for the end of a line.
std::string formatMs(double ms);
std::string formatBytes(int64_t bytes); // "5.1 GiB"
std::string formatUsd(double usd);      // "$0.031"

// "H100-SXM 1.2ms · A100-80GB 2.0ms · T4 9.8ms (12%)": per-GPU line totals and
// the line's share of the first GPU's iteration.
std::string lineLabel(const Prediction& prediction, const LineBreakdown& line);
// Markdown: a per-GPU forward/backward/total/share table and the line's ops.
std::string lineHover(const Prediction& prediction, const LineBreakdown& line);
// "H100-SXM: 12.3 ms/iter · 2,600 samples/s · $0.012/1k samples"
std::string summaryTitle(const GpuSummary& summary);
// "batch 32 · peak memory 5.1 GiB · fits on all targets" or which GPUs it does not fit.
std::string memoryTitle(const Prediction& prediction);
// One message per GPU the prediction does not fit; empty when it fits everywhere.
std::string outOfMemoryMessage(const Prediction& prediction);
// "file:line: message" + hint, for an error diagnostic.
std::string errorMessage(const ProfileError& error);

} // namespace wavecast::lsp
