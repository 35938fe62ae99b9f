#include "lsp/indexed_result.h"

#include "lsp/files.h"

#include <cctype>
#include <cstdlib>

namespace wavecast::lsp {

std::optional<LineWarning> lineWarning(const std::string& warning) {
  // "FILE:LINE: message", FILE an absolute path (docs/trace-format.md, `warnings`).
  if (warning.empty() || warning[0] != '/')
    return std::nullopt;
  for (size_t colon = warning.find(':'); colon != std::string::npos;
       colon = warning.find(':', colon + 1)) {
    size_t end = colon + 1;
    while (end < warning.size() && std::isdigit(static_cast<unsigned char>(warning[end])))
      ++end;
    if (end == colon + 1 || end + 1 >= warning.size() || warning.compare(end, 2, ": ") != 0)
      continue;
    const int line = std::atoi(warning.substr(colon + 1, end - colon - 1).c_str());
    if (line > 0)
      return LineWarning{warning.substr(0, colon), line, warning.substr(end + 2)};
  }
  return std::nullopt;
}

std::shared_ptr<IndexedResult> indexResult(AnalysisOutput output, uint64_t sequence) {
  auto indexed = std::make_shared<IndexedResult>();
  indexed->output = std::move(output);
  indexed->sequence = sequence;
  std::map<std::string, std::string> canonical; // a prediction has many lines per file
  const auto& lines = indexed->output.prediction.lines;
  for (size_t i = 0; i < lines.size(); ++i) {
    const SourceLocation& loc = lines[i].loc;
    auto found = canonical.find(loc.file);
    if (found == canonical.end())
      found = canonical.emplace(loc.file, canonicalPath(loc.file)).first;
    indexed->linesByFile[found->second][loc.line] = i;
  }
  for (const std::string& warning : indexed->output.traceWarnings)
    if (auto at = lineWarning(warning)) {
      auto found = canonical.find(at->file);
      if (found == canonical.end())
        found = canonical.emplace(at->file, canonicalPath(at->file)).first;
      indexed->warningsByFile[found->second].push_back(std::move(*at));
    }
  for (auto& file : indexed->output.sourceFiles)
    file = canonicalPath(file);
  return indexed;
}

} // namespace wavecast::lsp
