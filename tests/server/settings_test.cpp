#include "server_fixture.h"

#include <gtest/gtest.h>

namespace wavecast::lsp {
namespace {

using namespace testing;

TEST_F(ServerTest, TurningLineLensesOnOrOffAsksForCodeLensesAgain) {
  initialize();
  open("train.py", kScript);
  analyzeTrain();
  auto lenses = [&] {
    return request("textDocument/codeLens",
                   {{"textDocument", {{"uri", uri("train.py")}}}})["result"];
  };
  ASSERT_EQ(lenses().size(), 3u); // the summary only: this client shows inlay hints
  size_t refreshes = sent("workspace/codeLens/refresh").size();

  notify("workspace/didChangeConfiguration", {{"settings", {{"wavecast", {{"debounceMs", 50}}}}}});
  EXPECT_EQ(sent("workspace/codeLens/refresh").size(), refreshes);
  notify("workspace/didChangeConfiguration",
         {{"settings", {{"wavecast", {{"lineCodeLens", true}}}}}});
  EXPECT_EQ(sent("workspace/codeLens/refresh").size(), refreshes + 1);
  EXPECT_EQ(lenses().size(), 5u);
  notify("workspace/didChangeConfiguration",
         {{"settings", {{"wavecast", {{"lineCodeLens", false}}}}}});
  EXPECT_EQ(sent("workspace/codeLens/refresh").size(), refreshes + 2);
  EXPECT_EQ(lenses().size(), 3u);
}

TEST_F(ServerTest, SetTargetsResolvesNamesAndReanalyses) {
  initialize();
  open("train.py", kScript);
  Json unknown = request("wavecast/setTargets", {{"gpus", {"H200x"}}});
  EXPECT_EQ(errorCode(unknown), -32602);
  EXPECT_EQ(unknown["error"]["data"]["suggestions"], Json::array({"H100-SXM"}));
  analyzeTrain();
  Json reply = request("wavecast/setTargets", {{"gpus", {"t4"}}});
  EXPECT_EQ(reply["result"]["targets"], Json::array({"T4"}));
  ASSERT_TRUE(waitStarted(2));
  EXPECT_EQ(analyzer_.requests()[1].targets, std::vector<std::string>{"T4"});
  EXPECT_EQ(request("wavecast/listGpus", nullptr)["result"]["targets"], Json::array({"T4"}));
  EXPECT_EQ(request("wavecast/listGpus", nullptr)["result"]["gpus"][0]["compute_capability"],
            "9.0");
  analyzer_.release();
}

// The worker starts loading torch when the daemon learns its settings, before any save,
// and again for a newly chosen Python environment.
TEST_F(ServerTest, TheAnalyzerIsPreparedOnInitializeBeforeAnySave) {
  initialize();
  ASSERT_FALSE(analyzer_.prepared().empty());
  EXPECT_EQ(analyzer_.prepared().back(), "");
  EXPECT_EQ(analyzer_.started(), 0);
  notify("workspace/didChangeConfiguration",
         {{"settings", {{"wavecast", {{"pythonEnv", "/opt/venv"}}}}}});
  EXPECT_EQ(analyzer_.prepared().back(), "/opt/venv");
}

TEST_F(ServerTest, MeasuredModeSettingAnalysesAgainOnTheGpu) {
  initialize();
  analyzeTrain();
  EXPECT_EQ(analyzer_.requests()[0].mode, TraceMode::Shape);
  notify("workspace/didChangeConfiguration",
         {{"settings", {{"wavecast", {{"mode", "measured"}}}}}});
  ASSERT_TRUE(waitStarted(2)) << "a mode change re-analyses";
  EXPECT_EQ(analyzer_.requests()[1].mode, TraceMode::Cuda);
  analyzer_.release();
}

// An editor's settings apply key by key: a wrong value keeps its setting, is shown
// once with what happened, and does not hold back the other values of the change.
TEST_F(ServerTest, AWrongSettingIsShownOnceAndTheOthersApply) {
  initialize();
  analyzeTrain();
  auto shown = [&] {
    std::vector<std::string> messages;
    for (const auto& message : sent("window/showMessage"))
      messages.push_back(message["params"]["message"]);
    return messages;
  };
  const auto change = [&](const Json& settings) {
    notify("workspace/didChangeConfiguration", {{"settings", {{"wavecast", settings}}}});
  };
  change({{"batchSize", 0}, {"mode", "measured"}, {"targets", {"H200x"}}});
  ASSERT_TRUE(waitStarted(2)) << "the valid mode still applies and re-analyses";
  EXPECT_EQ(analyzer_.requests()[1].mode, TraceMode::Cuda);
  EXPECT_EQ(analyzer_.requests()[1].targets, (std::vector<std::string>{"H100-SXM", "T4"}));
  EXPECT_EQ(analyzer_.requests()[1].batchSize, std::nullopt);
  analyzer_.release();
  ASSERT_EQ(shown().size(), 2u);
  EXPECT_EQ(shown()[0], "wavecast: params.settings.wavecast.batchSize must be a positive integer "
                        "(that setting keeps its value; the others apply)");
  EXPECT_NE(shown()[1].find("targets: unknown GPU 'H200x'; did you mean H100-SXM?; the GPUs "
                            "stay as they were"),
            std::string::npos)
      << shown()[1];
  EXPECT_EQ(sent("window/showMessage").front()["params"]["type"], 2);

  // The same wrong values again: nothing new is shown. Fixed, then wrong again: shown.
  change({{"batchSize", 0}, {"targets", {"H200x"}}});
  EXPECT_EQ(shown().size(), 2u);
  change({{"batchSize", 16}, {"targets", {"H200x"}}});
  EXPECT_EQ(shown().size(), 2u);
  change({{"batchSize", 0}, {"targets", {"H200x"}}});
  EXPECT_EQ(shown().size(), 3u);
  EXPECT_EQ(request("wavecast/listGpus", nullptr)["result"]["targets"],
            Json::array({"H100-SXM", "T4"}));
  analyzer_.release();
}

// A training script without providers is analysed on save, with the scriptArgs setting:
// its own arguments by path, else those for every script; a change re-analyses it.
TEST_F(ServerTest, ScriptArgsReachTheAnalysisOfAScriptRunAsWritten) {
  const std::string script = "import torch\n"
                             "for batch in loader:\n"
                             "    optimizer.step()\n";
  writeFile("loop.py", script);
  initialize({{"scriptArgs", {"--lr", "0.1"}}});
  open("loop.py", script);
  int started = analyzer_.started();
  save("loop.py");
  ASSERT_TRUE(waitStarted(started + 1));
  EXPECT_EQ(analyzer_.requests().back().scriptArgs, (std::vector<std::string>{"--lr", "0.1"}));
  analyzer_.release();
  ASSERT_TRUE(runUntil([&] { return resultsReady("loop.py"); }));

  const std::string path = (dir_ / "loop.py").string();
  notify("workspace/didChangeConfiguration",
         {{"settings",
           {{"wavecast", {{"scriptArgs", {{"", {"--lr", "0.1"}}, {path, {"--epochs", "1"}}}}}}}}});
  ASSERT_TRUE(waitStarted(started + 2));
  EXPECT_EQ(analyzer_.requests().back().scriptArgs, (std::vector<std::string>{"--epochs", "1"}));
  // It runs from its workspace folder, as VS Code runs a file, unless a launch
  // configuration's cwd names another.
  EXPECT_EQ(analyzer_.requests().back().workingDirectory, fs::weakly_canonical(dir_).string());
  analyzer_.release();
  notify("workspace/didChangeConfiguration",
         {{"settings", {{"wavecast", {{"scriptWorkingDirectories", {{path, "/srv/data"}}}}}}}});
  ASSERT_TRUE(waitStarted(started + 3));
  EXPECT_EQ(analyzer_.requests().back().workingDirectory, "/srv/data");
  analyzer_.release();

  // A module of helpers, even one that steps an optimizer, is not analysed.
  const std::string helpers = "import torch\ndef train_step(optimizer):\n    optimizer.step()\n";
  writeFile("utils.py", helpers);
  open("utils.py", helpers);
  save("utils.py");
  EXPECT_FALSE(waitStarted(started + 4));
}

// The worldSize setting is the launch a torch.distributed script is traced in; a change
// re-analyses, a wrong value is named and keeps the previous one.
TEST_F(ServerTest, WorldSizeReachesTheAnalysis) {
  initialize({{"worldSize", 64}});
  analyzeTrain();
  EXPECT_EQ(analyzer_.requests().back().worldSize, 64);
  const auto change = [&](const Json& settings) {
    notify("workspace/didChangeConfiguration", {{"settings", {{"wavecast", settings}}}});
  };
  change({{"worldSize", 16}});
  ASSERT_TRUE(waitStarted(2)) << "a launch of other ranks re-analyses";
  EXPECT_EQ(analyzer_.requests().back().worldSize, 16);
  analyzer_.release();
  change({{"worldSize", 0}});
  const auto shown = sent("window/showMessage");
  ASSERT_FALSE(shown.empty());
  EXPECT_NE(shown.back()["params"]["message"].get<std::string>().find(
                "worldSize must be a number of ranks, 1 or more"),
            std::string::npos);
  change({{"worldSize", nullptr}});
  ASSERT_TRUE(waitStarted(3));
  EXPECT_EQ(analyzer_.requests().back().worldSize, std::nullopt);
  analyzer_.release();
}

// The compile setting traces scripts as if compiled in that mode; a change re-analyses, null
// goes back to the script as written, and an unknown mode is named with the choices.
TEST_F(ServerTest, CompileModeReachesTheAnalysis) {
  initialize({{"compile", "max-autotune"}});
  analyzeTrain();
  EXPECT_EQ(analyzer_.requests().back().compile, CompileMode::MaxAutotune);
  const auto change = [&](const Json& settings) {
    notify("workspace/didChangeConfiguration", {{"settings", {{"wavecast", settings}}}});
  };
  change({{"compile", "reduce-overhead"}});
  ASSERT_TRUE(waitStarted(2)) << "another compile mode re-analyses";
  EXPECT_EQ(analyzer_.requests().back().compile, CompileMode::ReduceOverhead);
  analyzer_.release();
  change({{"compile", "fast"}});
  const auto shown = sent("window/showMessage");
  ASSERT_FALSE(shown.empty());
  EXPECT_NE(shown.back()["params"]["message"].get<std::string>().find(
                "compile must be null (as the script says) or a torch.compile mode: default, "
                "reduce-overhead, max-autotune or max-autotune-no-cudagraphs"),
            std::string::npos);
  change({{"compile", nullptr}});
  ASSERT_TRUE(waitStarted(3));
  EXPECT_EQ(analyzer_.requests().back().compile, std::nullopt);
  analyzer_.release();
}

// Multi-GPU targets go through the analyzer's layout resolution and into the next
// analysis; one it cannot read keeps the previous targets and is shown once.
TEST_F(ServerTest, ParallelTargetsReanalyseAndAnUnreadableOneKeepsThePrevious) {
  initialize();
  analyzeTrain();
  const auto change = [&](const Json& settings) {
    notify("workspace/didChangeConfiguration", {{"settings", {{"wavecast", settings}}}});
  };
  change({{"parallelTargets",
           {"8x H100-SXM, FSDP", {{"gpu", "H100-SXM"}, {"count", 16}, {"system", "DGX-H100"}}}}});
  ASSERT_TRUE(waitStarted(2)) << "new targets re-analyse";
  const auto layouts = analyzer_.requests()[1].layouts;
  ASSERT_EQ(layouts.size(), 2u);
  EXPECT_EQ(layouts[0].words, "8x H100-SXM, FSDP");
  EXPECT_EQ(layouts[0].system, "HGX-H100");
  EXPECT_EQ(layouts[1].words, "16xH100-SXM");
  EXPECT_EQ(layouts[1].system, "DGX-H100");
  analyzer_.release();

  change({{"parallelTargets", {"8x bogus"}}, {"batchSize", 16}});
  ASSERT_TRUE(waitStarted(3)) << "the batch size still applies";
  EXPECT_EQ(analyzer_.requests()[2].layouts, layouts);
  const auto shown = sent("window/showMessage");
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_NE(shown[0]["params"]["message"].get<std::string>().find(
                "parallelTargets: cannot read the target '8x bogus'; the multi-GPU targets stay "
                "as they were"),
            std::string::npos)
      << shown[0];
  analyzer_.release();
}

} // namespace
} // namespace wavecast::lsp
