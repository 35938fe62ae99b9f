// The documents editors have open: their text as the user sees it (unsaved
// edits included), version and whether it differs from the file on disk. Open
// by any client counts; the server removes a document when the last one closes.
#pragma once

#include "lsp/indexed_result.h"
#include "lsp/line_map.h"
#include "wavecast/protocol/lsp.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wavecast::lsp {

struct Document {
  std::string path; // canonical
  std::string text;
  int64_t version = 0;
  bool dirty = false; // edited since it was opened or saved
};

class DocumentStore {
public:
  // By uri; null when the document is not open.
  const Document* find(const std::string& uri) const;
  // The document open with this canonical path (the last uri when several
  // name it); null when none is.
  const Document* findByPath(const std::string& path) const;
  const std::map<std::string, Document>& all() const { return documents_; }

  // Opening again replaces the text and forgets unsaved edits.
  void open(const std::string& uri, std::string path, std::string text, int64_t version);
  // Throws RpcError (invalid params) for a document that is not open.
  void change(const protocol::DidChangeParams& change);
  // The document's text is now on disk; `text` is what the client sent with the save.
  void saved(const std::string& uri, const std::optional<std::string>& text);
  void close(const std::string& uri);

  // File names of open Python documents with unsaved edits whose path passes
  // `include`: only unsaved Python code can change what an analysis runs.
  std::vector<std::string>
  unsavedPythonFiles(const std::function<bool(const std::string& path)>& include) const;

  // How `result`'s lines for the document `uri` moved under unsaved edits;
  // null when they did not (or the document is not open). Kept per document
  // until its text or the result changes: every hover and hint asks.
  std::shared_ptr<const LineMap> lineMapFor(const std::string& uri,
                                            const IndexedResult& result) const;

private:
  struct CachedLineMap {
    uint64_t sequence = 0; // the result's
    int64_t version = 0;   // the document's
    std::shared_ptr<const LineMap> map;
  };
  std::map<std::string, Document> documents_;             // by uri
  mutable std::map<std::string, CachedLineMap> lineMaps_; // by uri
};

// True when `text` defines a provider function (wavecast_model, deepview_*_provider, ...).
bool definesProviders(std::string_view text);
// True when `text` is analysed on save: it defines providers, or it is a training script
// to run as written (a main block or a top-level loop; it uses torch and steps an
// optimizer or runs a Trainer: `.step(`, `.fit(`, `.train()`).
bool isAnalysisEntry(std::string_view text);

} // namespace wavecast::lsp
