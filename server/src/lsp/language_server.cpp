#include "lsp/language_server.h"

#include "lsp/files.h"
#include "lsp/views.h"
#include "presentation.h"
#include "wavecast/protocol/json_read.h"

#include <algorithm>

namespace wavecast::lsp {

using namespace protocol;

namespace {

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

RpcError unknownGpuError(const UnknownGpuError& error) {
  return RpcError(ErrorCode::InvalidParams, error.what(),
                  Json{{"suggestions", error.suggestions()}});
}

} // namespace

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
  layouts_ = analyzer_.resolveLayouts(settings_.parallelTargets);
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
      documents_.close(uri);
  }
  for (auto& [uri, entry] : entries_)
    entry.waiters.erase(std::remove_if(entry.waiters.begin(), entry.waiters.end(),
                                       [&](const auto& w) { return w.first == client; }),
                        entry.waiters.end());
  runAnalysesBlockedBySaves();
}

void LanguageServer::inputEnded(ClientId client) {
  cancelWaiters(client, "the client's input ended, so the connection closes (over stdio the "
                        "daemon exits) before the analysis finishes");
}

void LanguageServer::cancelWaiters(ClientId client, const std::string& why) {
  for (auto& [uri, entry] : entries_) {
    auto waiter = entry.waiters.begin();
    while (waiter != entry.waiters.end()) {
      if (waiter->first != client) {
        ++waiter;
        continue;
      }
      send(client,
           encodeError(waiter->second, {ErrorCode::RequestCancelled,
                                        "wavecast/analyze was cancelled: " + why, nullptr}));
      waiter = entry.waiters.erase(waiter);
    }
  }
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
  logLine(LogLevel::Info, "client " + std::to_string(client) + ": " + message);
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
    logLine(LogLevel::Error, std::string(what) + " failed: " + error.what());
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
    logLine(LogLevel::Info, "client " + std::to_string(client) + ": " + error->error.message);
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
  const auto started = std::chrono::steady_clock::now();
  std::string what;
  if (auto* request = std::get_if<Request>(&message)) {
    what = "request " + request->method;
    handleRequest(client, *request);
  } else if (auto* notification = std::get_if<Notification>(&message)) {
    what = "notification " + notification->method;
    handleNotification(client, *notification);
  } else {
    what = "response";
    handleResponse(client, std::get<Response>(message));
  }
  // One line per message, as clangd's trace spans: what it was and how long it took.
  if (log)
    logLine(LogLevel::Debug, what + " from client " + std::to_string(client) + ": " +
                                 formatMs(std::chrono::duration<double, std::milli>(
                                              std::chrono::steady_clock::now() - started)
                                              .count()));
}

void LanguageServer::logLine(LogLevel level, const std::string& line) const {
  if (log)
    log(level, line);
}

const char* toString(LogLevel level) {
  switch (level) {
  case LogLevel::Error:
    return "error";
  case LogLevel::Info:
    return "info";
  case LogLevel::Debug:
    return "debug";
  }
  return "info";
}

std::optional<LogLevel> logLevelFromString(std::string_view text) {
  for (const LogLevel level : {LogLevel::Error, LogLevel::Info, LogLevel::Debug})
    if (text == toString(level))
      return level;
  return std::nullopt;
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
    if (notification.method.rfind("$/", 0) != 0)
      logLine(LogLevel::Info, "ignoring unknown notification " + notification.method);
    return;
  }
  try {
    (this->*handler->second)(client, notification.params);
  } catch (const std::exception& error) {
    logLine(LogLevel::Error, notification.method + ": " + error.what());
    send(client, encodeNotification("window/logMessage",
                                    toJson(ShowMessageParams{MessageType::Error,
                                                             "wavecast: " + notification.method +
                                                                 ": " + error.what()})));
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
  applySettings(client, options.settings, "params.initializationOptions");
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
       {{"wavecast", {{"protocol_version", kProtocolVersion}, {"methods", customMethods()}}}}}};
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
  cancelWaiters(client, "the client sent exit before the analysis finished");
  clients_.at(client).sink->close();
  if (onExit)
    onExit(client, code);
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
  if (entry.state != ResultsState::Analyzing) { // served from the cache
    send(client, encodeResultText(id, toJsonText(resultsOf(entries_, request.uri))));
    return std::nullopt;
  }
  entry.waiters.emplace_back(client, id);
  return std::nullopt;
}

std::optional<Json> LanguageServer::results(ClientId client, const Json& id, const Json& params) {
  // The results JSON is spliced in as written, not parsed into a tree and written again.
  const ResultsParams request = resultsParamsFromJson(params);
  send(client, encodeResultText(id, toJsonText(resultsOf(entries_, request.uri, {request.ops}))));
  return std::nullopt;
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
