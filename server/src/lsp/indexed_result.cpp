#include "lsp/indexed_result.h"

#include "lsp/files.h"

namespace wavecast::lsp {

std::shared_ptr<const std::string> IndexedResult::resultsJson(ResultsParts parts) const {
  CachedText& cached = parts.ops ? withOps_ : withoutOps_;
  std::call_once(cached.written, [&] {
    const TraceFacts facts{output.entryFile, output.traceMode,  output.torchVersion,
                           output.pythonEnv, output.fallbackOps, output.traceWarnings};
    std::vector<ParallelSummary> layouts;
    for (const auto& layout : output.layouts)
      layouts.push_back(layout.summary);
    cached.text = std::make_shared<const std::string>(
        resultsJsonText(output.prediction, facts, layouts, output.refusals, parts));
  });
  return cached.text;
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
  for (const TraceWarning& warning : indexed->output.traceWarnings)
    if (warning.loc.valid()) {
      auto found = canonical.find(warning.loc.file);
      if (found == canonical.end())
        found = canonical.emplace(warning.loc.file, canonicalPath(warning.loc.file)).first;
      indexed->warningsByFile[found->second].push_back(warning);
    }
  for (auto& file : indexed->output.sourceFiles)
    file = canonicalPath(file);
  return indexed;
}

} // namespace wavecast::lsp
