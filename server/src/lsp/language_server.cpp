#include "lsp/language_server.h"

#include "lsp/presentation.h"
#include "wavecast/protocol/json_read.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace wavecast::lsp {

namespace fs = std::filesystem;
using namespace protocol;

namespace {

std::string canonicalPath(const std::string& path) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? fs::path(path).lexically_normal().string() : canonical.string();
}

std::optional<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

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

// Only unsaved Python code can change what an analysis runs.
bool isPythonSource(const std::string& path) {
  return fs::path(path).extension() == ".py";
}

std::string idKey(const Json& id) {
  return id.dump();
}

bool tokensEqual(const std::string& a, const std::string& b) {
  // Constant time in the length of the expected token.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i)
    diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

ErrorInfo errorInfo(const ProfileError& error) {
  return {error.kind, error.message, error.file, error.line, error.hint};
}

GpuInfo gpuInfo(const DeviceSpec& spec) {
  return {spec.id,
          spec.name,
          std::to_string(spec.computeCapabilityMajor) + "." +
              std::to_string(spec.computeCapabilityMinor),
          spec.smCount,
          spec.memoryGiB,
          spec.memoryBandwidthGBs,
          spec.fp32Tflops,
          spec.tf32Tflops,
          spec.fp16Tflops,
          spec.bf16Tflops,
          spec.pricePerHourUsd};
}

Json summariesJson(const Prediction& prediction) {
  Json out = Json::array();
  for (const auto& summary : prediction.summaries)
    out.push_back({{"gpu", summary.gpuId},
                   {"iteration_ms", summary.iterationMs},
                   {"samples_per_second", summary.samplesPerSecond},
                   {"cost_per_1k_samples_usd", summary.costPer1kSamplesUsd},
                   {"fits_in_memory", summary.fitsInMemory}});
  return out;
}

RpcError unknownGpuError(const UnknownGpuError& error) {
  return RpcError(ErrorCode::InvalidParams, error.what(),
                  Json{{"suggestions", error.suggestions()}});
}

} // namespace

bool definesProviders(std::string_view text) {
  static const std::set<std::string_view> providers = {
      "wavecast_model",          "wavecast_input",          "wavecast_iteration",
      "deepview_model_provider", "deepview_input_provider", "deepview_iteration_provider",
      "skyline_model_provider",  "skyline_input_provider",  "skyline_iteration_provider"};
  size_t start = 0;
  while (start < text.size()) {
    size_t eol = text.find('\n', start);
    std::string_view line = text.substr(start, eol == text.npos ? text.npos : eol - start);
    start = eol == text.npos ? text.size() : eol + 1;
    line.remove_prefix(std::min(line.size(), line.find_first_not_of(" \t")));
    if (line.substr(0, 4) != "def ")
      continue;
    line.remove_prefix(4);
    line.remove_prefix(std::min(line.size(), line.find_first_not_of(" \t")));
    std::string_view name = line.substr(0, line.find_first_of(" \t("));
    if (providers.count(name))
      return true;
  }
  return false;
}

LanguageServer::LanguageServer(boost::asio::io_context& io, Analyzer& analyzer,
                               ServerOptions options)
    : io_(io), analyzer_(analyzer), options_(std::move(options)), settings_(options_.defaults),
      cache_(options_.cacheEntries) {
  requestHandlers_ = {
      {"initialize", &LanguageServer::initialize},
      {"shutdown", &LanguageServer::shutdown},
      {"textDocument/hover", &LanguageServer::hover},
      {"textDocument/inlayHint", &LanguageServer::inlayHint},
      {"textDocument/codeLens", &LanguageServer::codeLens},
      {methods::kListGpus, &LanguageServer::listGpus},
      {methods::kSetTargets, &LanguageServer::setTargets},
      {methods::kSetBatchSize, &LanguageServer::setBatchSize},
      {methods::kAnalyze, &LanguageServer::analyze},
      {methods::kResults, &LanguageServer::results},
  };
  notificationHandlers_ = {
      {"initialized", &LanguageServer::initialized},
      {"exit", &LanguageServer::exit},
      {"textDocument/didOpen", &LanguageServer::didOpen},
      {"textDocument/didChange", &LanguageServer::didChange},
      {"textDocument/didSave", &LanguageServer::didSave},
      {"textDocument/didClose", &LanguageServer::didClose},
      {"workspace/didChangeConfiguration", &LanguageServer::didChangeConfiguration},
      {"workspace/didChangeWorkspaceFolders", &LanguageServer::didChangeWorkspaceFolders},
      {"$/cancelRequest", &LanguageServer::cancelRequest},
  };
  targets_ = settings_.targets.empty() ? analyzer_.defaultTargets()
                                       : analyzer_.resolveTargets(settings_.targets);
  scheduler_ = std::make_unique<AnalysisScheduler>(
      io_, analyzer_,
      AnalysisScheduler::Callbacks{
          [this](const std::string& uri) {
            guarded("analysis start", [&] { analysisStarted(uri); });
          },
          [this](const std::string& uri, const std::string& message) {
            guarded("analysis progress", [&] { analysisProgress(uri, message); });
          },
          [this](const std::string& uri, const AnalysisRequest& request, AnalysisOutcome outcome) {
            guarded("analysis results",
                    [&] { analysisFinished(uri, request, std::move(outcome)); });
          },
          [this](const std::string& uri) {
            guarded("analysis cancel", [&] { analysisCancelled(uri); });
          }});
}

LanguageServer::~LanguageServer() {
  scheduler_.reset();
}

// ---------------------------------------------------------------------------
// Clients and dispatch

ClientId LanguageServer::addClient(std::shared_ptr<ClientSink> sink, bool needsToken) {
  ClientId id = nextClientId_++;
  clients_[id].sink = std::move(sink);
  clients_[id].needsToken = needsToken;
  return id;
}

void LanguageServer::removeClient(ClientId client) {
  auto it = clients_.find(client);
  if (it == clients_.end())
    return;
  std::set<std::string> open = it->second.openDocuments;
  clients_.erase(it);
  for (const auto& uri : open) {
    bool stillOpen = std::any_of(clients_.begin(), clients_.end(), [&](const auto& other) {
      return other.second.openDocuments.count(uri) > 0;
    });
    if (!stillOpen)
      documents_.erase(uri);
  }
  for (auto& [uri, entry] : entries_)
    entry.waiters.erase(std::remove_if(entry.waiters.begin(), entry.waiters.end(),
                                       [&](const auto& w) { return w.first == client; }),
                        entry.waiters.end());
  runAnalysesBlockedBySaves();
}

void LanguageServer::send(ClientId client, std::string body) {
  auto it = clients_.find(client);
  if (it != clients_.end())
    it->second.sink->send(std::move(body));
}

void LanguageServer::sendToAll(const std::string& method, const Json& params) {
  std::string body = encodeNotification(method, params);
  for (auto& [id, client] : clients_)
    if (client.initialized)
      client.sink->send(body);
}

void LanguageServer::sendRequest(ClientId client, const std::string& method, const Json& params,
                                 std::function<void(const Response&)> onReply) {
  auto it = clients_.find(client);
  if (it == clients_.end())
    return;
  Json id = "wavecast-" + std::to_string(it->second.nextRequestId++);
  it->second.pendingReplies[idKey(id)] = std::move(onReply);
  it->second.sink->send(encodeRequest(id, method, params));
}

void LanguageServer::framingError(ClientId client, const std::string& message) {
  if (log)
    log("client " + std::to_string(client) + ": " + message);
  send(client, encodeError(nullptr, {ErrorCode::ParseError, message, nullptr}));
  auto it = clients_.find(client);
  if (it != clients_.end() && it->second.needsToken)
    it->second.sink->close(); // a stranger that cannot even frame a message: no retries
}

void LanguageServer::guarded(const char* what, const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& error) {
    // An event that failed must not take the daemon (and every editor's session) down.
    if (log)
      log(std::string(what) + " failed: " + error.what());
  }
}

void LanguageServer::receive(ClientId client, std::string_view body) {
  guarded("message", [&] { dispatch(client, body); });
}

void LanguageServer::dispatch(ClientId client, std::string_view body) {
  if (!clients_.count(client))
    return;
  auto decoded = decodeMessage(body);
  if (auto* error = std::get_if<DecodeError>(&decoded)) {
    if (log)
      log("client " + std::to_string(client) + ": " + error->error.message);
    send(client, encodeError(error->id, error->error));
    if (clients_.at(client).needsToken)
      clients_.at(client).sink->close(); // a stranger gets no second try at garbage
    return;
  }
  Message& message = std::get<Message>(decoded);
  Client& state = clients_.at(client);
  if (state.needsToken) {
    // Until it authenticates in initialize, a TCP client gets nothing else.
    auto* request = std::get_if<Request>(&message);
    if (!request || request->method != "initialize") {
      send(client,
           encodeError(request ? request->id : Json(), {ErrorCode::ServerNotInitialized,
                                                        "authenticate first: send initialize with "
                                                        "initializationOptions.token (" +
                                                            options_.tokenSource + ")",
                                                        nullptr}));
      state.sink->close();
      return;
    }
  }
  if (auto* request = std::get_if<Request>(&message))
    handleRequest(client, *request);
  else if (auto* notification = std::get_if<Notification>(&message))
    handleNotification(client, *notification);
  else
    handleResponse(client, std::get<Response>(message));
}

void LanguageServer::handleRequest(ClientId client, const Request& request) {
  const Client& state = clients_.at(client);
  auto fail = [&](ErrorCode code, const std::string& message) {
    send(client, encodeError(request.id, {code, message, nullptr}));
  };
  if (!state.initialized && request.method != "initialize")
    return fail(ErrorCode::ServerNotInitialized,
                "the server is not initialized: send initialize first (got " + request.method +
                    ")");
  if (state.shutdown)
    return fail(ErrorCode::InvalidRequest, "the server is shutting down: only exit is accepted");
  auto handler = requestHandlers_.find(request.method);
  if (handler == requestHandlers_.end())
    return fail(ErrorCode::MethodNotFound, "unknown method " + request.method);
  try {
    std::optional<Json> result = (this->*handler->second)(client, request.id, request.params);
    if (result)
      send(client, encodeResult(request.id, *result));
  } catch (const RpcError& error) {
    send(client, encodeError(request.id, error.toResponseError()));
  } catch (const std::exception& error) {
    fail(ErrorCode::InternalError, request.method + " failed: " + error.what());
  }
}

void LanguageServer::handleNotification(ClientId client, const Notification& notification) {
  if (!clients_.at(client).initialized && notification.method != "exit")
    return; // LSP: notifications before initialize are dropped
  auto handler = notificationHandlers_.find(notification.method);
  if (handler == notificationHandlers_.end()) {
    if (log && notification.method.rfind("$/", 0) != 0)
      log("ignoring unknown notification " + notification.method);
    return;
  }
  try {
    (this->*handler->second)(client, notification.params);
  } catch (const std::exception& error) {
    if (log)
      log(notification.method + ": " + error.what());
    send(client,
         encodeNotification(
             "window/logMessage",
             {{"type", 1}, {"message", "wavecast: " + notification.method + ": " + error.what()}}));
  }
}

void LanguageServer::handleResponse(ClientId client, const Response& response) {
  Client& state = clients_.at(client);
  auto it = state.pendingReplies.find(idKey(response.id));
  if (it == state.pendingReplies.end())
    return;
  auto onReply = std::move(it->second);
  state.pendingReplies.erase(it);
  if (onReply)
    onReply(response);
}

// ---------------------------------------------------------------------------
// Lifecycle

std::optional<Json> LanguageServer::initialize(ClientId client, const Json& id,
                                               const Json& params) {
  Client& state = clients_.at(client);
  if (state.initialized)
    throw RpcError(ErrorCode::InvalidRequest, "initialize was already received");
  InitializeParams init = initializeFromJson(params);
  InitializationOptions options = initializationOptionsFromJson(init.initializationOptions);
  if (state.needsToken && !tokensEqual(options.token, options_.token)) {
    send(client, encodeError(id, {ErrorCode::InvalidRequest,
                                  "authentication failed: initializationOptions.token must be "
                                  "the daemon's token (" +
                                      options_.tokenSource + ")",
                                  Json{{"retry", false}}}));
    state.sink->close();
    return std::nullopt;
  }
  if (options.protocolVersion) {
    if (auto mismatch = checkProtocolVersion(static_cast<int>(*options.protocolVersion)))
      throw *mismatch;
  }
  applySettings(options.settings, "params.initializationOptions");
  if (state.needsToken)
    state.sink->authenticated();
  state.needsToken = false;
  state.initialized = true;
  state.capabilities = init.capabilities;
  for (const auto& folder : init.workspaceFolders)
    addWorkspaceFolder(folder.uri);
  if (init.workspaceFolders.empty() && init.rootUri)
    addWorkspaceFolder(*init.rootUri);
  Json capabilities = {
      {"positionEncoding", "utf-16"},
      {"textDocumentSync",
       {{"openClose", true}, {"change", 1}, {"save", {{"includeText", false}}}}},
      {"hoverProvider", true},
      {"inlayHintProvider", {{"resolveProvider", false}}},
      // Advertised to every client: Neovim 0.7 uses code lenses without announcing them.
      {"codeLensProvider", {{"resolveProvider", false}}},
      {"workspace", {{"workspaceFolders", {{"supported", true}, {"changeNotifications", true}}}}},
      {"experimental",
       {{"wavecast", {{"protocolVersion", kProtocolVersion}, {"methods", customMethods()}}}}}};
  return Json{{"capabilities", capabilities},
              {"serverInfo", {{"name", "wavecast"}, {"version", options_.version}}}};
}

void LanguageServer::initialized(ClientId client, const Json&) {
  pullConfiguration(client);
}

std::optional<Json> LanguageServer::shutdown(ClientId client, const Json&, const Json&) {
  clients_.at(client).shutdown = true;
  return Json(nullptr);
}

void LanguageServer::exit(ClientId client, const Json&) {
  int code = clients_.at(client).shutdown ? 0 : 1;
  clients_.at(client).sink->close();
  if (onExit)
    onExit(client, code);
}

// ---------------------------------------------------------------------------
// Settings

void LanguageServer::pullConfiguration(ClientId client) {
  if (!clients_.at(client).capabilities.configuration)
    return;
  sendRequest(
      client, "workspace/configuration", {{"items", {{{"section", "wavecast"}}}}},
      [this, client](const Response& response) {
        auto* result = std::get_if<Json>(&response.outcome);
        if (!result || !result->is_array() || result->empty() || !result->front().is_object())
          return;
        try {
          applySettings(result->front(), "workspace/configuration[wavecast]");
        } catch (const RpcError& error) {
          send(client, encodeNotification(
                           "window/showMessage",
                           {{"type", 1}, {"message", std::string("wavecast: ") + error.what()}}));
        }
      });
}

void LanguageServer::applySettings(const Json& object, std::string_view where) {
  Settings merged = settings_;
  mergeSettings(merged, object, where);
  std::vector<std::string> targets = targets_;
  if (merged.targets != settings_.targets || targets.empty()) {
    try {
      targets = merged.targets.empty() ? analyzer_.defaultTargets()
                                       : analyzer_.resolveTargets(merged.targets);
    } catch (const UnknownGpuError& error) {
      throw unknownGpuError(error);
    }
  }
  bool rerun = targets != targets_ || merged.batchSize != settings_.batchSize ||
               merged.pythonEnv != settings_.pythonEnv;
  bool redisplay = merged.lineDiagnostics != settings_.lineDiagnostics;
  settings_ = std::move(merged);
  targets_ = std::move(targets);
  if (rerun)
    reanalyzeEntriesWithResults();
  if (redisplay)
    publishDiagnostics();
}

void LanguageServer::didChangeConfiguration(ClientId client, const Json& params) {
  const Json settings = params.is_object() ? params.value("settings", Json()) : Json();
  if (settings.is_object() && settings.contains("wavecast"))
    applySettings(settings["wavecast"], "params.settings.wavecast");
  else
    pullConfiguration(client); // VS Code's pull model sends no values
}

void LanguageServer::didChangeWorkspaceFolders(ClientId, const Json& params) {
  const WorkspaceFoldersChange change = workspaceFoldersChangeFromJson(params);
  for (const auto& folder : change.removed)
    if (auto path = uriToPath(folder.uri))
      workspaceFolders_.erase(canonicalPath(*path));
  for (const auto& folder : change.added)
    addWorkspaceFolder(folder.uri);
  runAnalysesBlockedBySaves(); // a folder gone may unblock an entry
}

void LanguageServer::addWorkspaceFolder(const std::string& uri) {
  if (auto path = uriToPath(uri))
    workspaceFolders_.insert(canonicalPath(*path));
}

std::string LanguageServer::workspaceFolderOf(const std::string& path) const {
  std::string best;
  for (const auto& folder : workspaceFolders_) {
    const bool inside = path.size() > folder.size() &&
                        path.compare(0, folder.size(), folder) == 0 &&
                        (folder.back() == '/' || path[folder.size()] == '/');
    if (inside && folder.size() > best.size())
      best = folder;
  }
  return best;
}

// ---------------------------------------------------------------------------
// Documents

const LanguageServer::Document* LanguageServer::document(const std::string& uri) const {
  auto it = documents_.find(uri);
  return it == documents_.end() ? nullptr : &it->second;
}

std::shared_ptr<const LineMap> LanguageServer::lineMapFor(const std::string& uri,
                                                          const IndexedResult& result) const {
  const Document* doc = document(uri);
  if (!doc)
    return nullptr;
  if (doc->lineMap && doc->lineMap->sequence == result.sequence &&
      doc->lineMap->version == doc->version)
    return doc->lineMap->map;
  std::shared_ptr<const LineMap> map;
  auto analysed = result.analysedText.find(doc->path);
  if (analysed != result.analysedText.end() && analysed->second != doc->text)
    map = std::make_shared<LineMap>(LineMap::between(analysed->second, doc->text));
  doc->lineMap = Document::CachedLineMap{result.sequence, doc->version, map};
  return map;
}

std::string LanguageServer::requirePath(const std::string& uri) const {
  if (const Document* doc = document(uri))
    return doc->path;
  auto path = uriToPath(uri);
  if (!path)
    throwInvalidParams("only file:// URIs can be analysed, got " + uri);
  return canonicalPath(*path);
}

void LanguageServer::didOpen(ClientId client, const Json& params) {
  DidOpenParams open = didOpenFromJson(params);
  const std::string& uri = open.textDocument.uri;
  std::string path = requirePath(uri);
  Document& doc = documents_[uri];
  doc.path = path;
  doc.text = open.textDocument.text;
  doc.lineMap.reset();
  doc.version = open.textDocument.version;
  doc.dirty = false;
  clients_.at(client).openDocuments.insert(uri);
  // Results cached for this exact content are shown at once; nothing is run.
  auto entry = entries_.find(uri);
  bool hasResults = entry != entries_.end() && entry->second.result;
  if (!hasResults && definesProviders(doc.text)) {
    auto content = readFile(doc.path);
    if (content) {
      const AnalysisRequest request{doc.path, settings_.batchSize, targets_, settings_.pythonEnv};
      if (auto cached = cache_.peek(cacheKey(*content, request))) {
        Entry& created = entries_[uri];
        created.path = doc.path;
        created.result = cached;
        created.state = ResultsState::Ready;
        created.contentVersion = doc.version;
        resultsChanged(uri);
      }
    }
  }
}

void LanguageServer::didChange(ClientId, const Json& params) {
  DidChangeParams change = didChangeFromJson(params);
  auto it = documents_.find(change.uri);
  if (it == documents_.end())
    throwInvalidParams("didChange for a document that is not open: " + change.uri);
  for (const auto& item : change.contentChanges)
    applyChange(it->second.text, item);
  it->second.version = change.version;
  it->second.dirty = true;
}

std::vector<std::string> LanguageServer::unsavedFilesBlocking(const std::string& uri) const {
  const Document* entry = document(uri);
  const auto entryPath = entry ? std::optional<std::string>(entry->path) : uriToPath(uri);
  const std::string folder = entryPath ? workspaceFolderOf(canonicalPath(*entryPath)) : "";
  std::vector<std::string> dirty;
  for (const auto& open : documents_) {
    const Document& doc = open.second;
    if (doc.dirty && isPythonSource(doc.path) &&
        (folder.empty() || workspaceFolderOf(doc.path) == folder))
      dirty.push_back(fs::path(doc.path).filename().string());
  }
  return dirty;
}

void LanguageServer::didSave(ClientId, const Json& params) {
  DidSaveParams save = didSaveFromJson(params);
  std::string path = requirePath(save.uri);
  auto it = documents_.find(save.uri);
  if (it != documents_.end()) {
    it->second.dirty = false;
    if (save.text)
      it->second.text = *save.text;
    it->second.lineMap.reset();
  }
  if (settings_.trigger == AnalysisTrigger::Manual)
    return;
  std::vector<std::string> toAnalyze;
  std::string text = it != documents_.end() ? it->second.text : readFile(path).value_or("");
  if (definesProviders(text))
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
    sendStatus("idle", "analysis waits until these files are saved: " + names);
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
    documents_.erase(close.uri); // closing without saving drops the unsaved edits
  runAnalysesBlockedBySaves();
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

// ---------------------------------------------------------------------------
// Analysis

void LanguageServer::startAnalysis(const std::string& uri, std::chrono::milliseconds delay) {
  std::string path = requirePath(uri);
  auto content = readFile(path);
  if (!content)
    throwInvalidParams("cannot read " + path + ": the file must exist on disk");
  Entry& entry = entries_[uri];
  entry.path = path;
  AnalysisRequest request{path,
                          entry.batchSizeOverride ? entry.batchSizeOverride : settings_.batchSize,
                          targets_, settings_.pythonEnv};
  const Document* doc = document(uri);
  entry.versionAtRequest = doc ? std::optional<int64_t>(doc->version) : std::nullopt;
  entry.cacheKeyAtRequest = cacheKey(*content, request);
  entry.textAtRequest = *content;

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

void LanguageServer::reanalyzeEntriesWithResults() {
  for (const auto& [uri, entry] : entries_) {
    if (!entry.result && !entry.error)
      continue;
    try {
      startAnalysis(uri, std::chrono::milliseconds(0));
    } catch (const RpcError& error) {
      if (log)
        log(std::string("re-analysis skipped: ") + error.what());
    }
  }
}

void LanguageServer::analysisStarted(const std::string& uri) {
  std::string name = fs::path(requirePath(uri)).filename().string();
  sendStatus("analyzing", "analysing " + name);
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
  sendStatus("analyzing", message);
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

void LanguageServer::sendStatus(const std::string& state, const std::string& message) {
  sendToAll(methods::kStatus, toJson(Status{state, message, std::nullopt}));
}

void LanguageServer::analysisFinished(const std::string& uri, const AnalysisRequest& request,
                                      AnalysisOutcome outcome) {
  Entry& entry = entries_[uri];
  entry.contentVersion = entry.versionAtRequest;
  if (auto* output = std::get_if<AnalysisOutput>(&outcome)) {
    auto indexed = std::make_shared<IndexedResult>();
    indexed->output = std::move(*output);
    indexed->sequence = ++resultSequence_;
    std::map<std::string, std::string> canonical;
    for (size_t i = 0; i < indexed->output.prediction.lines.size(); ++i) {
      const SourceLocation& loc = indexed->output.prediction.lines[i].loc;
      auto found = canonical.find(loc.file);
      if (found == canonical.end())
        found = canonical.emplace(loc.file, canonicalPath(loc.file)).first;
      indexed->linesByFile[found->second][loc.line] = i;
    }
    for (auto& file : indexed->output.sourceFiles)
      file = canonicalPath(file);
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
    cache_.insert(entry.cacheKeyAtRequest, indexed, std::move(sourceHashes));
  } else {
    entry.error = std::get<ProfileError>(std::move(outcome));
    entry.state = ResultsState::Error;
  }
  resultsChanged(uri);
}

void LanguageServer::analysisCancelled(const std::string& uri) {
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
  std::string message = failed ? name + ": " + entry.error->message : name + ": results ready";
  endProgress(message);
  sendStatus(failed ? "error" : "idle", message);
  sendToAll(methods::kResultsChanged,
            {{"uri", uri},
             {"state", toString(entry.state)},
             {"summaries",
              entry.result ? summariesJson(entry.result->output.prediction) : Json::array()}});
  for (auto& [id, client] : clients_) {
    if (!client.initialized)
      continue;
    if (client.capabilities.inlayHintRefresh)
      sendRequest(id, "workspace/inlayHint/refresh", nullptr, nullptr);
    if (client.capabilities.codeLensRefresh)
      sendRequest(id, "workspace/codeLens/refresh", nullptr, nullptr);
  }
  Json reply = toJson(resultsOf(uri));
  for (const auto& [client, id] : entry.waiters)
    send(client, encodeResult(id, reply));
  entry.waiters.clear();
}

// ---------------------------------------------------------------------------
// Views of the results

std::shared_ptr<const IndexedResult> LanguageServer::resultFor(const std::string& path) const {
  std::shared_ptr<const IndexedResult> best;
  for (const auto& [uri, entry] : entries_) {
    if (!entry.result)
      continue;
    if (entry.path == path)
      return entry.result; // the file's own analysis wins
    if (entry.result->linesByFile.count(path) && (!best || entry.result->sequence > best->sequence))
      best = entry.result;
  }
  return best;
}

Results LanguageServer::resultsOf(const std::string& uri) const {
  Results out;
  out.uri = uri;
  auto it = entries_.find(uri);
  if (it == entries_.end())
    return out;
  const Entry& entry = it->second;
  out.state = entry.state;
  out.contentVersion = entry.contentVersion;
  if (entry.result)
    out.prediction = entry.result->output.predictionJson;
  if (entry.error)
    out.error = errorInfo(*entry.error);
  return out;
}

std::vector<Diagnostic> LanguageServer::diagnosticsFor(const std::string& path) const {
  std::vector<Diagnostic> out;
  std::optional<std::string> text;
  auto lineRange = [&](int line) { // 1-based line -> its whole range
    if (!text) {
      text = "";
      for (const auto& [uri, doc] : documents_)
        if (doc.path == path)
          text = doc.text;
      if (text->empty())
        text = readFile(path).value_or("");
    }
    int index = std::max(0, line - 1);
    return Range{{index, 0}, {index, utf16Length(lineOf(*text, index))}};
  };
  for (const auto& [uri, entry] : entries_) {
    if (entry.error) {
      std::string errorPath =
          entry.error->file.empty() ? entry.path : canonicalPath(entry.error->file);
      if (errorPath == path)
        out.push_back({lineRange(entry.error->line), DiagnosticSeverity::Error, entry.error->kind,
                       errorMessage(*entry.error)});
    }
    if (entry.result && entry.path == path && entry.state != ResultsState::Error) {
      const Prediction& prediction = entry.result->output.prediction;
      std::string oom = outOfMemoryMessage(prediction);
      if (!oom.empty()) {
        auto input = entry.result->output.providerLines.find("input");
        int line = input == entry.result->output.providerLines.end() ? 1 : input->second;
        out.push_back({lineRange(line), DiagnosticSeverity::Warning, "out_of_memory", oom});
      }
    }
  }
  if (settings_.lineDiagnostics) {
    if (auto result = resultFor(path)) {
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
  for (const auto& [uri, doc] : documents_)
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
    PublishDiagnosticsParams params{uri, std::nullopt, diagnosticsFor(path)};
    if (params.diagnostics.empty() && !diagnosedUris_.count(uri))
      continue;
    if (!params.diagnostics.empty())
      published.insert(uri);
    sendToAll("textDocument/publishDiagnostics", toJson(params));
  }
  diagnosedUris_ = std::move(published);
}

bool LanguageServer::lineCodeLensFor(ClientId client) const {
  if (settings_.lineCodeLens)
    return *settings_.lineCodeLens;
  return !clients_.at(client).capabilities.inlayHint;
}

std::optional<Json> LanguageServer::hover(ClientId, const Json&, const Json& params) {
  TextDocumentPositionParams at = positionParamsFromJson(params);
  std::string path = requirePath(at.uri);
  auto result = resultFor(path);
  if (!result)
    return Json(nullptr);
  auto lines = result->linesByFile.find(path);
  if (lines == result->linesByFile.end())
    return Json(nullptr);
  int analysedLine = at.position.line;
  if (auto map = lineMapFor(at.uri, *result)) {
    auto before = map->toBefore(at.position.line);
    if (!before)
      return Json(nullptr); // an edited line: its old figures would mislead
    analysedLine = *before;
  }
  auto line = lines->second.find(analysedLine + 1);
  if (line == lines->second.end())
    return Json(nullptr);
  const Prediction& prediction = result->output.prediction;
  const Document* doc = document(at.uri);
  int length = doc ? utf16Length(lineOf(doc->text, at.position.line)) : 0;
  return toJson(Hover{lineHover(prediction, prediction.lines[line->second]),
                      Range{{at.position.line, 0}, {at.position.line, length}}});
}

std::optional<Json> LanguageServer::inlayHint(ClientId, const Json&, const Json& params) {
  InlayHintParams at = inlayHintParamsFromJson(params);
  std::string path = requirePath(at.uri);
  Json hints = Json::array();
  auto result = resultFor(path);
  if (!result)
    return hints;
  auto lines = result->linesByFile.find(path);
  if (lines == result->linesByFile.end())
    return hints;
  const Document* doc = document(at.uri);
  std::string text = doc ? doc->text : readFile(path).value_or("");
  const Prediction& prediction = result->output.prediction;
  const auto map = lineMapFor(at.uri, *result);
  for (const auto& [analysedLine, index] : lines->second) {
    const std::optional<int> line = map ? map->toAfter(analysedLine - 1) : analysedLine - 1;
    if (!line || *line < at.range.start.line || *line > at.range.end.line)
      continue; // edited since the analysis, or outside the range asked for
    hints.push_back(toJson(InlayHint{{*line, utf16Length(lineOf(text, *line))},
                                     lineLabel(prediction, prediction.lines[index]),
                                     "",
                                     true}));
  }
  return hints;
}

std::optional<Json> LanguageServer::codeLens(ClientId client, const Json&, const Json& params) {
  DocumentParams at = documentParamsFromJson(params);
  std::string path = requirePath(at.uri);
  Json lenses = Json::array();
  auto entry = entries_.find(at.uri);
  Json arguments = Json::array({at.uri});
  if (entry != entries_.end() && entry->second.result) {
    const AnalysisOutput& output = entry->second.result->output;
    const auto map = lineMapFor(at.uri, *entry->second.result);
    auto providerLine = [&](const char* name) {
      auto it = output.providerLines.find(name);
      const int line = it == output.providerLines.end() ? 0 : std::max(0, it->second - 1);
      // An edited def line keeps its old number: the lens has to sit somewhere.
      return map ? map->toAfter(line).value_or(line) : line;
    };
    int iteration = providerLine("iteration");
    for (const auto& summary : output.prediction.summaries)
      lenses.push_back(
          toJson(CodeLens{{{iteration, 0}, {iteration, 0}},
                          {summaryTitle(summary), "wavecast.showResults", arguments}}));
    int input = providerLine("input");
    lenses.push_back(
        toJson(CodeLens{{{input, 0}, {input, 0}},
                        {memoryTitle(output.prediction), "wavecast.setBatchSize", arguments}}));
  }
  if (lineCodeLensFor(client)) {
    if (auto result = resultFor(path)) {
      auto lines = result->linesByFile.find(path);
      const auto map = lineMapFor(at.uri, *result);
      if (lines != result->linesByFile.end())
        for (const auto& [analysedLine, index] : lines->second) {
          const std::optional<int> line = map ? map->toAfter(analysedLine - 1) : analysedLine - 1;
          if (line)
            lenses.push_back(toJson(CodeLens{
                {{*line, 0}, {*line, 0}},
                {lineLabel(result->output.prediction, result->output.prediction.lines[index]),
                 "wavecast.showResults", arguments}}));
        }
    }
  }
  return lenses;
}

// ---------------------------------------------------------------------------
// wavecast/* methods

std::optional<Json> LanguageServer::listGpus(ClientId, const Json&, const Json&) {
  Json gpus = Json::array();
  for (const auto& spec : analyzer_.gpus())
    gpus.push_back(toJson(gpuInfo(spec)));
  return Json{{"gpus", gpus}, {"targets", targets_}};
}

std::optional<Json> LanguageServer::setTargets(ClientId, const Json&, const Json& params) {
  SetTargetsParams request = setTargetsFromJson(params);
  std::vector<std::string> targets;
  try {
    targets = analyzer_.resolveTargets(request.gpus);
  } catch (const UnknownGpuError& error) {
    throw unknownGpuError(error);
  }
  if (targets != targets_) {
    targets_ = targets;
    reanalyzeEntriesWithResults();
  }
  return Json{{"targets", targets_}};
}

std::optional<Json> LanguageServer::setBatchSize(ClientId, const Json&, const Json& params) {
  SetBatchSizeParams request = setBatchSizeFromJson(params);
  requirePath(request.uri);
  Entry& entry = entries_[request.uri];
  entry.batchSizeOverride = request.batchSize;
  startAnalysis(request.uri, std::chrono::milliseconds(0));
  return Json::object();
}

std::optional<Json> LanguageServer::analyze(ClientId client, const Json& id, const Json& params) {
  AnalyzeParams request = analyzeFromJson(params);
  requirePath(request.uri);
  if (request.batchSize)
    entries_[request.uri].batchSizeOverride = request.batchSize;
  startAnalysis(request.uri, std::chrono::milliseconds(0));
  Entry& entry = entries_.at(request.uri);
  if (entry.state != ResultsState::Analyzing)
    return toJson(resultsOf(request.uri)); // served from the cache
  entry.waiters.emplace_back(client, id);
  return std::nullopt;
}

std::optional<Json> LanguageServer::results(ClientId, const Json&, const Json& params) {
  return toJson(resultsOf(resultsParamsFromJson(params).uri));
}

void LanguageServer::cancelRequest(ClientId client, const Json& params) {
  const Json& id = requireMember(requireObject(params, "params"), "id", "params");
  for (auto& [uri, entry] : entries_) {
    auto waiter = std::find_if(entry.waiters.begin(), entry.waiters.end(),
                               [&](const auto& w) { return w.first == client && w.second == id; });
    if (waiter == entry.waiters.end())
      continue;
    entry.waiters.erase(waiter);
    send(client, encodeError(id, {ErrorCode::RequestCancelled,
                                  "wavecast/analyze was cancelled; the analysis goes on and "
                                  "its results arrive through wavecast/resultsChanged",
                                  nullptr}));
    return;
  }
}

} // namespace wavecast::lsp
