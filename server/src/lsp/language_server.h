// The language server: maps JSON-RPC methods to handlers and keeps all state
// (clients, documents, results, settings). Every event — a message, a finished
// analysis, a timer — runs on the io_context's thread, so nothing here locks.
// Transports hand it message bodies and give it a sink per client.
// language_server.cpp holds dispatch, lifecycle and the handlers;
// language_server_analysis.cpp the way from a save to results on every client.
#pragma once

#include "lsp/analyzer.h"
#include "lsp/document_store.h"
#include "lsp/entries.h"
#include "lsp/result_cache.h"
#include "lsp/scheduler.h"
#include "wavecast/protocol/jsonrpc.h"
#include "wavecast/protocol/lsp.h"
#include "wavecast/protocol/wavecast.h"

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace wavecast::lsp {

using protocol::Json;

// Where a client's outgoing messages go; implemented by the transports.
class ClientSink {
public:
  virtual ~ClientSink() = default;
  virtual void send(std::string body) = 0;
  // Stop reading from and close this client once queued output is written.
  virtual void close() = 0;
  // The client presented the server's token: lift the limits kept on strangers.
  virtual void authenticated() {}
};

struct ServerOptions {
  std::string version;     // reported in serverInfo
  std::string token;       // clients added with needsToken must present it
  std::string tokenSource; // where the user finds the token, for error messages
  protocol::Settings defaults;
  size_t cacheEntries = 64;
};

// How much the daemon says about itself: errors only, what happens (the default), or also
// each request's and analysis's duration.
enum class LogLevel { Error, Info, Debug };
const char* toString(LogLevel level);
std::optional<LogLevel> logLevelFromString(std::string_view text);

class LanguageServer {
public:
  LanguageServer(boost::asio::io_context& io, Analyzer& analyzer, ServerOptions options);
  ~LanguageServer();
  LanguageServer(const LanguageServer&) = delete;
  LanguageServer& operator=(const LanguageServer&) = delete;

  // The secret TCP clients present in initializationOptions.token, and where users find it.
  void setToken(std::string token, std::string source) {
    options_.token = std::move(token);
    options_.tokenSource = std::move(source);
  }
  ClientId addClient(std::shared_ptr<ClientSink> sink, bool needsToken);
  void receive(ClientId client, std::string_view body);
  void framingError(ClientId client, const std::string& message);
  // The client's input ended: its wavecast/analyze requests still waiting for an
  // analysis are answered with RequestCancelled, since its connection closes (and
  // over stdio the daemon exits) once the replies queued so far are written.
  void inputEnded(ClientId client);
  void removeClient(ClientId client);

  // Called when a client sends `exit`: 0 after `shutdown`, 1 otherwise (LSP rule).
  std::function<void(ClientId client, int exitCode)> onExit;
  // Diagnostics about the daemon itself (stderr in `wavecast serve`, filtered there by
  // --log-level); Debug lines time each request, notification and analysis.
  std::function<void(LogLevel level, const std::string& line)> log;

private:
  struct Progress {
    std::string token;
    bool created = false;
    bool ended = false;
  };
  struct Client {
    std::shared_ptr<ClientSink> sink;
    bool needsToken = false;
    bool initialized = false; // initialize answered
    bool shutdown = false;
    protocol::ClientCapabilities capabilities;
    std::map<std::string, std::function<void(const protocol::Response&)>> pendingReplies;
    int64_t nextRequestId = 1;
    std::optional<Progress> progress;
    std::set<std::string> openDocuments;
  };
  // nullopt: the handler answers later (or already did).
  using RequestHandler = std::optional<Json> (LanguageServer::*)(ClientId, const Json& id,
                                                                 const Json& params);
  using NotificationHandler = void (LanguageServer::*)(ClientId, const Json& params);

  // Dispatch.
  void guarded(const char* what, const std::function<void()>& action);
  void dispatch(ClientId client, std::string_view body);
  void handleRequest(ClientId client, const protocol::Request& request);
  void handleNotification(ClientId client, const protocol::Notification& notification);
  void handleResponse(ClientId client, const protocol::Response& response);
  // Answers `client`'s waiting wavecast/analyze requests with RequestCancelled, saying `why`.
  void cancelWaiters(ClientId client, const std::string& why);
  void send(ClientId client, std::string body);
  void sendToAll(const std::string& method, const Json& params);
  void sendRequest(ClientId client, const std::string& method, const Json& params,
                   std::function<void(const protocol::Response&)> onReply);

  // Requests.
  std::optional<Json> initialize(ClientId, const Json& id, const Json& params);
  std::optional<Json> shutdown(ClientId, const Json& id, const Json& params);
  std::optional<Json> hover(ClientId, const Json& id, const Json& params);
  std::optional<Json> inlayHint(ClientId, const Json& id, const Json& params);
  std::optional<Json> codeLens(ClientId, const Json& id, const Json& params);
  std::optional<Json> listGpus(ClientId, const Json& id, const Json& params);
  std::optional<Json> setTargets(ClientId, const Json& id, const Json& params);
  std::optional<Json> setBatchSize(ClientId, const Json& id, const Json& params);
  std::optional<Json> analyze(ClientId, const Json& id, const Json& params);
  std::optional<Json> results(ClientId, const Json& id, const Json& params);

  // Notifications.
  void initialized(ClientId, const Json& params);
  void exit(ClientId, const Json& params);
  void didOpen(ClientId, const Json& params);
  void didChange(ClientId, const Json& params);
  void didSave(ClientId, const Json& params);
  void didClose(ClientId, const Json& params);
  void didChangeConfiguration(ClientId, const Json& params);
  void didChangeWorkspaceFolders(ClientId, const Json& params);
  void cancelRequest(ClientId, const Json& params);

  // Analysis.
  void pullConfiguration(ClientId client);
  // Applies every well-formed setting; each wrong one keeps its value and is shown to
  // `client` once (until it changes).
  void applySettings(ClientId client, const Json& object, std::string_view where);
  void startAnalysis(const std::string& uri, std::chrono::milliseconds delay);
  // Shows what a trace stored by an earlier run predicts for the document, if there is
  // one (quietly: no progress, no state change when there is none).
  void showStoredResults(const std::string& uri);
  // Records in the entry of `uri` what an analysis of `path`, holding `content`, taking its
  // trace from `source`, is requested with.
  AnalysisRequest requestFor(const std::string& uri, const std::string& path,
                             const std::string& content, TraceSource source);
  // What analysing `path` with the current settings asks of the analyzer.
  AnalysisRequest analysisRequest(const std::string& path, std::optional<int64_t> batchSize) const;
  void reanalyzeEntriesWithResults();
  void runAnalysesBlockedBySaves();
  // Python documents with unsaved edits that the analysis of `uri` would read
  // stale from disk (the entry's own included): those in the entry's workspace
  // folder, or every one when the entry is in no known folder.
  std::vector<std::string> unsavedFilesBlocking(const std::string& uri) const;
  // The deepest known workspace folder holding `path`; empty when none does.
  std::string workspaceFolderOf(const std::string& path) const;
  void addWorkspaceFolder(const std::string& uri);
  void analysisStarted(const std::string& uri);
  void analysisProgress(const std::string& uri, const std::string& message);
  void analysisFinished(const std::string& uri, const AnalysisRequest& request,
                        AnalysisOutcome outcome);
  void analysisCancelled(const std::string& uri);
  void resultsChanged(const std::string& uri);
  void endProgress(const std::string& message);
  void sendStatus(protocol::ServerState state, const std::string& message);
  void logLine(LogLevel level, const std::string& line) const;

  // Views of the results (views.h makes them; these find their inputs).
  // Asks the clients that support it to fetch inlay hints and/or code lenses again.
  void refreshViews(bool inlayHints, bool codeLenses);
  void publishDiagnostics();
  bool lineCodeLensFor(ClientId client) const;
  std::string requirePath(const std::string& uri) const;

  boost::asio::io_context& io_;
  Analyzer& analyzer_;
  ServerOptions options_;
  protocol::Settings settings_;
  std::set<std::string> settingProblems_; // wrong values of the last settings applied, shown
  std::vector<std::string> targets_;      // canonical ids
  std::vector<LayoutTarget> layouts_;     // the settings' multi-GPU targets, resolved
  std::map<ClientId, Client> clients_;
  ClientId nextClientId_ = 1;
  DocumentStore documents_;
  Entries entries_;
  // When each running analysis started (analysisStarted), for its Debug log line.
  std::map<std::string, std::chrono::steady_clock::time_point> analysisStarts_;
  std::set<std::string> blockedBySaves_;   // entries waiting for other files to be saved
  std::set<std::string> workspaceFolders_; // canonical paths, from every client
  ResultCache cache_;
  std::set<std::string> diagnosedUris_; // uris with non-empty diagnostics published
  uint64_t resultSequence_ = 0;
  uint64_t progressSequence_ = 0;
  std::map<std::string, RequestHandler> requestHandlers_;
  std::map<std::string, NotificationHandler> notificationHandlers_;
  std::unique_ptr<AnalysisScheduler> scheduler_; // last: its thread calls back into this
};

} // namespace wavecast::lsp
