// One finished analysis, its lines indexed per file: hovers, hints and lenses
// look lines up on every request, the cache and several documents share it.
#pragma once

#include "lsp/analyzer.h"

#include <cstdint>
#include <map>
#include <string>

namespace wavecast::lsp {

struct IndexedResult {
  AnalysisOutput output;
  std::map<std::string, std::map<int, size_t>> linesByFile; // canonical path -> line -> index
  std::map<std::string, std::string> analysedText;          // path -> the text those lines number
  uint64_t sequence = 0; // completion order, to prefer the newest result
};

} // namespace wavecast::lsp
