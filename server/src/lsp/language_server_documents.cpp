// The language server's document side: the text document notifications that keep the
// documents and start analyses on a save, and the views of the results the editor asks
// for (hover, inlay hints, code lenses). It runs on the io_context's thread.
#include "lsp/files.h"
#include "lsp/language_server.h"
#include "lsp/views.h"
#include "presentation.h"
#include "wavecast/protocol/json_read.h"

#include <algorithm>

namespace wavecast::lsp {

using namespace protocol;

// ---------------------------------------------------------------------------
// Documents

std::string LanguageServer::requirePath(const std::string& uri) const {
  if (const Document* doc = documents_.find(uri))
    return doc->path;
  auto path = uriToPath(uri);
  if (!path)
    throwInvalidParams("only file:// URIs can be analysed, got " + uri);
  return canonicalPath(*path);
}

void LanguageServer::didOpen(ClientId client, const Json& params) {
  DidOpenParams open = didOpenFromJson(params);
  const std::string& uri = open.textDocument.uri;
  documents_.open(uri, requirePath(uri), open.textDocument.text, open.textDocument.version);
  const Document& doc = *documents_.find(uri);
  clients_.at(client).openDocuments.insert(uri);
  // Results cached for this exact content are shown at once, else those of a trace an
  // earlier run of the daemon stored, if there is one; no user code runs.
  auto entry = entries_.find(uri);
  bool hasResults = entry != entries_.end() && entry->second.result;
  if (!hasResults && isAnalysisEntry(doc.text)) {
    auto content = readFile(doc.path);
    if (content) {
      const AnalysisRequest request = analysisRequest(doc.path, settings_.batchSize);
      if (auto cached = cache_.peek(cacheKey(*content, request))) {
        Entry& created = entries_[uri];
        created.path = doc.path;
        created.result = cached;
        created.state = ResultsState::Ready;
        created.contentVersion = doc.version;
        resultsChanged(uri);
      } else if (analyzer_.storesTraces() && settings_.trigger != AnalysisTrigger::Manual &&
                 !scheduler_->pending(uri) && (entry == entries_.end() || !entry->second.error)) {
        showStoredResults(uri);
      }
    }
  }
}

void LanguageServer::didChange(ClientId, const Json& params) {
  documents_.change(didChangeFromJson(params));
}

void LanguageServer::didSave(ClientId, const Json& params) {
  DidSaveParams save = didSaveFromJson(params);
  std::string path = requirePath(save.uri);
  documents_.saved(save.uri, save.text);
  if (settings_.trigger == AnalysisTrigger::Manual)
    return;
  std::vector<std::string> toAnalyze;
  const Document* saved = documents_.find(save.uri);
  std::string text = saved ? saved->text : readFile(path).value_or("");
  if (isAnalysisEntry(text))
    toAnalyze.push_back(save.uri);
  for (const auto& [uri, entry] : entries_) {
    if (uri == save.uri || !entry.result)
      continue;
    const auto& files = entry.result->output.sourceFiles;
    if (std::find(files.begin(), files.end(), path) != files.end())
      toAnalyze.push_back(uri); // an imported module changed
  }
  if (toAnalyze.empty()) {
    runAnalysesBlockedBySaves();
    return;
  }
  std::set<std::string> waiting; // unsaved files that hold an analysis back
  for (const auto& uri : toAnalyze) {
    const std::vector<std::string> dirty = unsavedFilesBlocking(uri);
    if (!dirty.empty()) {
      blockedBySaves_.insert(uri);
      waiting.insert(dirty.begin(), dirty.end());
      continue;
    }
    blockedBySaves_.erase(uri);
    startAnalysis(uri, std::chrono::milliseconds(settings_.debounceMs));
  }
  if (!waiting.empty()) {
    std::string names;
    for (const auto& name : waiting)
      names += (names.empty() ? "" : ", ") + name;
    sendStatus(ServerState::Idle, "analysis waits until these files are saved: " + names);
  }
  runAnalysesBlockedBySaves();
}

void LanguageServer::didClose(ClientId client, const Json& params) {
  DidCloseParams close = didCloseFromJson(params);
  clients_.at(client).openDocuments.erase(close.uri);
  bool stillOpen = std::any_of(clients_.begin(), clients_.end(), [&](const auto& other) {
    return other.second.openDocuments.count(close.uri) > 0;
  });
  if (!stillOpen)
    documents_.close(close.uri); // closing without saving drops the unsaved edits
  runAnalysesBlockedBySaves();
}

// ---------------------------------------------------------------------------
// Views of the results

bool LanguageServer::lineCodeLensFor(ClientId client) const {
  if (settings_.lineCodeLens)
    return *settings_.lineCodeLens;
  return !clients_.at(client).capabilities.inlayHint;
}

std::optional<Json> LanguageServer::hover(ClientId, const Json&, const Json& params) {
  TextDocumentPositionParams at = positionParamsFromJson(params);
  std::string path = requirePath(at.uri);
  auto result = resultFor(entries_, path);
  if (!result)
    return Json(nullptr);
  const Document* doc = documents_.find(at.uri);
  const auto moved = documents_.lineMapFor(at.uri, *result);
  auto hover =
      hoverAt(*result, path, {doc ? doc->text : std::string_view(), moved.get()}, at.position.line);
  return hover ? toJson(*hover) : Json(nullptr);
}

std::optional<Json> LanguageServer::inlayHint(ClientId, const Json&, const Json& params) {
  InlayHintParams at = inlayHintParamsFromJson(params);
  std::string path = requirePath(at.uri);
  Json hints = Json::array();
  auto result = resultFor(entries_, path);
  if (!result || !result->linesByFile.count(path))
    return hints;
  const Document* doc = documents_.find(at.uri);
  const std::string text = doc ? doc->text : readFile(path).value_or("");
  const auto moved = documents_.lineMapFor(at.uri, *result);
  for (const auto& hint : inlayHints(*result, path, {text, moved.get()}, at.range))
    hints.push_back(toJson(hint));
  return hints;
}

std::optional<Json> LanguageServer::codeLens(ClientId client, const Json&, const Json& params) {
  DocumentParams at = documentParamsFromJson(params);
  std::string path = requirePath(at.uri);
  std::vector<CodeLens> lenses;
  const Json arguments = Json::array({at.uri});
  auto entry = entries_.find(at.uri);
  if (entry != entries_.end() && entry->second.result) {
    const auto moved = documents_.lineMapFor(at.uri, *entry->second.result);
    lenses = summaryLenses(entry->second.result->output, moved.get(), arguments);
  }
  if (lineCodeLensFor(client)) {
    if (auto result = resultFor(entries_, path)) {
      const auto moved = documents_.lineMapFor(at.uri, *result);
      for (auto& lens : lineLenses(*result, path, moved.get(), arguments))
        lenses.push_back(std::move(lens));
    }
  }
  Json out = Json::array();
  for (const auto& lens : lenses)
    out.push_back(toJson(lens));
  return out;
}

} // namespace wavecast::lsp
