#include "serve.h"

#include "cli/shared.h"
#include "lsp/language_server.h"
#include "lsp/profiling_analyzer.h"
#include "lsp/token.h"
#include "lsp/transport.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <fcntl.h>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace wavecast::cli {

namespace asio = boost::asio;

namespace {

CommandSpec serveSpec() {
  CommandSpec spec{
      "serve",
      "[--listen HOST:PORT] [options]",
      "Run the language server for editors (LSP over stdio, or TCP with --listen).",
      {{"listen", "HOST:PORT",
        "serve TCP clients instead of stdio (port 0 picks a free port); loopback only "
        "unless --allow-remote"},
       {"allow-remote", "", "allow --listen on a non-loopback address (a token is still required)"},
       {"token", "TOKEN", "the token TCP clients must send (default: generated)"},
       {"token-file", "FILE",
        "where the token is read from if it exists, else written (mode 0600); default "
        "$XDG_RUNTIME_DIR/wavecast/serve-PORT.token"},
       {"gpu", "NAME[,NAME...]", "default target GPUs (default: H100,A100,T4)"},
       {"gpu-file", "FILE", "extra or overriding GPU definitions (docs/gpus.md)"},
       {"batch-size", "N", "default batch size (default: the input provider's own)"},
       pythonEnvOption(),
       {"verbose", "", "show torch's own log messages (on stderr, the daemon's log)"},
       {"log-level", "LEVEL",
        "error, info (default) or debug: debug adds a line per request, notification and "
        "analysis with its duration"},
       {"trigger", "WHEN", "onSave (default) or manual: when documents are analysed"},
       {"debounce-ms", "MS", "wait this long after a save before analysing (default 0)"},
       {"mode", "MODE",
        "shape (default: no GPU needed) or measured (on this machine's GPU, scaled to the "
        "other targets)"},
       {"timeout", "SECONDS", "give up tracing after this long (default 120)"},
       {"trace-store", "DIR",
        "keep traces here between runs, so a script traced before shows its results at once "
        "(default $XDG_CACHE_HOME/wavecast/traces, or WAVECAST_TRACE_STORE; 'none' keeps "
        "none)"},
       {"roofline", "",
        "analytic model only (no learned per-op models, no installed calibrations)"},
       calibrationOption(),
       noCalibrationOption()},
      0,
      0};
  for (auto& option : precisionOptions())
    spec.options.push_back(std::move(option));
  return spec;
}

struct Endpoint {
  asio::ip::address address;
  unsigned short port = 0;
};

Endpoint parseListen(const std::string& text, bool allowRemote) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos)
    throw UsageError("--listen wants HOST:PORT, e.g. 127.0.0.1:7450");
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost")
    host = "127.0.0.1";
  boost::system::error_code error;
  Endpoint endpoint;
  endpoint.address = asio::ip::make_address(host, error);
  if (error)
    throw UsageError("--listen: '" + host + "' is not an IP address");
  int port = -1;
  try {
    port = std::stoi(text.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535)
    throw UsageError("--listen: the port must be a number from 0 to 65535");
  endpoint.port = static_cast<unsigned short>(port);
  if (!endpoint.address.is_loopback() && !allowRemote)
    throw UsageError("--listen " + text +
                     " would accept connections from other machines; pass --allow-remote to "
                     "mean it (clients still need the token), or use 127.0.0.1 and an SSH "
                     "tunnel");
  return endpoint;
}

lsp::ProfilingAnalyzerOptions analyzerOptions(const InstallLayout& layout,
                                              const CommandLine& args) {
  lsp::ProfilingAnalyzerOptions options;
  options.profiler = profilerOptions(layout, args);
  options.profiler.warmUp = true; // a daemon's worker starts before the first save
  options.predictor = predictorOptions(layout, args, loadGpuDatabase(layout, args));
  options.defaultTargets = splitList(args.value("gpu").value_or("H100,A100,T4"));
  if (auto timeout = args.positiveInt("timeout"))
    options.timeout = std::chrono::seconds(*timeout);
  const std::string store = args.value("trace-store").value_or(layout.userTraceStoreDir);
  if (store != kNoTraceStore)
    options.traceStore = std::make_shared<TraceStore>(store, WAVECAST_VERSION);
  return options;
}

protocol::Settings defaultSettings(const CommandLine& args) {
  protocol::Json settings = protocol::Json::object();
  if (auto batch = args.positiveInt("batch-size"))
    settings["batchSize"] = *batch;
  if (auto env = args.value("python-env"))
    settings["pythonEnv"] = *env;
  if (auto trigger = args.value("trigger"))
    settings["trigger"] = *trigger;
  if (auto mode = args.value("mode"))
    settings["mode"] = *mode;
  if (auto debounce = args.value("debounce-ms")) {
    try {
      settings["debounceMs"] = std::stoi(*debounce);
    } catch (const std::exception&) {
      throw UsageError("--debounce-ms wants a number of milliseconds");
    }
  }
  protocol::Settings out;
  try {
    protocol::mergeSettings(out, settings, "options");
  } catch (const protocol::RpcError& error) {
    throw UsageError(error.what());
  }
  return out;
}

int runServe(const CommandLine& args, const InstallLayout& layout) {
  std::optional<Endpoint> endpoint;
  if (auto listen = args.value("listen"))
    endpoint = parseListen(*listen, args.has("allow-remote"));
  else if (args.has("allow-remote") || args.has("token") || args.has("token-file"))
    throw UsageError("--allow-remote, --token and --token-file only apply with --listen");
  if (const auto token = args.value("token")) {
    try {
      lsp::checkTokenStrength(*token, "--token");
    } catch (const std::runtime_error& weak) {
      throw UsageError(weak.what());
    }
  }

  lsp::LogLevel logLevel = lsp::LogLevel::Info;
  if (const auto level = args.value("log-level")) {
    const auto parsed = lsp::logLevelFromString(*level);
    if (!parsed)
      throw UsageError("--log-level must be error, info or debug, not '" + *level + "'");
    logLevel = *parsed;
  }

  lsp::ProfilingAnalyzer analyzer(loadGpuDatabase(layout, args), analyzerOptions(layout, args));
  lsp::ServerOptions options;
  options.version = WAVECAST_VERSION;
  options.defaults = defaultSettings(args);

  asio::io_context io;
  lsp::LanguageServer server(io, analyzer, options);
  server.log = [logLevel](lsp::LogLevel level, const std::string& line) {
    if (level <= logLevel)
      std::cerr << "wavecast serve: " << line << "\n";
  };
  // SIGHUP too: an editor that quits hangs its language servers up (Emacs does), and
  // the daemon must still stop its worker and remove the worker's folder.
  asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  signals.async_wait([&](const boost::system::error_code&, int) { io.stop(); });
  std::signal(SIGPIPE, SIG_IGN);

  int exitCode = 0;
  std::unique_ptr<lsp::TcpListener> listener;
  if (!endpoint) {
    // The LSP stream gets private descriptors; fds 0/1 become /dev/null and
    // stderr, so nothing a child process prints can corrupt it.
    int input = ::fcntl(0, F_DUPFD_CLOEXEC, 3);
    int output = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (input < 0 || output < 0)
      throw CommandError("serve: stdin and stdout must be open");
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::close(devnull);
    }
    ::dup2(2, 1);
    server.onExit = [&](lsp::ClientId, int code) { exitCode = code; };
    lsp::startStreamClient(io, server, input, output, [&] { io.stop(); });
  } else {
    // Token first: a daemon must never listen without one.
    std::string tokenFile = args.value("token-file").value_or("");
    std::string token = args.value("token").value_or("");
    listener = std::make_unique<lsp::TcpListener>(
        io, server, asio::ip::tcp::endpoint(endpoint->address, endpoint->port));
    if (tokenFile.empty())
      tokenFile = lsp::defaultTokenPath(listener->port());
    if (token.empty()) {
      if (args.has("token-file") && ::access(tokenFile.c_str(), F_OK) == 0) {
        lsp::TokenFile file = lsp::readTokenFile(tokenFile);
        if (file.tooOpenWarning)
          std::cerr << "wavecast serve: warning: " << *file.tooOpenWarning << "\n";
        token = std::move(file.token);
      } else {
        token = lsp::generateToken();
        lsp::writeTokenFile(tokenFile, token);
      }
    }
    server.setToken(token, args.has("token") ? "the token given to wavecast serve --token"
                                             : "the first line of " + tokenFile);
    // One write, so a reader watching stderr never sees the address without its port.
    std::ostringstream announcement;
    announcement << "wavecast serve: listening on " << endpoint->address.to_string() << ":"
                 << listener->port() << "; clients authenticate with "
                 << (args.has("token") ? "the --token value" : "the token in " + tokenFile) << "\n";
    std::cerr << announcement.str() << std::flush;
  }
  for (;;) {
    try {
      io.run();
      break;
    } catch (const std::exception& error) {
      // Handlers guard themselves; this is the last line of defence for the daemon.
      std::cerr << "wavecast serve: internal error: " << error.what() << std::endl;
    }
  }
  return exitCode;
}

} // namespace

Command serveCommand() {
  return {serveSpec(), runServe, {}};
}

} // namespace wavecast::cli
