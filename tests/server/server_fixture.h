// The language server under test: one recording client over a fake analyzer, with
// helpers to speak LSP to it and run its event loop (language_server_test.cpp,
// settings_test.cpp).
#pragma once

#include "fake_analyzer.h"
#include "lsp/language_server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <random>

namespace wavecast::lsp::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using protocol::encodeNotification;
using protocol::encodeRequest;

class RecordingSink : public ClientSink {
public:
  void send(std::string body) override { messages.push_back(Json::parse(body)); }
  void close() override { closed = true; }
  void authenticated() override { wasAuthenticated = true; }
  std::vector<Json> messages;
  bool closed = false;
  bool wasAuthenticated = false;
};

inline const char* const kScript = "def wavecast_model():\n"
                                   "    return Net()\n"
                                   "    y = conv(x)\n"
                                   "\n"
                                   "    opt.step()\n"
                                   "\n"
                                   "def wavecast_input(batch_size=32):\n"
                                   "    return x\n"
                                   "def wavecast_iteration(model):\n"
                                   "    pass\n";

class ServerTest : public ::testing::Test {
protected:
  ServerTest() : work_(boost::asio::make_work_guard(io_)) {
    dir_ = fs::temp_directory_path() /
           ("wavecast-server-test-" + std::to_string(std::random_device()()));
    fs::create_directories(dir_);
    dir_ = fs::canonical(dir_);
    writeFile("train.py", kScript);
    writeFile("model.py", "import torch\n");
    ServerOptions options;
    options.version = "test";
    options.defaults.debounceMs = 20;
    options.token = "secret";
    options.tokenSource = "the test";
    server_ = std::make_unique<LanguageServer>(io_, analyzer_, options);
    server_->onExit = [this](ClientId, int code) { exitCode_ = code; };
    sink_ = std::make_shared<RecordingSink>();
    client_ = server_->addClient(sink_, false);
  }
  ~ServerTest() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  void writeFile(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::string uri(const std::string& name) const {
    return protocol::pathToUri((dir_ / name).string());
  }

  Json send(ClientId client, RecordingSink& sink, const std::string& method, const Json& params) {
    int id = nextId_++;
    size_t before = sink.messages.size();
    server_->receive(client, encodeRequest(id, method, params));
    io_.poll();
    for (size_t i = before; i < sink.messages.size(); ++i)
      if (sink.messages[i].value("id", Json()) == id && !sink.messages[i].contains("method"))
        return sink.messages[i];
    return nullptr;
  }
  Json request(const std::string& method, const Json& params) {
    return send(client_, *sink_, method, params);
  }
  void notify(const std::string& method, const Json& params) {
    server_->receive(client_, encodeNotification(method, params));
    io_.poll();
  }
  Json initialize(const Json& options = Json::object(), Json capabilities = nullptr) {
    if (capabilities.is_null())
      capabilities = {
          {"textDocument", {{"inlayHint", Json::object()}}},
          {"workspace",
           {{"inlayHint", {{"refreshSupport", true}}}, {"codeLens", {{"refreshSupport", true}}}}},
          {"window", {{"workDoneProgress", true}}}};
    Json reply = request("initialize", {{"processId", nullptr},
                                        {"rootUri", protocol::pathToUri(dir_.string())},
                                        {"capabilities", capabilities},
                                        {"initializationOptions", options}});
    notify("initialized", Json::object());
    return reply;
  }
  void open(const std::string& name, const std::string& text) {
    notify("textDocument/didOpen",
           {{"textDocument",
             {{"uri", uri(name)}, {"languageId", "python"}, {"version", 1}, {"text", text}}}});
  }
  void save(const std::string& name) {
    notify("textDocument/didSave", {{"textDocument", {{"uri", uri(name)}}}});
  }
  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline)
      io_.run_for(2ms);
    return done();
  }
  std::vector<Json> sent(const std::string& method) const {
    std::vector<Json> out;
    for (const auto& message : sink_->messages)
      if (message.value("method", "") == method)
        out.push_back(message);
    return out;
  }
  bool resultsReady(const std::string& name) const {
    for (const auto& message : sent("wavecast/resultsChanged"))
      if (message["params"]["uri"] == uri(name) && message["params"]["state"] != "analyzing")
        return true;
    return false;
  }
  // Saves train.py and lets the resulting analysis finish.
  void analyzeTrain() {
    size_t before = sent("wavecast/resultsChanged").size();
    int started = analyzer_.started();
    save("train.py");
    ASSERT_TRUE(waitStarted(started + 1));
    analyzer_.release();
    ASSERT_TRUE(runUntil([&] {
      auto changes = sent("wavecast/resultsChanged");
      return changes.size() > before && changes.back()["params"]["state"] != "analyzing";
    }));
  }
  // Runs the event loop (debounce timers) until the analyzer saw `count` analyses.
  bool waitStarted(int count) {
    return runUntil([&] { return analyzer_.started() >= count; });
  }
  Json hoverAt(int line) {
    return request("textDocument/hover", {{"textDocument", {{"uri", uri("train.py")}}},
                                          {"position", {{"line", line}, {"character", 4}}}});
  }
  static int errorCode(const Json& reply) { return reply.at("error").at("code").get<int>(); }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  wavecast::lsp::testing::FakeAnalyzer analyzer_;
  std::unique_ptr<LanguageServer> server_;
  std::shared_ptr<RecordingSink> sink_;
  ClientId client_ = 0;
  fs::path dir_;
  int nextId_ = 1;
  std::optional<int> exitCode_;
};

} // namespace wavecast::lsp::testing
