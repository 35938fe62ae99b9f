// libFuzzer target: the language server's framing and dispatch, every handler
// and the wavecast/* params behind them, with an analyzer that answers at once.
// No input may crash, hang, leak or trip a sanitizer; every message the server
// sends must decode; every request but wavecast/analyze is answered once
// before its handler returns, and no response names a request never sent.
//
// An input is a sequence of lines, each one message:
//   {"jsonrpc":"2.0",...}   a body for client 1 (stdio: trusted), framed here
//   @2 {...}                a body for client 2 (TCP: must present the token)
//   @raw BYTES              bytes for client 1's frame decoder as they are,
//                           with the four characters \r\n standing for CRLF
//   @wait                   let queued analyses finish and their results arrive
// FUZZ_SERVER_ECHO=1 in the environment prints what the server sends.
// Documents live in kFolder, which holds train.py (an entry with providers)
// and util.py (a plain module).
#include "fake_analyzer.h"
#include "lsp/language_server.h"
#include "wavecast/protocol/framing.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

using namespace wavecast;
using namespace wavecast::lsp;
using namespace wavecast::protocol;

namespace {

constexpr const char* kFolder = "/tmp/wavecast-fuzz-server";
constexpr const char* kToken = "fuzz-token";

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_server: %s\n", what.c_str());
  std::abort();
}

// Answers at once: a prediction, or an error at line 2 for odd batch sizes.
class ImmediateAnalyzer : public Analyzer {
public:
  AnalysisOutcome analyze(const AnalysisRequest& request, const ProgressCallback& progress,
                          const CancelToken& cancel) override {
    progress("tracing " + request.file);
    if (cancel.cancelled()) {
      ProfileError error;
      error.kind = ProfileErrorKind::Cancelled;
      error.message = "cancelled";
      return error;
    }
    if (request.batchSize && *request.batchSize % 2 != 0) {
      ProfileError error;
      error.kind = ProfileErrorKind::UserException;
      error.message = "ValueError: odd batch";
      error.file = request.file;
      error.line = 2;
      return error;
    }
    return testing::sampleOutput(request.file, request.batchSize.value_or(32));
  }
  const std::vector<DeviceSpec>& gpus() const override { return gpuSource_.gpus(); }
  std::vector<std::string> resolveTargets(const std::vector<std::string>& names) const override {
    return gpuSource_.resolveTargets(names);
  }
  std::vector<std::string> defaultTargets() const override { return gpuSource_.defaultTargets(); }
  std::vector<LayoutTarget>
  resolveLayouts(const std::vector<protocol::ParallelTargetSetting>& targets) const override {
    return gpuSource_.resolveLayouts(targets);
  }

private:
  testing::FakeAnalyzer gpuSource_; // its GPU list and name resolution only
};

// One client: keeps its own frame decoder (as the transport does) and checks
// what the server sends it.
class FuzzClient : public ClientSink, public std::enable_shared_from_this<FuzzClient> {
public:
  FuzzClient(boost::asio::io_context& io, LanguageServer& server, bool needsToken)
      : io_(io), server_(server) {
    if (needsToken)
      decoder_.setLimits(FramingLimits{8 * 1024, 64 * 1024});
  }
  void start(bool needsToken) { id_ = server_.addClient(shared_from_this(), needsToken); }

  void send(std::string body) override {
    if (std::getenv("FUZZ_SERVER_ECHO")) // to see what an input does: the server's replies
      std::fprintf(stderr, "server -> client %d: %s\n", id_, body.c_str());
    auto decoded = decodeMessage(body);
    auto* message = std::get_if<Message>(&decoded);
    if (!message)
      fail("the server sent a body it would refuse: " + body);
    if (auto* response = std::get_if<Response>(message)) {
      if (response->id.is_null())
        return;
      auto pending = pending_.find(response->id.dump());
      if (pending == pending_.end() || pending->second == 0)
        fail("a response to a request that was not sent or was answered already: " + body);
      --pending->second;
    }
  }
  void close() override {
    if (closing_)
      return;
    closing_ = true;
    // As the transport does: removed later, never from inside receive().
    boost::asio::post(io_, [self = shared_from_this()] { self->server_.removeClient(self->id_); });
  }
  void authenticated() override { decoder_.setLimits({}); }

  void feed(std::string_view bytes) {
    if (closing_)
      return;
    decoder_.feed(bytes);
    while (!closing_) {
      auto frame = decoder_.next();
      if (!frame)
        break;
      if (auto* body = std::get_if<std::string>(&*frame))
        deliver(*body);
      else
        server_.framingError(id_, std::get<FramingError>(*frame).message);
    }
  }

  void finish() {
    if (auto truncated = decoder_.finish(); truncated && !closing_)
      server_.framingError(id_, truncated->message);
  }

private:
  void deliver(const std::string& body) {
    // The id a reply must carry, if the server is to answer at once.
    std::optional<std::string> answerNow;
    auto decoded = decodeMessage(body);
    if (auto* error = std::get_if<DecodeError>(&decoded)) {
      if (!error->id.is_null())
        answerNow = error->id.dump();
    } else if (auto* request = std::get_if<Request>(&std::get<Message>(decoded))) {
      answerNow = request->id.dump();
      if (request->method == methods::kAnalyze)
        answerLater_ = true;
    }
    if (answerNow)
      ++pending_[*answerNow];
    const size_t before = answerNow ? pending_[*answerNow] : 0;
    server_.receive(id_, body);
    if (answerNow && !answerLater_ && pending_[*answerNow] != before - 1)
      fail("a request was not answered before its handler returned: " + body);
    answerLater_ = false;
  }

  boost::asio::io_context& io_;
  LanguageServer& server_;
  ClientId id_ = 0;
  FrameDecoder decoder_{FramingLimits{8 * 1024, 1024 * 1024}};
  std::map<std::string, size_t> pending_; // id -> requests with that id not yet answered
  bool answerLater_ = false;
  bool closing_ = false;
};

// Lets analyses queued by the last messages run and their results arrive. The
// analysis thread posts its handlers within moments of each other, so a quiet
// millisecond ends the wait (a slower one only makes the run less thorough).
void drain(boost::asio::io_context& io) {
  auto busy = boost::asio::make_work_guard(io); // wait for posts even when nothing is queued
  io.restart();
  while (io.run_one_for(std::chrono::milliseconds(1)) > 0) {
  }
}

std::string unescapeCrlf(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 4, "\\r\\n") == 0) {
      out += "\r\n";
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

void writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::filesystem::create_directories(kFolder);
  writeFile(std::filesystem::path(kFolder) / "train.py",
            "import util\n"
            "def wavecast_model():\n    return util.Net()\n"
            "def wavecast_input(batch_size=32):\n    return util.batch(batch_size)\n"
            "def wavecast_iteration(model, batch):\n    model(batch).sum().backward()\n");
  writeFile(std::filesystem::path(kFolder) / "util.py",
            "class Net:\n    pass\n\ndef batch(n):\n    return n\n");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  boost::asio::io_context io;
  ImmediateAnalyzer analyzer;
  ServerOptions options;
  options.version = "fuzz";
  options.token = kToken;
  options.tokenSource = "the fuzzer's token";
  options.defaults.debounceMs = 0;
  options.cacheEntries = 4; // small, so eviction runs too
  {
    LanguageServer server(io, analyzer, options);
    auto stdio = std::make_shared<FuzzClient>(io, server, false);
    auto tcp = std::make_shared<FuzzClient>(io, server, true);
    stdio->start(false);
    tcp->start(true);

    std::string_view input(reinterpret_cast<const char*>(data), size);
    while (!input.empty()) {
      const size_t end = std::min(input.find('\n'), input.size());
      std::string_view line = input.substr(0, end);
      input.remove_prefix(std::min(end + 1, input.size()));
      if (line == "@wait")
        drain(io);
      else if (line.rfind("@raw ", 0) == 0)
        stdio->feed(unescapeCrlf(line.substr(5)));
      else if (line.rfind("@2 ", 0) == 0)
        tcp->feed(encodeFrame(line.substr(3)));
      else
        stdio->feed(encodeFrame(line));
      io.restart();
      io.poll();
    }
    stdio->finish();
    tcp->finish();
    drain(io);
  }
  // The server is gone: handlers still queued find it dead and do nothing.
  io.restart();
  io.poll();
  return 0;
}
