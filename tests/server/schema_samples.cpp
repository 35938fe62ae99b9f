// Writes what the daemon's real encoders send, one JSON file per message named after its
// definition in protocol/schema/wavecast.schema.json (<Definition>.<case>.json), into
// $WAVECAST_SCHEMA_SAMPLES; tests/protocol/validate_schema.py then checks each against
// its definition (the ctest protocol_schema). The prediction is a real Predictor's, with
// advisories and trace warnings, served through the language server.
#include "lsp/views.h"
#include "op_record_builders.h"
#include "results_json.h"
#include "server_fixture.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/predictor.h"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace wavecast::lsp::testing {
namespace {

using wavecast::testing::tensor;

OpRecord op(int64_t id, std::string name, Phase phase, const std::string& file, int line,
            std::vector<std::optional<TensorMeta>> inputs,
            std::vector<std::optional<TensorMeta>> outputs, std::string module = "") {
  return wavecast::testing::tracedOp(id, std::move(name), phase, {file, line, "wavecast_iteration"},
                                     std::move(inputs), std::move(outputs), std::move(module));
}

// A conv, an op without a formula of its own (an approximate_op advisory), an optimizer
// step and a batch from DataLoader workers, with 20 GiB of weights: out of memory on the T4
// (16 GiB).
Trace sampleTrace(const std::string& file) {
  Trace trace;
  trace.entryFile = file;
  trace.torchVersion = "2.11.0+cpu";
  trace.batchSize = 32;
  trace.memory.parametersBytes = 20LL << 30;
  trace.memory.gradientsBytes = 1000000;
  trace.memory.optimizerStateBytes = 2000000;
  const auto x = tensor({32, 3, 32, 32});
  const auto w = tensor({16, 3, 3, 3});
  const auto y = tensor({32, 16, 32, 32});
  trace.ops.push_back(
      op(0, "aten::convolution", Phase::Forward, file, 3, {x, w, tensor({16})}, {y}, "conv"));
  trace.ops.back().args = {{"stride", std::vector<int64_t>{1, 1}},
                           {"padding", std::vector<int64_t>{1, 1}}};
  trace.ops.push_back(op(1, "aten::special_bessel_j0", Phase::Forward, file, 3, {y}, {y}));
  trace.ops.push_back(op(2, "aten::convolution_backward", Phase::Backward, file, 3, {y, x, w},
                         {std::nullopt, w, tensor({16})}, "conv"));
  trace.ops.back().args = {{"output_mask", std::vector<int64_t>{0, 1, 1}}};
  trace.ops.back().forwardId = 0;
  trace.ops.push_back(op(3, "aten::_foreach_add_", Phase::Optimizer, file, 5,
                         {w, tensor({16}), w, tensor({16})}, {}));
  trace.ops.back().args = {{"num_tensors", int64_t{2}}};
  // A script's batch: 500 ms to make in one process, made by 2 DataLoader workers beside
  // the loop (input-bound).
  trace.ops.push_back(op(4, "wavecast::data_loading", Phase::Forward, file, 2, {}, {}));
  trace.ops.back().onHost = true;
  trace.ops.back().args = {{"host_ms", 500.0}, {"loader", int64_t{0}}, {"workers", int64_t{2}}};
  // Its copy to the GPU from pageable memory, staged in 20 ms (held by copies).
  trace.ops.push_back(op(5, "wavecast::host_to_device", Phase::Forward, file, 2, {x}, {x}));
  trace.ops.back().args = {
      {"bytes", int64_t{393216}}, {"pinned", false}, {"non_blocking", false}, {"staging_ms", 20.0}};
  TraceWarning loading;
  loading.kind = TraceWarningKind::HostTimeMeasured;
  loading.severity = Severity::Info;
  loading.loc = {file, 2, "<module>"};
  loading.ms = 500;
  loading.count = 2;
  TraceWarning onCpu;
  onCpu.kind = TraceWarningKind::CudaTracedOnCpu;
  onCpu.severity = Severity::Info;
  TraceWarning hostTensor;
  hostTensor.kind = TraceWarningKind::HostTensorWithGpu;
  hostTensor.loc = {file, 3, "wavecast_iteration"};
  hostTensor.origin = SourceLocation{file, 8, "wavecast_input"};
  TraceWarning outside;
  outside.kind = TraceWarningKind::KernelsOutsideOps;
  outside.count = 4;
  outside.ms = 0.25;
  TraceWarning objects;
  objects.kind = TraceWarningKind::UnsupportedDistributed;
  objects.loc = {file, 4, "wavecast_iteration"};
  objects.call = "all_gather_object";
  trace.warnings = {onCpu, hostTensor, outside, objects, loading};
  trace.fallbackOps = {"aten::special_bessel_j0"};
  return trace;
}

class SchemaSamples : public ServerTest {
protected:
  void write(const std::string& definition, const std::string& name, const Json& value) {
    const char* dir = std::getenv("WAVECAST_SCHEMA_SAMPLES");
    ASSERT_NE(dir, nullptr) << "set WAVECAST_SCHEMA_SAMPLES to the folder to write into";
    fs::create_directories(dir);
    std::ofstream(fs::path(dir) / (definition + "." + name + ".json")) << value.dump(2) << "\n";
    ++written_[definition];
  }
  std::map<std::string, int> written_;
};

TEST_F(SchemaSamples, WritesWhatTheEncodersSend) {
  const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  for (const DeviceSpec& spec : database.all())
    write("GpuInfo", spec.id, toJson(gpuInfo(spec)));

  // A real prediction on two GPUs, served as the analyzer's output; its convolution compiled
  // (what compiling changes is an advisory).
  Trace trace = sampleTrace((dir_ / "train.py").string());
  trace.ops.front().compiled = CompileMode::Default;
  AnalysisOutput output;
  output.prediction = Predictor().predict(trace, database.resolve({"H100", "T4"}));
  const Json prediction = resultsJson(output.prediction, traceFacts(trace));
  output.providerLines = {{Provider::Model, 1}, {Provider::Input, 7}, {Provider::Iteration, 9}};
  output.entryFile = trace.entryFile;
  output.sourceFiles = {trace.entryFile};
  output.traceWarnings = trace.warnings;
  output.fallbackOps = trace.fallbackOps;
  output.torchVersion = trace.torchVersion;
  output.pythonEnv = trace.pythonEnv;
  std::set<std::string> advisoryKinds;
  for (const Json& advisory : prediction["advisories"])
    advisoryKinds.insert(advisory["kind"].get<std::string>());
  EXPECT_TRUE(advisoryKinds.count("approximate_op")) << prediction["advisories"];
  EXPECT_TRUE(advisoryKinds.count("out_of_memory")) << prediction["advisories"];
  EXPECT_TRUE(advisoryKinds.count("compiled_against_eager")) << prediction["advisories"];
  EXPECT_TRUE(advisoryKinds.count("input_bound")) << prediction["advisories"];
  EXPECT_TRUE(advisoryKinds.count("held_by_copies")) << prediction["advisories"];
  EXPECT_EQ(prediction["trace_warnings"].size(), 5u);
  write("Prediction", "predictor", prediction);
  // With a multi-GPU layout's section: two pipeline stages of a ZeRO-1, tp 2 layout.
  ParallelSummary layout;
  layout.config.dp = 2;
  layout.config.tp = 2;
  layout.config.pp = 2;
  layout.config.microbatches = 4;
  layout.config.sharding = Sharding::Zero1;
  layout.gpuId = "H100-SXM";
  layout.systemId = "HGX-H100";
  layout.gpus = 8;
  layout.batchPerReplica = 32;
  layout.globalBatch = 64;
  layout.iterationMs = 10;
  layout.communication = {3, 1};
  layout.stages.resize(2);
  layout.stages[1].firstBlock = 6;
  layout.stages[1].lastBlock = 12;
  // What a tensor-parallel layout of a mixture of experts adds.
  layout.advisories.push_back({advisory::ReplicatedExperts{2, 8}});
  const Json withLayout =
      resultsJson(output.prediction, traceFacts(trace), std::vector<ParallelSummary>{layout});
  EXPECT_EQ(withLayout["parallel"][0]["advisories"][0]["kind"], "replicated_experts");
  write("Prediction", "parallel", withLayout);
  analyzer_.setOutput(output);

  Json mismatch = initialize({{"protocolVersion", 1}});
  ASSERT_EQ(mismatch["error"]["code"], -32600);
  write("ProtocolMismatchData", "v1_client", mismatch["error"]["data"]);
  Json reply = initialize({{"protocol_version", protocol::kProtocolVersion}});
  write("WavecastCapability", "advertised",
        reply["result"]["capabilities"]["experimental"]["wavecast"]);

  write("ListGpusResult", "fake", request("wavecast/listGpus", nullptr)["result"]);
  // The settings as the daemon writes them back, with every torch.compile mode it knows.
  for (const CompileMode mode : kCompileModes) {
    protocol::Settings settings;
    settings.compile = mode;
    write("Settings", std::string("compile_") + toString(mode), protocol::toJson(settings));
  }
  write("Settings", "defaults", protocol::toJson(protocol::Settings{}));
  Json unknown = request("wavecast/setTargets", {{"gpus", {"H10"}}});
  ASSERT_EQ(unknown["error"]["code"], -32602);
  write("UnknownGpuData", "h10", unknown["error"]["data"]);
  write("Results", "never_analysed",
        request("wavecast/results", {{"uri", uri("train.py")}})["result"]);

  open("train.py", kScript);
  analyzeTrain();
  write("Results", "ready", request("wavecast/results", {{"uri", uri("train.py")}})["result"]);
  write("SetTargetsResult", "t4", request("wavecast/setTargets", {{"gpus", {"t4"}}})["result"]);
  write("SetBatchSizeResult", "null",
        request("wavecast/setBatchSize",
                {{"uri", uri("train.py")}, {"batch_size", nullptr}})["result"]);
  ProfileError failure;
  failure.kind = ProfileErrorKind::UserException;
  failure.message = "ZeroDivisionError: division by zero";
  failure.file = (dir_ / "train.py").string();
  failure.line = 3;
  failure.hint = "fix the script";
  analyzer_.failNext(failure);
  analyzeTrain();
  write("Results", "failed_keeps_prediction",
        request("wavecast/results", {{"uri", uri("train.py")}})["result"]);

  int n = 0;
  for (const Json& message : sent("wavecast/resultsChanged"))
    write("ResultsChangedParams", std::to_string(n++), message["params"]);
  n = 0;
  for (const Json& message : sent("wavecast/status"))
    write("StatusParams", std::to_string(n++), message["params"]);
  // Each case above was written, and notifications of every state.
  EXPECT_EQ(written_["Results"], 3);
  EXPECT_GE(written_["ResultsChangedParams"], 4);
  EXPECT_GE(written_["StatusParams"], 2);
  EXPECT_GT(written_["GpuInfo"], 20);
}

} // namespace
} // namespace wavecast::lsp::testing
