// What editors show of the results, as LSP and wavecast/* values: free
// functions over results and the document as it is now, so the server only
// finds their inputs and sends what they return. presentation.h formats the
// text inside them.
#pragma once

#include "lsp/entries.h"
#include "lsp/line_map.h"
#include "results_json.h"
#include "wavecast/predictor/device_spec.h"
#include "wavecast/protocol/lsp.h"
#include "wavecast/protocol/wavecast.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wavecast::lsp {

// A document as the views see it: the text on screen and how the analysed
// lines moved in it under unsaved edits (null: they did not).
struct DocumentLines {
  std::string_view text;
  const LineMap* moved = nullptr;
};

// The result to show for the file `path` (canonical): its own analysis, else
// the newest result with lines in it (a module the entry imports).
std::shared_ptr<const IndexedResult> resultFor(const Entries& entries, const std::string& path);

// The hover of `line` (0-based, on screen); nullopt for a line without figures
// or one edited since the analysis (its old figures would mislead).
std::optional<protocol::Hover> hoverAt(const IndexedResult& result, const std::string& path,
                                       const DocumentLines& doc, int line);
// One hint at the end of each predicted line on screen within `range`.
std::vector<protocol::InlayHint> inlayHints(const IndexedResult& result, const std::string& path,
                                            const DocumentLines& doc, const protocol::Range& range);
// On the entry document: a lens per GPU on the iteration provider and the
// memory lens on the input provider. `arguments` go with every lens's command.
std::vector<protocol::CodeLens> summaryLenses(const AnalysisOutput& output, const LineMap* moved,
                                              const protocol::Json& arguments);
// A lens per predicted line, for clients without inlay hints.
std::vector<protocol::CodeLens> lineLenses(const IndexedResult& result, const std::string& path,
                                           const LineMap* moved, const protocol::Json& arguments);

// The diagnostics of `path` (canonical): failed analyses located there, an
// out-of-memory warning on an entry's input provider, the trace's warnings about its
// lines (a CPU tensor mixed with GPU tensors) and, with
// `lineDiagnostics`, one per predicted line. `text` gives the file's text,
// asked only when a diagnostic needs a line's range.
std::vector<protocol::Diagnostic> diagnosticsFor(const Entries& entries, const std::string& path,
                                                 bool lineDiagnostics,
                                                 const std::function<std::string()>& text);

// wavecast/results and wavecast/analyze replies; `parts`: what the client asked for.
protocol::Results resultsOf(const Entries& entries, const std::string& uri,
                            ResultsParts parts = {});
// wavecast/listGpus items.
protocol::GpuInfo gpuInfo(const DeviceSpec& spec);

} // namespace wavecast::lsp
