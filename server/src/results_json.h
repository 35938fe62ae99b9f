// The results JSON (docs/results-json.md): one encoder for `wavecast predict --json` and
// the daemon's wavecast/results, facts with the sentences presentation.h writes for them.
#pragma once

#include "wavecast/predictor/parallel_config.h"
#include "wavecast/predictor/prediction.h"
#include "wavecast/trace.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace wavecast {

// What the results say of the trace behind a prediction.
struct TraceFacts {
  std::string entryFile;
  TraceMode mode = TraceMode::Shape;
  std::string torchVersion;
  std::string pythonEnv; // a venv's folder, or "system"
  std::vector<std::string> fallbackOps;
  std::vector<TraceWarning> warnings;
};
inline TraceFacts traceFacts(const Trace& trace) {
  return {trace.entryFile, trace.mode,        trace.torchVersion,
          trace.pythonEnv, trace.fallbackOps, trace.warnings};
}

// Which optional parts a results JSON carries. Per-op detail is most of a large model's
// results (10,000 ops on 20 GPUs: 200,000 per-GPU entries); without it `ops` is empty.
struct ResultsParts {
  bool ops = true;
};

// The results JSON's text, written straight into a string (no JSON tree: for a large model
// the tree cost several times as much to build, dump and free). `parallel`: the multi-GPU
// layouts predicted (`parallel` in the JSON), empty for one GPU; `refusals`: those asked
// for that the model cannot run (`parallel_refusals`).
std::string resultsJsonText(const Prediction& prediction, const TraceFacts& trace,
                            const std::vector<ParallelSummary>& parallel = {},
                            const std::vector<ParallelRefusal>& refusals = {},
                            ResultsParts parts = {});
// The same document as a JSON value, for callers that read or re-indent it.
nlohmann::json resultsJson(const Prediction& prediction, const TraceFacts& trace,
                           const std::vector<ParallelSummary>& parallel = {},
                           const std::vector<ParallelRefusal>& refusals = {});
// Its `summaries` alone: one object per GPU (the wavecast/resultsChanged notification's).
nlohmann::json summariesJson(const Prediction& prediction);

} // namespace wavecast
