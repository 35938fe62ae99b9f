// One finished analysis, its lines indexed per file: hovers, hints and lenses
// look lines up on every request, the cache and several documents share it.
#pragma once

#include "lsp/analyzer.h"
#include "results_json.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace wavecast::lsp {

struct IndexedResult {
  AnalysisOutput output;
  std::map<std::string, std::map<int, size_t>> linesByFile; // canonical path -> line -> index
  // canonical path -> the trace's warnings about its lines
  std::map<std::string, std::vector<TraceWarning>> warningsByFile;
  std::map<std::string, std::string> analysedText; // path -> the text those lines number
  uint64_t sequence = 0;                           // completion order, to prefer the newest result

  // The results JSON's text (resultsJsonText), with or without the per-op detail, each
  // written the first time a client asks for it and then kept: for a large model it takes
  // tens of milliseconds that a save's notification, hints and lenses do not need.
  // Thread-safe.
  std::shared_ptr<const std::string> resultsJson(ResultsParts parts = {}) const;

private:
  struct CachedText {
    std::once_flag written;
    std::shared_ptr<const std::string> text;
  };
  mutable CachedText withOps_;
  mutable CachedText withoutOps_;
};

// Indexes `output`'s lines and line warnings by canonical file and makes its source files
// canonical; `analysedText` is left for the caller, who knows which texts the
// analysis read.
std::shared_ptr<IndexedResult> indexResult(AnalysisOutput output, uint64_t sequence);

} // namespace wavecast::lsp
