#include "wavecast/protocol/lsp.h"
#include "wavecast/protocol/wavecast.h"

#include <gtest/gtest.h>

namespace wavecast::protocol {
namespace {

std::string invalidParamsMessage(const std::function<void()>& decode) {
  try {
    decode();
  } catch (const RpcError& error) {
    EXPECT_EQ(error.code(), ErrorCode::InvalidParams);
    return error.what();
  }
  ADD_FAILURE() << "no InvalidParams error";
  return "";
}

TEST(LspTypes, DecodesPositionParams) {
  auto params = positionParamsFromJson(Json::parse(
      R"({"textDocument":{"uri":"file:///a.py"},"position":{"line":3,"character":7}})"));
  EXPECT_EQ(params.uri, "file:///a.py");
  EXPECT_EQ(params.position, (Position{3, 7}));
}

TEST(LspTypes, ErrorsNameTheOffendingField) {
  EXPECT_EQ(invalidParamsMessage([] {
              positionParamsFromJson(Json::parse(R"({"textDocument":{"uri":"file:///a.py"}})"));
            }),
            "params.position is required");
  EXPECT_EQ(
      invalidParamsMessage([] {
        positionParamsFromJson(Json::parse(
            R"({"textDocument":{"uri":"file:///a.py"},"position":{"line":"3","character":0}})"));
      }),
      "params.position.line must be an integer");
  EXPECT_EQ(invalidParamsMessage([] { didOpenFromJson(Json::parse(R"({"textDocument":{}})")); }),
            "params.textDocument.uri is required");
  EXPECT_EQ(invalidParamsMessage([] { didCloseFromJson(Json::array()); }),
            "params must be an object");
}

TEST(LspTypes, ReadsClientCapabilities) {
  auto init = initializeFromJson(Json::parse(R"({
    "processId": 12, "rootUri": "file:///w",
    "workspaceFolders": [{"uri": "file:///w", "name": "w"}],
    "capabilities": {"window": {"workDoneProgress": true},
                     "workspace": {"configuration": true, "inlayHint": {"refreshSupport": true}},
                     "textDocument": {"hover": {"contentFormat": ["markdown", "plaintext"]}}},
    "initializationOptions": {"protocol_version": 2}})"));
  EXPECT_EQ(init.processId, 12);
  ASSERT_EQ(init.workspaceFolders.size(), 1u);
  EXPECT_EQ(init.workspaceFolders[0].name, "w");
  EXPECT_TRUE(init.capabilities.workDoneProgress);
  EXPECT_TRUE(init.capabilities.configuration);
  EXPECT_TRUE(init.capabilities.inlayHintRefresh);
  EXPECT_FALSE(init.capabilities.codeLensRefresh);
  EXPECT_FALSE(init.capabilities.inlayHint);
  EXPECT_TRUE(init.capabilities.hoverMarkdown);
  EXPECT_EQ(init.initializationOptions["protocol_version"], 2);
}

TEST(LspTypes, CountsUtf16CodeUnits) {
  EXPECT_EQ(utf16Length("abc"), 3);
  EXPECT_EQ(utf16Length("\xc3\xa9"), 1);          // é
  EXPECT_EQ(utf16Length("\xf0\x9f\x98\x80x"), 3); // emoji (surrogate pair) + x
}

TEST(LspTypes, AppliesRangedChangesInUtf16Columns) {
  std::string text = "a = 1\n\xf0\x9f\x98\x80 = 2\nend";
  applyChange(text, {Range{{1, 5}, {1, 6}}, "3"}); // after "😀 = "
  EXPECT_EQ(text, "a = 1\n\xf0\x9f\x98\x80 = 3\nend");
  applyChange(text, {Range{{0, 0}, {1, 0}}, ""});
  EXPECT_EQ(text, "\xf0\x9f\x98\x80 = 3\nend");
  applyChange(text, {std::nullopt, "new"});
  EXPECT_EQ(text, "new");
}

TEST(LspTypes, ConvertsFileUris) {
  EXPECT_EQ(pathToUri("/tmp/my model/a+b.py"), "file:///tmp/my%20model/a%2Bb.py");
  EXPECT_EQ(uriToPath("file:///tmp/my%20model/a%2Bb.py"), "/tmp/my model/a+b.py");
  EXPECT_EQ(uriToPath("file://localhost/x.py"), "/x.py");
  EXPECT_FALSE(uriToPath("untitled:Untitled-1"));
  EXPECT_FALSE(uriToPath("file:///bad%zz"));
}

TEST(LspTypes, SerialisesResults) {
  Json expected = Json::parse(
      R"json({"position":{"line":4,"character":20},"label":"T4 1.0ms (5%)","paddingLeft":true})json");
  EXPECT_EQ(toJson(InlayHint{{4, 20}, "T4 1.0ms (5%)", "", true}), expected);
  Json diagnostic = toJson(
      Diagnostic{Range{{2, 0}, {2, 9}}, DiagnosticSeverity::Warning, "out_of_memory", "too big"});
  EXPECT_EQ(diagnostic["severity"], 2);
  EXPECT_EQ(diagnostic["source"], "wavecast");
  EXPECT_EQ(diagnostic["code"], "out_of_memory");
}

TEST(WavecastProtocol, MergesSettingsAndRejectsBadValuesWithoutChangingAnything) {
  Settings settings;
  mergeSettings(settings, Json::parse(R"({"targets":"H100, T4","batchSize":64,"trigger":"manual",
                                "lineDiagnostics":true,"unknown":1})"),
                "settings");
  EXPECT_EQ(settings.targets, (std::vector<std::string>{"H100", "T4"}));
  EXPECT_EQ(settings.batchSize, 64);
  EXPECT_EQ(settings.trigger, AnalysisTrigger::Manual);
  EXPECT_TRUE(settings.lineDiagnostics);

  EXPECT_EQ(invalidParamsMessage([&] {
              mergeSettings(settings, Json::parse(R"({"targets":["A100"],"batchSize":0})"),
                            "settings");
            }),
            "settings.batchSize must be a positive integer");
  EXPECT_EQ(settings.targets, (std::vector<std::string>{"H100", "T4"}));
  EXPECT_EQ(invalidParamsMessage([&] {
              mergeSettings(settings, Json::parse(R"({"trigger":"always"})"), "settings");
            }),
            "settings.trigger must be \"onSave\" or \"manual\"");

  mergeSettings(settings, Json::parse(R"({"batchSize":null})"), "settings");
  EXPECT_FALSE(settings.batchSize);

  EXPECT_EQ(settings.mode, AnalysisMode::Shape);
  mergeSettings(settings, Json::parse(R"({"mode":"measured"})"), "settings");
  EXPECT_EQ(settings.mode, AnalysisMode::Measured);
  EXPECT_EQ(toJson(settings)["mode"], "measured");
  EXPECT_EQ(
      invalidParamsMessage(
          [&] { mergeSettings(settings, Json::parse(R"({"mode":"cuda"})"), "settings"); }),
      "settings.mode must be \"shape\" (no GPU needed) or \"measured\" (on this machine's GPU)");
  EXPECT_EQ(settings.mode, AnalysisMode::Measured);

  EXPECT_FALSE(settings.compile);
  EXPECT_TRUE(toJson(settings)["compile"].is_null());
  mergeSettings(settings, Json::parse(R"({"compile":"max-autotune-no-cudagraphs"})"), "settings");
  EXPECT_EQ(settings.compile, CompileMode::MaxAutotuneNoCudagraphs);
  EXPECT_EQ(toJson(settings)["compile"], "max-autotune-no-cudagraphs");
  EXPECT_EQ(invalidParamsMessage([&] {
              mergeSettings(settings, Json::parse(R"({"compile":"inductor"})"), "settings");
            }),
            "settings.compile must be null (as the script says) or a torch.compile mode: "
            "default, reduce-overhead, max-autotune or max-autotune-no-cudagraphs");
  EXPECT_EQ(settings.compile, CompileMode::MaxAutotuneNoCudagraphs);
  mergeSettings(settings, Json::parse(R"({"compile":null})"), "settings");
  EXPECT_FALSE(settings.compile);
}

// Multi-GPU targets as words or as the structured form (GPU, count, layout, system); the
// words go to the one layout parser (parseParallelTarget) in the daemon.
TEST(WavecastProtocol, ParallelTargetsAsWordsOrObjects) {
  Settings settings;
  mergeSettings(settings, Json::parse(R"({"parallelTargets":["8x H100-SXM, FSDP",
      {"gpu":"A100-80GB","count":16,"layout":"tp2","system":"HGX-A100-80GB"},
      {"target":"4x L4","system":"L4x8-PCIe"}]})"),
                "settings");
  ASSERT_EQ(settings.parallelTargets.size(), 3u);
  EXPECT_EQ(settings.parallelTargets[0], (ParallelTargetSetting{"8x H100-SXM, FSDP", ""}));
  EXPECT_EQ(settings.parallelTargets[1],
            (ParallelTargetSetting{"16xA100-80GB, tp2", "HGX-A100-80GB"}));
  EXPECT_EQ(settings.parallelTargets[2], (ParallelTargetSetting{"4x L4", "L4x8-PCIe"}));
  EXPECT_EQ(toJson(settings)["parallelTargets"][0], "8x H100-SXM, FSDP");
  EXPECT_EQ(toJson(settings)["parallelTargets"][1]["system"], "HGX-A100-80GB");

  EXPECT_EQ(invalidParamsMessage([&] {
              mergeSettings(settings,
                            Json::parse(R"({"parallelTargets":[{"gpu":"H100","count":0}]})"),
                            "settings");
            }),
            "settings.parallelTargets[0].count must be a positive integer");
  EXPECT_EQ(invalidParamsMessage([&] {
              mergeSettings(settings, Json::parse(R"({"parallelTargets":[" , "]})"), "settings");
            }),
            "settings.parallelTargets[0] names no GPU count and GPU, e.g. \"8x H100-SXM, FSDP\"");
  EXPECT_EQ(settings.parallelTargets.size(), 3u) << "a bad value changes nothing";
  mergeSettings(settings, Json::parse(R"({"parallelTargets":null})"), "settings");
  EXPECT_TRUE(settings.parallelTargets.empty());
}

TEST(WavecastProtocol, VersionMismatchSaysWhichSideToUpdate) {
  EXPECT_FALSE(checkProtocolVersion(kProtocolVersion));
  auto newerClient = checkProtocolVersion(kProtocolVersion + 1);
  ASSERT_TRUE(newerClient);
  EXPECT_NE(std::string(newerClient->what()).find("update the wavecast daemon"), std::string::npos);
  EXPECT_EQ(newerClient->data()["update"], "server");
  EXPECT_EQ(newerClient->data()["client_protocol_version"], kProtocolVersion + 1);
  EXPECT_EQ(newerClient->data()["server_protocol_version"], kProtocolVersion);
  auto olderClient = checkProtocolVersion(0);
  ASSERT_TRUE(olderClient);
  EXPECT_NE(std::string(olderClient->what()).find("update the editor extension"),
            std::string::npos);
}

TEST(WavecastProtocol, ReadsTheProtocolVersionInEitherSpelling) {
  EXPECT_EQ(initializationOptionsFromJson(Json::parse(R"({"protocol_version":2})")).protocolVersion,
            2);
  // A version-1 client's camelCase key, so that it can be told to update.
  EXPECT_EQ(initializationOptionsFromJson(Json::parse(R"({"protocolVersion":1})")).protocolVersion,
            1);
  EXPECT_FALSE(initializationOptionsFromJson(Json::parse(R"({"batchSize":8})")).protocolVersion);
}

TEST(WavecastProtocol, SendsGpusWithTheGpuFilesNames) {
  GpuInfo gpu{"T4", "Tesla T4", "7.5",          40,   16,  320, 8.1, 0, 65,
              0,    0.35,       "PCIe 3.0 x16", 12.2, 12.9};
  EXPECT_EQ(toJson(gpu), Json::parse(R"({"id":"T4","name":"Tesla T4","compute_capability":"7.5",
    "sms":40,"memory_gib":16.0,"memory_bandwidth_gbs":320.0,
    "peak_tflops":{"fp32":8.1,"tf32":0.0,"fp16":65.0,"bf16":0.0},
    "host_link":{"name":"PCIe 3.0 x16","host_to_device_gbs":12.2,"device_to_host_gbs":12.9},
    "price_per_hour_usd":0.35})"));
}

TEST(WavecastProtocol, DecodesCustomParams) {
  EXPECT_EQ(setTargetsFromJson(Json::parse(R"({"gpus":["H100","t4"]})")).gpus,
            (std::vector<std::string>{"H100", "t4"}));
  EXPECT_EQ(invalidParamsMessage([] { setTargetsFromJson(Json::parse(R"({"gpus":[]})")); }),
            "params.gpus must name at least one GPU (see wavecast/listGpus)");
  auto batch = setBatchSizeFromJson(Json::parse(R"({"uri":"file:///a.py","batch_size":null})"));
  EXPECT_FALSE(batch.batchSize);
  EXPECT_EQ(
      invalidParamsMessage([] { setBatchSizeFromJson(Json::parse(R"({"uri":"file:///a"})")); }),
      "params.batch_size is required (an integer, or null for the default)");
  EXPECT_EQ(analyzeFromJson(Json::parse(R"({"uri":"file:///a.py","batch_size":8})")).batchSize, 8);
  EXPECT_EQ(invalidParamsMessage(
                [] { analyzeFromJson(Json::parse(R"({"uri":"file:///a.py","batch_size":0})")); }),
            "params.batch_size must be a positive integer");
}

TEST(WavecastProtocol, SerialisesResults) {
  Results results{"file:///a.py", ResultsState::Error, 3, nullptr,
                  ErrorInfo{"syntax_error", "invalid syntax", "/a.py", 4, "fix it"}};
  Json json = Json::parse(toJsonText(results));
  EXPECT_EQ(json["state"], "error");
  EXPECT_EQ(json["content_version"], 3);
  EXPECT_TRUE(json["prediction"].is_null());
  EXPECT_EQ(json["error"]["line"], 4);
}

TEST(WavecastProtocol, SerialisesResultsWithThePredictionTextAsIs) {
  Results results{"file:///a.py", ResultsState::Ready, std::nullopt,
                  std::make_shared<const std::string>(R"({"batch_size":8,"gpus":["T4"]})"),
                  std::nullopt};
  const Json json = Json::parse(toJsonText(results));
  EXPECT_EQ(json["prediction"]["batch_size"], 8);
  EXPECT_EQ(json["prediction"]["gpus"], Json::array({"T4"}));
  EXPECT_TRUE(json["content_version"].is_null());
  EXPECT_TRUE(json["error"].is_null());
  EXPECT_EQ(json["uri"], "file:///a.py");
  const Json response = Json::parse(encodeResultText(7, toJsonText(results)));
  EXPECT_EQ(response["jsonrpc"], "2.0");
  EXPECT_EQ(response["id"], 7);
  EXPECT_EQ(response["result"], json);
}

} // namespace
} // namespace wavecast::protocol
