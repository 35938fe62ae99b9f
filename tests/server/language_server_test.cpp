#include "presentation.h"
#include "server_fixture.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace wavecast::lsp {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace testing;
using protocol::encodeNotification;
using protocol::encodeRequest;
using protocol::encodeResult;

TEST_F(ServerTest, RequestsBeforeInitializeAreRefused) {
  EXPECT_EQ(errorCode(hoverAt(2)), -32002);
  EXPECT_EQ(errorCode(request("wavecast/listGpus", nullptr)), -32002);
}

TEST_F(ServerTest, InitializeAdvertisesFeaturesAndTheWavecastProtocol) {
  Json reply = initialize({{"protocol_version", 2}});
  const Json& caps = reply["result"]["capabilities"];
  EXPECT_EQ(caps["textDocumentSync"]["change"], 1);
  EXPECT_EQ(caps["hoverProvider"], true);
  EXPECT_TRUE(caps.contains("inlayHintProvider"));
  EXPECT_TRUE(caps.contains("codeLensProvider"));
  EXPECT_EQ(caps["experimental"]["wavecast"]["protocol_version"], 2);
  auto methods = caps["experimental"]["wavecast"]["methods"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(methods.begin(), methods.end(), "wavecast/setTargets"), methods.end());
  EXPECT_EQ(reply["result"]["serverInfo"]["name"], "wavecast");
  EXPECT_EQ(errorCode(request("initialize", {{"capabilities", Json::object()}})), -32600);
}

TEST_F(ServerTest, ProtocolMismatchTellsWhichSideToUpdate) {
  Json reply = initialize({{"protocol_version", 3}});
  EXPECT_EQ(errorCode(reply), -32600);
  EXPECT_NE(reply["error"]["message"].get<std::string>().find("update the wavecast daemon"),
            std::string::npos);
  EXPECT_EQ(errorCode(hoverAt(2)), -32002); // still not initialized
}

TEST_F(ServerTest, AVersionOneClientIsToldToUpdate) {
  // Version 1 spelled the key in camelCase; the daemon must still read it to refuse.
  Json reply = initialize({{"protocolVersion", 1}});
  EXPECT_EQ(errorCode(reply), -32600);
  EXPECT_EQ(reply["error"]["message"],
            "wavecast protocol mismatch: the client speaks version 1, the daemon speaks version 2; "
            "update the editor extension/client.");
  EXPECT_EQ(reply["error"]["data"], Json({{"retry", false},
                                          {"client_protocol_version", 1},
                                          {"server_protocol_version", 2},
                                          {"update", "client"}}));
  EXPECT_EQ(errorCode(hoverAt(2)), -32002);
}

TEST_F(ServerTest, BadInputGetsTheRightErrorAndTheServerKeepsServing) {
  initialize();
  server_->receive(client_, "{not json");
  EXPECT_EQ(sink_->messages.back()["error"]["code"], -32700);
  EXPECT_TRUE(sink_->messages.back()["id"].is_null());
  server_->framingError(client_, "message header has no Content-Length");
  EXPECT_EQ(sink_->messages.back()["error"]["code"], -32700);
  EXPECT_EQ(errorCode(request("textDocument/formatting", Json::object())), -32601);
  Json invalid = request("textDocument/hover", {{"textDocument", {{"uri", uri("train.py")}}}});
  EXPECT_EQ(errorCode(invalid), -32602);
  EXPECT_EQ(invalid["error"]["message"], "params.position is required");
  EXPECT_EQ(
      errorCode(request("wavecast/setBatchSize", {{"uri", uri("train.py")}, {"batch_size", -3}})),
      -32602);
  notify("textDocument/didChange", {{"oops", 1}}); // a bad notification is only logged
  EXPECT_TRUE(request("wavecast/listGpus", nullptr).contains("result"));
}

TEST_F(ServerTest, SaveAnalysesAfterTheDebounceAndServesHintsHoverAndLenses) {
  initialize();
  open("train.py", kScript);
  analyzeTrain();
  ASSERT_EQ(analyzer_.requests().size(), 1u);
  EXPECT_EQ(analyzer_.requests()[0].file, (dir_ / "train.py").string());
  EXPECT_EQ(analyzer_.requests()[0].targets, (std::vector<std::string>{"H100-SXM", "T4"}));

  Json hints =
      request("textDocument/inlayHint", {{"textDocument", {{"uri", uri("train.py")}}},
                                         {"range",
                                          {{"start", {{"line", 0}, {"character", 0}}},
                                           {"end", {{"line", 20}, {"character", 0}}}}}})["result"];
  ASSERT_EQ(hints.size(), 2u);
  EXPECT_EQ(hints[0]["label"], "H100-SXM 1.50 ms \u00b7 T4 12.0 ms (15%)");
  EXPECT_EQ(hints[0]["position"], Json::parse(R"({"line":2,"character":15})"));
  EXPECT_EQ(hints[1]["position"]["line"], 4);

  std::string markdown = hoverAt(2)["result"]["contents"]["value"];
  EXPECT_NE(markdown.find("| T4 | 4.00 ms | 8.00 ms |"), std::string::npos) << markdown;
  EXPECT_TRUE(hoverAt(3)["result"].is_null());

  Json lenses = request("textDocument/codeLens", {{"textDocument", {{"uri", uri("train.py")}}}});
  ASSERT_EQ(lenses["result"].size(), 3u); // two GPUs + memory; no per-line lenses (has inlay hints)
  EXPECT_EQ(lenses["result"][0]["range"]["start"]["line"], 8);
  EXPECT_EQ(lenses["result"][0]["command"]["title"],
            "H100-SXM: 10.0 ms/iter \u00b7 3,200 samples/s \u00b7 $0.012/1k samples");
  EXPECT_EQ(lenses["result"][2]["range"]["start"]["line"], 6);

  Json results = request("wavecast/results", {{"uri", uri("train.py")}})["result"];
  EXPECT_EQ(results["state"], "ready");
  EXPECT_EQ(results["content_version"], 1);
  EXPECT_EQ(results["prediction"]["batch_size"], 32);
  ASSERT_FALSE(results["prediction"]["ops"].empty());
  const Json lean =
      request("wavecast/results", {{"uri", uri("train.py")}, {"ops", false}})["result"];
  EXPECT_TRUE(lean["prediction"]["ops"].empty()) << "the per-op detail left out, as asked";
  EXPECT_EQ(lean["prediction"]["lines"], results["prediction"]["lines"]);
  EXPECT_EQ(lean["prediction"]["summaries"], results["prediction"]["summaries"]);
  EXPECT_FALSE(sent("workspace/inlayHint/refresh").empty());
  EXPECT_FALSE(sent("workspace/codeLens/refresh").empty());
}

TEST_F(ServerTest, HintsAndHoverFollowTheirLinesThroughUnsavedEdits) {
  initialize();
  open("train.py", kScript);
  analyzeTrain();
  auto hintLines = [&] {
    std::vector<int> lines;
    const Json hints = request("textDocument/inlayHint",
                               {{"textDocument", {{"uri", uri("train.py")}}},
                                {"range",
                                 {{"start", {{"line", 0}, {"character", 0}}},
                                  {"end", {{"line", 20}, {"character", 0}}}}}})["result"];
    for (const auto& hint : hints)
      lines.push_back(hint["position"]["line"].get<int>());
    return lines;
  };
  ASSERT_EQ(hintLines(), (std::vector<int>{2, 4}));

  // Two lines typed at the top, not saved: both hints move down with their lines.
  auto edit = [&](int version, int line, int from, int to, const std::string& text) {
    Json range = {{"start", {{"line", line}, {"character", from}}},
                  {"end", {{"line", line}, {"character", to}}}};
    Json change = {{"range", range}, {"text", text}};
    notify("textDocument/didChange",
           {{"textDocument", {{"uri", uri("train.py")}, {"version", version}}},
            {"contentChanges", Json::array({change})}});
  };
  edit(2, 0, 0, 0, "import torch\nimport math\n");
  EXPECT_EQ(hintLines(), (std::vector<int>{4, 6}));
  EXPECT_TRUE(hoverAt(2)["result"].is_null());
  EXPECT_NE(hoverAt(4)["result"]["contents"]["value"].get<std::string>().find("| T4 | 4.00 ms"),
            std::string::npos);

  // Editing the conv line itself: its figures no longer describe it.
  edit(3, 4, 8, 12, "conv2");
  EXPECT_EQ(hintLines(), (std::vector<int>{6}));
  EXPECT_TRUE(hoverAt(4)["result"].is_null());
  Json lenses = request("textDocument/codeLens", {{"textDocument", {{"uri", uri("train.py")}}}});
  EXPECT_EQ(lenses["result"][0]["range"]["start"]["line"], 10); // the iteration provider, moved
}

TEST_F(ServerTest, ProgressIsReportedOnceTheClientCreatedTheToken) {
  initialize();
  open("train.py", kScript);
  save("train.py");
  ASSERT_TRUE(waitStarted(1));
  ASSERT_TRUE(runUntil([&] { return !sent("window/workDoneProgress/create").empty(); }));
  Json create = sent("window/workDoneProgress/create")[0];
  server_->receive(client_, encodeResult(create["id"], nullptr));
  auto progress = sent("$/progress");
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_EQ(progress[0]["params"]["token"], create["params"]["token"]);
  EXPECT_EQ(progress[0]["params"]["value"]["kind"], "begin");
  analyzer_.release();
  // The analysis may report its stages before it ends.
  ASSERT_TRUE(runUntil([&] {
    const auto all = sent("$/progress");
    return all.size() >= 2 && all.back()["params"]["value"]["kind"] == "end";
  }));
  progress = sent("$/progress");
  for (size_t i = 1; i + 1 < progress.size(); ++i)
    EXPECT_EQ(progress[i]["params"]["value"]["kind"], "report") << i;
}

TEST_F(ServerTest, ResultLinesNumberTheTextTheAnalysisWasRequestedWith) {
  initialize();
  open("train.py", kScript);
  save("train.py");
  ASSERT_TRUE(waitStarted(1));
  writeFile("train.py", std::string("# changed on disk meanwhile\n") + kScript);
  analyzer_.release();
  ASSERT_TRUE(runUntil([&] { return resultsReady("train.py"); }));
  // The buffer still holds the analysed text: the hints stay where the result put them.
  const Json hints =
      request("textDocument/inlayHint", {{"textDocument", {{"uri", uri("train.py")}}},
                                         {"range",
                                          {{"start", {{"line", 0}, {"character", 0}}},
                                           {"end", {{"line", 20}, {"character", 0}}}}}})["result"];
  ASSERT_EQ(hints.size(), 2u);
  EXPECT_EQ(hints[0]["position"]["line"], 2);
  EXPECT_EQ(hints[1]["position"]["line"], 4);
}

TEST_F(ServerTest, ASupersededAnalysisEndsItsProgress) {
  initialize();
  open("train.py", kScript);
  save("train.py");
  ASSERT_TRUE(waitStarted(1));
  ASSERT_TRUE(runUntil([&] { return !sent("window/workDoneProgress/create").empty(); }));
  Json first = sent("window/workDoneProgress/create")[0];
  server_->receive(client_, encodeResult(first["id"], nullptr));
  writeFile("train.py", std::string(kScript) + "# edited\n");
  save("train.py"); // cancels the running analysis; a new one starts after the debounce
  ASSERT_TRUE(waitStarted(2));
  ASSERT_TRUE(runUntil([&] { return sent("window/workDoneProgress/create").size() >= 2; }));
  auto progress = sent("$/progress");
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress[1]["params"]["token"], first["params"]["token"]);
  EXPECT_EQ(progress[1]["params"]["value"]["kind"], "end");
  analyzer_.release();
}

TEST_F(ServerTest, HoverAnswersFromTheLastResultsWhileAnAnalysisRuns) {
  initialize();
  open("train.py", kScript);
  analyzeTrain();
  writeFile("train.py", std::string(kScript) + "# edited\n");
  save("train.py");
  ASSERT_TRUE(waitStarted(2)); // blocked until released
  auto start = std::chrono::steady_clock::now();
  Json hover = hoverAt(2);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_NE(hover["result"]["contents"]["value"].get<std::string>().find("| H100-SXM |"),
            std::string::npos);
  EXPECT_LT(elapsed, 1s);
  EXPECT_EQ(request("wavecast/results", {{"uri", uri("train.py")}})["result"]["state"],
            "analyzing");
  analyzer_.release();
}

TEST_F(ServerTest, SaveWaitsUntilNoOtherFileHasUnsavedChanges) {
  initialize();
  open("train.py", kScript);
  open("model.py", "import torch\n");
  open("notes.md", "# notes\n");
  notify("textDocument/didChange",
         {{"textDocument", {{"uri", uri("notes.md")}, {"version", 2}}},
          {"contentChanges", {{{"text", "# unsaved notes do not block analyses\n"}}}}});
  notify("textDocument/didChange", {{"textDocument", {{"uri", uri("model.py")}, {"version", 2}}},
                                    {"contentChanges", {{{"text", "import torch\nx = 1\n"}}}}});
  save("train.py");
  runUntil([] { return false; }, 150ms);
  EXPECT_EQ(analyzer_.started(), 0);
  EXPECT_NE(sent("wavecast/status").back()["params"]["message"].get<std::string>().find("model.py"),
            std::string::npos);
  save("model.py");
  EXPECT_TRUE(waitStarted(1));
  analyzer_.release();
}

TEST_F(ServerTest, UnsavedFilesOfAnotherWorkspaceFolderDoNotHoldAnAnalysisBack) {
  initialize(); // rootUri: the test folder
  fs::create_directories(dir_ / "other");
  writeFile("other/lib.py", "x = 1\n");
  notify(
      "workspace/didChangeWorkspaceFolders",
      {{"event",
        {{"added", {{{"uri", protocol::pathToUri((dir_ / "other").string())}, {"name", "other"}}}},
         {"removed", Json::array()}}}});
  open("train.py", kScript);
  open("other/lib.py", "x = 1\n");
  notify("textDocument/didChange",
         {{"textDocument", {{"uri", uri("other/lib.py")}, {"version", 2}}},
          {"contentChanges", {{{"text", "x = 2\n"}}}}});
  save("train.py");
  EXPECT_TRUE(waitStarted(1)) << "other/lib.py is another project's file";
  analyzer_.release();

  // Once that folder is no longer part of the workspace, the same file counts.
  notify("workspace/didChangeWorkspaceFolders",
         {{"event",
           {{"added", Json::array()},
            {"removed",
             {{{"uri", protocol::pathToUri((dir_ / "other").string())}, {"name", "other"}}}}}}});
  save("train.py");
  runUntil([] { return false; }, 150ms);
  EXPECT_EQ(analyzer_.started(), 1);
  bool told = false;
  for (const auto& status : sent("wavecast/status"))
    told |= status["params"]["message"].get<std::string>().find("lib.py") != std::string::npos;
  EXPECT_TRUE(told);
}

TEST_F(ServerTest, ProfileErrorsBecomeDiagnosticsAtTheirLine) {
  initialize();
  open("train.py", kScript);
  ProfileError error;
  error.kind = ProfileErrorKind::UserException;
  error.message = "ZeroDivisionError: division by zero";
  error.file = (dir_ / "train.py").string();
  error.line = 3;
  error.hint = "Fix the exception raised in your script.";
  analyzer_.failNext(error);
  analyzeTrain();
  Json published = sent("textDocument/publishDiagnostics").back()["params"];
  EXPECT_EQ(published["uri"], uri("train.py"));
  ASSERT_EQ(published["diagnostics"].size(), 1u);
  const Json& diagnostic = published["diagnostics"][0];
  EXPECT_EQ(diagnostic["severity"], 1);
  EXPECT_EQ(diagnostic["code"], "user_exception");
  Json range = Json::parse(R"({"start":{"line":2,"character":0},"end":{"line":2,"character":15}})");
  EXPECT_EQ(diagnostic["range"], range);
  EXPECT_EQ(diagnostic["message"],
            "ZeroDivisionError: division by zero\nFix the exception raised in your script.");
  Json results = request("wavecast/results", {{"uri", uri("train.py")}})["result"];
  EXPECT_EQ(results["state"], "error");
  EXPECT_EQ(results["error"]["kind"], "user_exception");

  writeFile("train.py", std::string(kScript) + "# fixed\n");
  analyzeTrain();
  EXPECT_TRUE(sent("textDocument/publishDiagnostics").back()["params"]["diagnostics"].empty());
}

TEST_F(ServerTest, StatusNamesTheTorchThatTracedAndDebugLogsTimeEachMessage) {
  std::vector<std::pair<LogLevel, std::string>> logged;
  server_->log = [&](LogLevel level, const std::string& line) { logged.push_back({level, line}); };
  initialize();
  open("train.py", kScript);
  analyzeTrain();
  EXPECT_EQ(sent("wavecast/status").back()["params"]["message"],
            "train.py: results ready, traced with torch 2.11.0+cu130 (/venv)");
  request("textDocument/hover", {{"textDocument", {{"uri", uri("train.py")}}},
                                 {"position", {{"line", 2}, {"character", 0}}}});
  const auto debug = [&](const std::string& start) {
    return std::any_of(logged.begin(), logged.end(), [&](const auto& entry) {
      return entry.first == LogLevel::Debug && entry.second.rfind(start, 0) == 0 &&
             entry.second.find(" ms") != std::string::npos;
    });
  };
  EXPECT_TRUE(debug("request textDocument/hover from client ")) << logged.size();
  EXPECT_TRUE(debug("notification textDocument/didOpen from client "));
  EXPECT_TRUE(debug("analysis of " + (dir_ / "train.py").string() + ": "));
  EXPECT_EQ(logLevelFromString("debug"), LogLevel::Debug);
  EXPECT_FALSE(logLevelFromString("verbose"));
}

TEST_F(ServerTest, OutOfMemoryIsAWarningOnTheInputProvider) {
  initialize();
  open("train.py", kScript);
  analyzer_.setFits(false);
  analyzeTrain();
  Json diagnostics = sent("textDocument/publishDiagnostics").back()["params"]["diagnostics"];
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0]["severity"], 2);
  EXPECT_EQ(diagnostics[0]["range"]["start"]["line"], 6);
  EXPECT_EQ(diagnostics[0]["code"], "out_of_memory");
  EXPECT_EQ(diagnostics[0]["message"].get<std::string>().rfind(
                "out of memory on T4: the iteration needs about 20.0 GiB, the GPU has 16.0 GiB", 0),
            0u);
}

TEST_F(ServerTest, LineDiagnosticsAndLineLensesForClientsWithoutInlayHints) {
  initialize({{"lineDiagnostics", true}}, Json::object());
  open("train.py", kScript);
  analyzeTrain();
  Json diagnostics = sent("textDocument/publishDiagnostics").back()["params"]["diagnostics"];
  ASSERT_EQ(diagnostics.size(), 2u);
  EXPECT_EQ(diagnostics[0]["severity"], 3);
  EXPECT_EQ(diagnostics[0]["message"], "H100-SXM 1.50 ms \u00b7 T4 12.0 ms (15%)");
  Json lenses = request("textDocument/codeLens", {{"textDocument", {{"uri", uri("train.py")}}}});
  ASSERT_EQ(lenses["result"].size(), 5u);
  EXPECT_EQ(lenses["result"][3]["range"]["start"]["line"], 2);
  EXPECT_EQ(lenses["result"][3]["command"]["title"], "H100-SXM 1.50 ms \u00b7 T4 12.0 ms (15%)");
}

TEST_F(ServerTest, AnalyzeAnswersWhenDoneAndCanBeCancelled) {
  initialize();
  int id = nextId_++;
  server_->receive(client_, encodeRequest(id, "wavecast/analyze",
                                          {{"uri", uri("train.py")}, {"batch_size", 8}}));
  ASSERT_TRUE(waitStarted(1));
  EXPECT_EQ(analyzer_.requests()[0].batchSize, 8);
  analyzer_.release();
  Json reply;
  ASSERT_TRUE(runUntil([&] {
    for (const auto& message : sink_->messages)
      if (message.value("id", Json()) == id)
        reply = message;
    return !reply.is_null();
  }));
  EXPECT_EQ(reply["result"]["state"], "ready");
  EXPECT_EQ(reply["result"]["prediction"]["batch_size"], 8);

  id = nextId_++;
  server_->receive(client_, encodeRequest(id, "wavecast/analyze",
                                          {{"uri", uri("train.py")}, {"batch_size", 16}}));
  notify("$/cancelRequest", {{"id", id}});
  auto reply16 = std::find_if(sink_->messages.begin(), sink_->messages.end(),
                              [&](const Json& m) { return m.value("id", Json()) == id; });
  ASSERT_NE(reply16, sink_->messages.end());
  EXPECT_EQ((*reply16)["error"]["code"], -32800);
  EXPECT_EQ(errorCode(request("wavecast/analyze", {{"uri", uri("missing.py")}})), -32602);
  analyzer_.release();
}

TEST_F(ServerTest, UnchangedContentIsServedFromTheCache) {
  initialize();
  open("train.py", kScript);
  analyzeTrain();
  writeFile("train.py", std::string(kScript) + "# changed\n");
  analyzeTrain();
  EXPECT_EQ(analyzer_.started(), 2);
  writeFile("train.py", kScript); // back to the first content
  size_t before = sent("wavecast/resultsChanged").size();
  save("train.py");
  io_.poll();
  EXPECT_EQ(sent("wavecast/resultsChanged").size(), before + 1);
  const Json changed = sent("wavecast/resultsChanged").back()["params"];
  EXPECT_EQ(changed["state"], "ready");
  // The results JSON's summaries, every field of them.
  EXPECT_EQ(
      changed["summaries"],
      request("wavecast/results", {{"uri", uri("train.py")}})["result"]["prediction"]["summaries"]);
  EXPECT_EQ(changed["summaries"][1]["gpu"], "T4");
  EXPECT_EQ(changed["summaries"][1]["iteration_ms"], 80);
  EXPECT_EQ(changed["summaries"][1]["memory"]["weights_bytes"], 2LL << 30);
  runUntil([] { return false; }, 100ms);
  EXPECT_EQ(analyzer_.started(), 2);
}

// The status line of the last results that came from a stored trace; empty when none did.
std::string storedResultsStatus(const std::vector<Json>& statuses) {
  std::string shown;
  for (const auto& status : statuses) {
    const std::string message = status["params"]["message"];
    if (message.find("results ready") != std::string::npos &&
        message.find("the trace stored") != std::string::npos)
      shown = message;
  }
  return shown;
}

TEST_F(ServerTest, OpeningADocumentShowsAStoredTraceAndRunsNothing) {
  analyzer_.setStore(FakeAnalyzer::Store::Full);
  initialize();
  open("train.py", kScript);
  ASSERT_TRUE(waitStarted(1)); // a look into the store, without a save
  EXPECT_EQ(analyzer_.requests()[0].traceSource, TraceSource::Store);
  EXPECT_TRUE(sent("$/progress").empty()) << "no progress for a look into the store";
  EXPECT_TRUE(sent("wavecast/resultsChanged").empty()) << "no 'analyzing' state either";
  analyzer_.release();
  ASSERT_TRUE(runUntil([&] { return resultsReady("train.py"); }));
  EXPECT_EQ(storedResultsStatus(sent("wavecast/status")),
            "train.py: results ready, traced with torch 2.11.0+cu130 (/venv) (the trace stored " +
                localTime(FakeAnalyzer::kStoredAt) + "; save to trace it again)");
  EXPECT_TRUE(hoverAt(2).contains("result"));
  runUntil([] { return false; }, 100ms);
  EXPECT_EQ(analyzer_.started(), 1) << "opening a document runs no user code";

  // A save traces it, unchanged as it is; the worker's result is cached, the stored one was not.
  analyzeTrain();
  EXPECT_EQ(analyzer_.requests()[1].traceSource, TraceSource::Worker);
  EXPECT_EQ(sent("wavecast/status").back()["params"]["message"].get<std::string>().find("stored"),
            std::string::npos);
  save("train.py");
  runUntil([] { return false; }, 100ms);
  EXPECT_EQ(analyzer_.started(), 2) << "the content the worker traced comes from the cache";
}

TEST_F(ServerTest, WithNothingStoredOpeningChangesNothing) {
  analyzer_.setStore(FakeAnalyzer::Store::Empty);
  initialize();
  open("train.py", kScript);
  ASSERT_TRUE(waitStarted(1));
  analyzer_.release();
  runUntil([] { return false; }, 100ms);
  EXPECT_TRUE(sent("wavecast/resultsChanged").empty());
  EXPECT_TRUE(sent("textDocument/publishDiagnostics").empty()) << "a miss is no error";
  EXPECT_EQ(analyzer_.started(), 1) << "nothing traced until a save";
  analyzeTrain();
  EXPECT_EQ(analyzer_.requests()[1].traceSource, TraceSource::StoreOrWorker)
      << "the first save of a document may still find a stored trace";
  EXPECT_EQ(sent("wavecast/resultsChanged").back()["params"]["state"], "ready");
}

TEST_F(ServerTest, ASaveSupersedesALookIntoTheStoreAndTheTraceAfterIt) {
  analyzer_.setStore(FakeAnalyzer::Store::Full);
  initialize();
  open("train.py", kScript);
  ASSERT_TRUE(waitStarted(1));
  save("train.py"); // while the store is looked into
  ASSERT_TRUE(runUntil([&] { return analyzer_.cancelled() == 1; }));
  ASSERT_TRUE(waitStarted(2));
  EXPECT_EQ(analyzer_.requests()[1].traceSource, TraceSource::StoreOrWorker);
  analyzer_.release();
  ASSERT_TRUE(runUntil([&] { return resultsReady("train.py"); }));
  EXPECT_NE(storedResultsStatus(sent("wavecast/status")).find("; tracing it again)"),
            std::string::npos);
  ASSERT_TRUE(waitStarted(3)); // the trace that checks the stored one
  EXPECT_EQ(analyzer_.requests()[2].traceSource, TraceSource::Worker);
  writeFile("train.py", std::string(kScript) + "# changed\n");
  save("train.py");
  ASSERT_TRUE(runUntil([&] { return analyzer_.cancelled() == 2; }));
  ASSERT_TRUE(waitStarted(4));
  EXPECT_EQ(analyzer_.requests()[3].traceSource, TraceSource::Worker)
      << "the document has results: no stored trace is asked for again";
  analyzer_.release();
  ASSERT_TRUE(runUntil(
      [&] { return sent("wavecast/resultsChanged").back()["params"]["state"] == "ready"; }));
}

TEST_F(ServerTest, TheManualTriggerLooksIntoNoStore) {
  analyzer_.setStore(FakeAnalyzer::Store::Full);
  initialize({{"trigger", "manual"}});
  open("train.py", kScript);
  runUntil([] { return false; }, 100ms);
  EXPECT_EQ(analyzer_.started(), 0);
}

TEST_F(ServerTest, TcpClientsMustAuthenticate) {
  auto intruder = std::make_shared<RecordingSink>();
  ClientId intruderId = server_->addClient(intruder, true);
  Json refused = send(intruderId, *intruder, "wavecast/listGpus", nullptr);
  EXPECT_EQ(errorCode(refused), -32002);
  EXPECT_TRUE(intruder->closed);

  auto wrong = std::make_shared<RecordingSink>();
  ClientId wrongId = server_->addClient(wrong, true);
  Json denied =
      send(wrongId, *wrong, "initialize",
           {{"capabilities", Json::object()}, {"initializationOptions", {{"token", "guess"}}}});
  EXPECT_NE(denied["error"]["message"].get<std::string>().find("authentication failed"),
            std::string::npos);
  EXPECT_TRUE(wrong->closed);

  auto friendly = std::make_shared<RecordingSink>();
  ClientId friendlyId = server_->addClient(friendly, true);
  Json accepted =
      send(friendlyId, *friendly, "initialize",
           {{"capabilities", Json::object()}, {"initializationOptions", {{"token", "secret"}}}});
  EXPECT_TRUE(accepted.contains("result"));
  EXPECT_TRUE(friendly->wasAuthenticated); // the transport lifts its size limit
  EXPECT_FALSE(wrong->wasAuthenticated);
  EXPECT_TRUE(send(friendlyId, *friendly, "wavecast/listGpus", nullptr).contains("result"));

  // A stranger sending what is not JSON-RPC is cut off, as is one whose bytes do
  // not even frame; a known client is not.
  auto babbler = std::make_shared<RecordingSink>();
  server_->receive(server_->addClient(babbler, true), "{not json");
  EXPECT_TRUE(babbler->closed);
  auto garbled = std::make_shared<RecordingSink>();
  server_->framingError(server_->addClient(garbled, true), "Content-Length 9999999 exceeds");
  EXPECT_TRUE(garbled->closed);
  server_->framingError(friendlyId, "Content-Length 9999999 exceeds");
  EXPECT_FALSE(friendly->closed);
}

TEST_F(ServerTest, ShutdownThenExit) {
  initialize();
  EXPECT_TRUE(request("shutdown", nullptr)["result"].is_null());
  EXPECT_EQ(errorCode(hoverAt(1)), -32600);
  notify("exit", nullptr);
  EXPECT_EQ(exitCode_, 0);
  EXPECT_TRUE(sink_->closed);
}

TEST(ProviderDetection, RecognisesAllProviderConventions) {
  EXPECT_TRUE(definesProviders("import torch\ndef wavecast_model():\n"));
  EXPECT_TRUE(definesProviders("def deepview_input_provider(batch_size=4):\n"));
  EXPECT_TRUE(definesProviders("  def skyline_iteration_provider (model):\n"));
  EXPECT_FALSE(definesProviders("def model():\n# def wavecast_model():\n"));
}

} // namespace
} // namespace wavecast::lsp
