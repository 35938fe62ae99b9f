#include "lsp/views.h"

#include "lsp/files.h"
#include "presentation.h"

#include <algorithm>
#include <limits>

namespace wavecast::lsp {

using namespace protocol;

namespace {

// The 0-based `line` of `text`, without its line break.
std::string_view lineOf(std::string_view text, int line) {
  size_t start = 0;
  for (int i = 0; i < line; ++i) {
    size_t eol = text.find('\n', start);
    if (eol == std::string_view::npos)
      return {};
    start = eol + 1;
  }
  size_t eol = text.find('\n', start);
  std::string_view out =
      text.substr(start, eol == std::string_view::npos ? text.npos : eol - start);
  if (!out.empty() && out.back() == '\r')
    out.remove_suffix(1);
  return out;
}

// The 0-based line on screen of the 1-based analysed `line`; nullopt when edited since.
std::optional<int> onScreen(const LineMap* moved, int line) {
  return moved ? moved->toAfter(line - 1) : line - 1;
}

DiagnosticSeverity diagnosticSeverity(Severity severity) {
  return severity == Severity::Info ? DiagnosticSeverity::Information : DiagnosticSeverity::Warning;
}

ErrorInfo errorInfo(const ProfileError& error) {
  return {toString(error.kind), error.message, error.file, error.line, error.hint};
}

} // namespace

std::shared_ptr<const IndexedResult> resultFor(const Entries& entries, const std::string& path) {
  std::shared_ptr<const IndexedResult> best;
  for (const auto& [uri, entry] : entries) {
    if (!entry.result)
      continue;
    if (entry.path == path)
      return entry.result; // the file's own analysis wins
    if (entry.result->linesByFile.count(path) && (!best || entry.result->sequence > best->sequence))
      best = entry.result;
  }
  return best;
}

std::optional<Hover> hoverAt(const IndexedResult& result, const std::string& path,
                             const DocumentLines& doc, int line) {
  auto lines = result.linesByFile.find(path);
  if (lines == result.linesByFile.end())
    return std::nullopt;
  int analysedLine = line;
  if (doc.moved) {
    auto before = doc.moved->toBefore(line);
    if (!before)
      return std::nullopt;
    analysedLine = *before;
  }
  // A client may ask for any line up to 2^31-1; the last one has no 1-based number.
  if (analysedLine == std::numeric_limits<int>::max())
    return std::nullopt;
  auto found = lines->second.find(analysedLine + 1);
  if (found == lines->second.end())
    return std::nullopt;
  const Prediction& prediction = result.output.prediction;
  const LineBreakdown& breakdown = prediction.lines[found->second];
  std::string layouts;
  for (const auto& layout : result.output.layouts)
    for (const auto& rankLine : layout.lines)
      if (rankLine.loc.file == breakdown.loc.file && rankLine.loc.line == breakdown.loc.line &&
          !rankLine.perGpu.empty())
        layouts += layoutLineText(layout.target.config, layout.target.gpu, rankLine.perGpu[0]);
  return Hover{lineHover(prediction, breakdown) + layoutsHoverSection(layouts),
               Range{{line, 0}, {line, utf16Length(lineOf(doc.text, line))}}};
}

std::vector<InlayHint> inlayHints(const IndexedResult& result, const std::string& path,
                                  const DocumentLines& doc, const Range& range) {
  std::vector<InlayHint> hints;
  auto lines = result.linesByFile.find(path);
  if (lines == result.linesByFile.end())
    return hints;
  const Prediction& prediction = result.output.prediction;
  for (const auto& [analysedLine, index] : lines->second) {
    const std::optional<int> line = onScreen(doc.moved, analysedLine);
    if (!line || *line < range.start.line || *line > range.end.line)
      continue; // edited since the analysis, or outside the range asked for
    hints.push_back(InlayHint{{*line, utf16Length(lineOf(doc.text, *line))},
                              lineLabel(prediction, prediction.lines[index]),
                              "",
                              true});
  }
  return hints;
}

std::vector<CodeLens> summaryLenses(const AnalysisOutput& output, const LineMap* moved,
                                    const Json& arguments) {
  auto providerLine = [&](Provider provider) {
    auto it = output.providerLines.find(provider);
    const int line = it == output.providerLines.end() ? 0 : std::max(0, it->second - 1);
    // An edited def line keeps its old number: the lens has to sit somewhere.
    return moved ? moved->toAfter(line).value_or(line) : line;
  };
  std::vector<CodeLens> lenses;
  const int iteration = providerLine(Provider::Iteration);
  for (const auto& summary : output.prediction.summaries)
    lenses.push_back(CodeLens{{{iteration, 0}, {iteration, 0}},
                              {summaryTitle(summary), "wavecast.showResults", arguments}});
  const int input = providerLine(Provider::Input);
  lenses.push_back(CodeLens{{{input, 0}, {input, 0}},
                            {memoryTitle(output.prediction), "wavecast.setBatchSize", arguments}});
  return lenses;
}

std::vector<CodeLens> lineLenses(const IndexedResult& result, const std::string& path,
                                 const LineMap* moved, const Json& arguments) {
  std::vector<CodeLens> lenses;
  auto lines = result.linesByFile.find(path);
  if (lines == result.linesByFile.end())
    return lenses;
  const Prediction& prediction = result.output.prediction;
  for (const auto& [analysedLine, index] : lines->second)
    if (const std::optional<int> line = onScreen(moved, analysedLine))
      lenses.push_back(CodeLens{
          {{*line, 0}, {*line, 0}},
          {lineLabel(prediction, prediction.lines[index]), "wavecast.showResults", arguments}});
  return lenses;
}

std::vector<Diagnostic> diagnosticsFor(const Entries& entries, const std::string& path,
                                       bool lineDiagnostics,
                                       const std::function<std::string()>& text) {
  std::vector<Diagnostic> out;
  std::optional<std::string> loaded;
  auto lineRange = [&](int line) { // 1-based line -> its whole range
    if (!loaded)
      loaded = text();
    int index = std::max(0, line - 1);
    return Range{{index, 0}, {index, utf16Length(lineOf(*loaded, index))}};
  };
  for (const auto& [uri, entry] : entries) {
    if (entry.error) {
      std::string errorPath =
          entry.error->file.empty() ? entry.path : canonicalPath(entry.error->file);
      if (errorPath == path)
        out.push_back({lineRange(entry.error->line), DiagnosticSeverity::Error,
                       toString(entry.error->kind), errorMessage(*entry.error)});
    }
    if (entry.result && entry.path == path && entry.state != ResultsState::Error) {
      std::string outOfMemory; // one diagnostic for every GPU it does not fit
      for (const Advisory& advisory : entry.result->output.prediction.advisories)
        if (advisory.kind() == AdvisoryKind::OutOfMemory)
          outOfMemory += (outOfMemory.empty() ? "" : "\n") + advisoryMessage(advisory);
      if (!outOfMemory.empty()) {
        auto input = entry.result->output.providerLines.find(Provider::Input);
        int line = input == entry.result->output.providerLines.end() ? 1 : input->second;
        out.push_back({lineRange(line), DiagnosticSeverity::Warning,
                       toString(AdvisoryKind::OutOfMemory), outOfMemory});
      }
    }
    if (entry.result && entry.state != ResultsState::Error)
      if (auto found = entry.result->warningsByFile.find(path);
          found != entry.result->warningsByFile.end())
        for (const TraceWarning& warning : found->second)
          out.push_back({lineRange(warning.loc.line), diagnosticSeverity(warning.severity),
                         toString(warning.kind), traceWarningMessage(warning)});
  }
  if (lineDiagnostics) {
    if (auto result = resultFor(entries, path)) {
      auto lines = result->linesByFile.find(path);
      if (lines != result->linesByFile.end())
        for (const auto& [line, index] : lines->second)
          out.push_back(
              {lineRange(line), DiagnosticSeverity::Information, "prediction",
               lineLabel(result->output.prediction, result->output.prediction.lines[index])});
    }
  }
  return out;
}

Results resultsOf(const Entries& entries, const std::string& uri, ResultsParts parts) {
  Results out;
  out.uri = uri;
  auto it = entries.find(uri);
  if (it == entries.end())
    return out;
  const Entry& entry = it->second;
  out.state = entry.state;
  out.contentVersion = entry.contentVersion;
  if (entry.result)
    out.prediction = entry.result->resultsJson(parts);
  if (entry.error)
    out.error = errorInfo(*entry.error);
  return out;
}

GpuInfo gpuInfo(const DeviceSpec& spec) {
  return {spec.id,
          spec.name,
          spec.computeCapability(),
          spec.smCount,
          spec.memoryGiB,
          spec.memoryBandwidthGBs,
          spec.fp32Tflops,
          spec.tf32Tflops,
          spec.fp16Tflops,
          spec.bf16Tflops,
          spec.pricePerHourUsd,
          spec.hostLink.name,
          spec.hostLink.hostToDeviceGBs,
          spec.hostLink.deviceToHostGBs};
}

} // namespace wavecast::lsp
