// The language server's analysis side: from a save (or a setting that changes
// what is predicted) to a scheduled analysis, and from its results back to
// every client: status, progress, diagnostics, refresh requests and the
// answers to waiting wavecast/analyze requests. Like the rest of the server it
// runs on the io_context's thread; the scheduler's callbacks arrive there.
#include "lsp/files.h"
#include "lsp/language_server.h"
#include "lsp/views.h"
#include "presentation.h"
#include "results_json.h"
#include "wavecast/protocol/json_read.h"

#include <algorithm>
#include <filesystem>

namespace wavecast::lsp {

namespace fs = std::filesystem;
using namespace protocol;

std::vector<std::string> LanguageServer::unsavedFilesBlocking(const std::string& uri) const {
  const Document* entry = documents_.find(uri);
  const auto entryPath = entry ? std::optional<std::string>(entry->path) : uriToPath(uri);
  const std::string folder = entryPath ? workspaceFolderOf(canonicalPath(*entryPath)) : "";
  return documents_.unsavedPythonFiles(
      [&](const std::string& path) { return folder.empty() || workspaceFolderOf(path) == folder; });
}

void LanguageServer::runAnalysesBlockedBySaves() {
  if (blockedBySaves_.empty())
    return;
  std::set<std::string> ready;
  for (const auto& uri : blockedBySaves_)
    if (unsavedFilesBlocking(uri).empty())
      ready.insert(uri);
  for (const auto& uri : ready) {
    blockedBySaves_.erase(uri);
    startAnalysis(uri, std::chrono::milliseconds(settings_.debounceMs));
  }
}

AnalysisRequest LanguageServer::analysisRequest(const std::string& path,
                                                std::optional<int64_t> batchSize) const {
  const TraceMode mode =
      settings_.mode == protocol::AnalysisMode::Measured ? TraceMode::Cuda : TraceMode::Shape;
  AnalysisRequest request{path, batchSize, targets_, settings_.pythonEnv, mode};
  request.layouts = layouts_;
  request.scriptArgs = protocol::scriptArgsFor(settings_, path);
  // Its launch configuration's `cwd`, else as VS Code runs a file (its terminal and its
  // debugger's default): from the workspace folder.
  const auto own = settings_.scriptWorkingDirectories.find(path);
  request.workingDirectory =
      own != settings_.scriptWorkingDirectories.end() ? own->second : workspaceFolderOf(path);
  request.worldSize = settings_.worldSize;
  request.compile = settings_.compile;
  return request;
}

void LanguageServer::startAnalysis(const std::string& uri, std::chrono::milliseconds delay) {
  std::string path = requirePath(uri);
  auto content = readFile(path);
  if (!content)
    throwInvalidParams("cannot read " + path + ": the file must exist on disk");
  // The first analysis of a document in this run may start from a trace an earlier run
  // stored (analysisFinished then has the worker trace it again).
  Entry& entry = entries_[uri];
  AnalysisRequest request =
      requestFor(uri, path, *content,
                 !entry.result && !entry.error ? TraceSource::StoreOrWorker : TraceSource::Worker);

  if (auto cached = cache_.fresh(entry.cacheKeyAtRequest)) {
    scheduler_->cancel(uri);
    entry.result = cached;
    entry.error.reset();
    entry.state = ResultsState::Ready;
    entry.contentVersion = entry.versionAtRequest;
    resultsChanged(uri);
    return;
  }
  entry.state = ResultsState::Analyzing;
  scheduler_->schedule(uri, std::move(request), delay);
  sendToAll(methods::kResultsChanged,
            {{"uri", uri}, {"state", toString(entry.state)}, {"summaries", Json::array()}});
}

AnalysisRequest LanguageServer::requestFor(const std::string& uri, const std::string& path,
                                           const std::string& content, TraceSource source) {
  Entry& entry = entries_[uri];
  entry.path = path;
  AnalysisRequest request = analysisRequest(path, entry.batchSizeOverride ? entry.batchSizeOverride
                                                                          : settings_.batchSize);
  const Document* doc = documents_.find(uri);
  entry.versionAtRequest = doc ? std::optional<int64_t>(doc->version) : std::nullopt;
  entry.cacheKeyAtRequest = cacheKey(content, request);
  entry.textAtRequest = content;
  request.traceSource = entry.sourceAtRequest = source;
  return request;
}

void LanguageServer::showStoredResults(const std::string& uri) {
  const std::string path = requirePath(uri);
  const auto content = readFile(path);
  if (!content)
    return;
  scheduler_->schedule(uri, requestFor(uri, path, *content, TraceSource::Store),
                       std::chrono::milliseconds(0));
}

void LanguageServer::reanalyzeEntriesWithResults() {
  for (const auto& [uri, entry] : entries_) {
    if (!entry.result && !entry.error)
      continue;
    try {
      startAnalysis(uri, std::chrono::milliseconds(0));
    } catch (const RpcError& error) {
      logLine(LogLevel::Info, std::string("re-analysis skipped: ") + error.what());
    }
  }
}

void LanguageServer::analysisStarted(const std::string& uri) {
  analysisStarts_[uri] = std::chrono::steady_clock::now();
  if (auto entry = entries_.find(uri);
      entry != entries_.end() && entry->second.sourceAtRequest == TraceSource::Store)
    return; // a look into the store, too short for progress

  std::string name = fs::path(requirePath(uri)).filename().string();
  sendStatus(ServerState::Analyzing, "analysing " + name);
  endProgress("superseded"); // a cancelled run's bar must not spin forever
  for (auto& [id, client] : clients_) {
    if (!client.initialized || !client.capabilities.workDoneProgress)
      continue;
    std::string token = "wavecast/analysis/" + std::to_string(++progressSequence_);
    client.progress = Progress{token};
    ClientId clientId = id;
    sendRequest(
        id, "window/workDoneProgress/create", {{"token", token}},
        [this, clientId, token, name](const Response& response) {
          auto it = clients_.find(clientId);
          if (it == clients_.end() || !it->second.progress || it->second.progress->token != token ||
              it->second.progress->ended || std::holds_alternative<ResponseError>(response.outcome))
            return;
          it->second.progress->created = true;
          send(clientId, encodeNotification("$/progress", {{"token", token},
                                                           {"value",
                                                            {{"kind", "begin"},
                                                             {"title", "wavecast"},
                                                             {"message", "analysing " + name},
                                                             {"cancellable", false}}}}));
        });
  }
}

void LanguageServer::analysisProgress(const std::string&, const std::string& message) {
  sendStatus(ServerState::Analyzing, message);
  for (auto& [id, client] : clients_) {
    if (client.progress && client.progress->created && !client.progress->ended)
      send(id, encodeNotification("$/progress",
                                  {{"token", client.progress->token},
                                   {"value", {{"kind", "report"}, {"message", message}}}}));
  }
}

void LanguageServer::endProgress(const std::string& message) {
  for (auto& [id, client] : clients_) {
    if (!client.progress || client.progress->ended)
      continue;
    if (client.progress->created)
      send(id,
           encodeNotification("$/progress", {{"token", client.progress->token},
                                             {"value", {{"kind", "end"}, {"message", message}}}}));
    client.progress->ended = true;
  }
}

void LanguageServer::sendStatus(ServerState state, const std::string& message) {
  sendToAll(methods::kStatus, toJson(Status{state, message, std::nullopt}));
}

void LanguageServer::analysisFinished(const std::string& uri, const AnalysisRequest& request,
                                      AnalysisOutcome outcome) {
  if (auto started = analysisStarts_.find(uri); started != analysisStarts_.end()) {
    logLine(LogLevel::Debug,
            "analysis of " + request.file + ": " +
                formatMs(std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - started->second)
                             .count()) +
                (std::holds_alternative<ProfileError>(outcome) ? " (failed)" : ""));
    analysisStarts_.erase(started);
  }
  Entry& entry = entries_[uri];
  if (request.traceSource == TraceSource::Store && std::holds_alternative<ProfileError>(outcome))
    return; // nothing stored: the document stays as it was until it is saved
  entry.contentVersion = entry.versionAtRequest;
  bool fromStore = false;
  if (auto* output = std::get_if<AnalysisOutput>(&outcome)) {
    fromStore = output->storedTraceRecorded.has_value();
    auto indexed = indexResult(std::move(*output), ++resultSequence_);
    // Every file the result depends on, read once: the entry as it was requested
    // (a save since then is being analysed anew), imported modules as they are now.
    std::set<std::string> sources(indexed->output.sourceFiles.begin(),
                                  indexed->output.sourceFiles.end());
    sources.insert(request.file);
    std::map<std::string, std::string> texts;
    for (const auto& source : sources)
      if (source == entry.path)
        texts[source] = entry.textAtRequest;
      else if (auto text = readFile(source))
        texts[source] = std::move(*text);
    for (const auto& [path, lines] : indexed->linesByFile)
      if (auto text = texts.find(path); text != texts.end())
        indexed->analysedText[path] = text->second;
    entry.result = indexed;
    entry.error.reset();
    entry.state = ResultsState::Ready;

    std::map<std::string, std::string> sourceHashes;
    for (const auto& [source, text] : texts)
      sourceHashes[source] = contentHash(text);
    // A stored trace's results stay out of the cache, which would answer the trace below.
    if (!fromStore)
      cache_.insert(entry.cacheKeyAtRequest, indexed, std::move(sourceHashes));
  } else {
    entry.error = std::get<ProfileError>(std::move(outcome));
    entry.state = ResultsState::Error;
  }
  resultsChanged(uri);
  // After a save, what an earlier run traced is shown at once, then traced again: what no
  // hash sees (a data file the script reads, an editable install's sources) may have
  // changed since. Its results stay shown meanwhile. (Opening a document runs no user code.)
  if (fromStore && request.traceSource == TraceSource::StoreOrWorker) {
    AnalysisRequest again = request;
    again.traceSource = entry.sourceAtRequest = TraceSource::Worker;
    scheduler_->schedule(uri, std::move(again), std::chrono::milliseconds(0));
  }
}

void LanguageServer::analysisCancelled(const std::string& uri) {
  analysisStarts_.erase(uri);
  auto it = entries_.find(uri);
  if (it == entries_.end())
    return;
  it->second.state = it->second.error    ? ResultsState::Error
                     : it->second.result ? ResultsState::Ready
                                         : ResultsState::None;
  resultsChanged(uri);
}

void LanguageServer::resultsChanged(const std::string& uri) {
  Entry& entry = entries_.at(uri);
  // Diagnostics and notifications first, so a client answered below sees a consistent state.
  publishDiagnostics();
  bool failed = entry.state == ResultsState::Error;
  std::string name = fs::path(entry.path).filename().string();
  std::string message = name + ": results ready";
  if (failed)
    message = name + ": " + entry.error->message;
  else if (entry.result) {
    message += ", traced with " +
               tracedWith(entry.result->output.torchVersion, entry.result->output.pythonEnv);
    if (const auto& recorded = entry.result->output.storedTraceRecorded)
      message += " (the trace stored " + localTime(*recorded) +
                 (entry.sourceAtRequest == TraceSource::Store ? "; save to trace it again)"
                                                              : "; tracing it again)");
  }
  endProgress(message);
  sendStatus(failed ? ServerState::Error : ServerState::Idle, message);
  sendToAll(methods::kResultsChanged,
            {{"uri", uri},
             {"state", toString(entry.state)},
             // The results JSON's own summaries (one encoder for the shape); the lines and
             // ops stay out of the notification: clients ask wavecast/results for them.
             {"summaries",
              entry.result ? summariesJson(entry.result->output.prediction) : Json::array()}});
  refreshViews(true, true);
  if (entry.waiters.empty())
    return;
  const std::string reply = toJsonText(resultsOf(entries_, uri));
  for (const auto& [client, id] : entry.waiters)
    send(client, encodeResultText(id, reply));
  entry.waiters.clear();
}

void LanguageServer::refreshViews(bool inlayHints, bool codeLenses) {
  for (auto& [id, client] : clients_) {
    if (!client.initialized)
      continue;
    if (inlayHints && client.capabilities.inlayHintRefresh)
      sendRequest(id, "workspace/inlayHint/refresh", nullptr, nullptr);
    if (codeLenses && client.capabilities.codeLensRefresh)
      sendRequest(id, "workspace/codeLens/refresh", nullptr, nullptr);
  }
}

void LanguageServer::publishDiagnostics() {
  std::set<std::string> paths;
  for (const auto& [uri, entry] : entries_) {
    paths.insert(entry.path);
    if (entry.error && !entry.error->file.empty())
      paths.insert(canonicalPath(entry.error->file));
    if (settings_.lineDiagnostics && entry.result)
      for (const auto& [file, lines] : entry.result->linesByFile)
        paths.insert(file);
  }
  std::map<std::string, std::string> uriOfPath;
  for (const auto& [uri, doc] : documents_.all())
    uriOfPath[doc.path] = uri;
  for (const auto& [uri, entry] : entries_)
    uriOfPath.emplace(entry.path, uri);
  std::set<std::string> published;
  for (const auto& uri : diagnosedUris_) {
    auto path = uriToPath(uri);
    if (path)
      paths.insert(canonicalPath(*path));
  }
  for (const auto& path : paths) {
    auto known = uriOfPath.find(path);
    std::string uri = known != uriOfPath.end() ? known->second : pathToUri(path);
    auto text = [&] {
      const Document* doc = documents_.findByPath(path);
      return doc && !doc->text.empty() ? doc->text : readFile(path).value_or("");
    };
    PublishDiagnosticsParams params{
        uri, std::nullopt, diagnosticsFor(entries_, path, settings_.lineDiagnostics, text)};
    if (params.diagnostics.empty() && !diagnosedUris_.count(uri))
      continue;
    if (!params.diagnostics.empty())
      published.insert(uri);
    sendToAll("textDocument/publishDiagnostics", toJson(params));
  }
  diagnosedUris_ = std::move(published);
}

} // namespace wavecast::lsp
