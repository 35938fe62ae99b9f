// Memory figures: the tracer's saved-for-backward and peak live bytes when the trace has
// them, the upper bound otherwise, per-GPU workspace, fitsInMemory and the JSON fields.
#include "results_json.h"
#include "wavecast/predictor/calibration.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/predictor.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace wavecast {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

const GpuDatabase& db() {
  static const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  return database;
}

// A trace document as the tracer writes it: linear (line 5) -> relu (line 6) -> sum
// (line 7), backward credited to those lines, an SGD step on line 9. The relu output
// (4 GiB) is what autograd keeps; the tensors peak at 14 GiB in backward.
nlohmann::json tracedDocument() {
  const auto tensor = [](std::vector<int64_t> shape) {
    return nlohmann::json{{"shape", shape}, {"dtype", "float32"}, {"contiguous", true}};
  };
  const auto op = [](int id, const char* name, const char* phase, int line, nlohmann::json inputs,
                     nlohmann::json outputs) {
    return nlohmann::json{{"id", id},
                          {"name", name},
                          {"phase", phase},
                          {"inputs", std::move(inputs)},
                          {"outputs", std::move(outputs)},
                          {"loc", {{"file", "/p/model.py"}, {"line", line}}}};
  };
  const auto x = tensor({1024, 1024});
  const auto w = tensor({1024, 1024});
  const auto big = tensor({1024, 1024, 1024}); // 4 GiB
  nlohmann::json ops = nlohmann::json::array();
  ops.push_back(op(0, "aten::mm", "forward", 5, {x, w}, {big}));
  ops.push_back(op(1, "aten::relu", "forward", 6, {big}, {big}));
  ops.back()["saved_bytes"] = 4 * kGiB;
  ops.push_back(op(2, "aten::sum", "forward", 7, {big}, {tensor({})}));
  ops.push_back(op(3, "aten::threshold_backward", "backward", 6, {big, big}, {big}));
  ops.push_back(op(4, "aten::mm", "backward", 5, {big, x}, {w}));
  ops.push_back(op(5, "aten::add_", "optimizer", 9, {w, w}, nlohmann::json::array()));
  return {{"format", "wavecast-trace"},
          {"version", 1},
          {"batch_size", 1024},
          {"ops", ops},
          {"memory",
           {{"parameters_bytes", 4 * kMiB},
            {"gradients_bytes", 4 * kMiB},
            {"optimizer_state_bytes", 0},
            {"activations_saved_bytes", 4 * kGiB},
            {"peak_live_bytes", 14 * kGiB},
            {"peak_phase", "backward"},
            {"peak_op_id", 3}}}};
}

// The document's mm runs in forward (the script's thread) and in backward (autograd's
// device thread): two cuBLAS handles, each with its workspace.
int64_t cublasWorkspace(const DeviceSpec& gpu, const PredictorOptions& options) {
  return 2 * (gpu.computeCapabilityMajor >= 9 ? options.cublasWorkspaceBytesSm90
                                              : options.cublasWorkspaceBytes);
}

TEST(Memory, TraceReaderKeepsTheTracerFigures) {
  const Trace trace = traceFromJson(tracedDocument());
  EXPECT_EQ(trace.memory.activationsSavedBytes, 4 * kGiB);
  EXPECT_EQ(trace.memory.peakLiveBytes, 14 * kGiB);
  EXPECT_EQ(trace.memory.peakPhase, Phase::Backward);
  EXPECT_EQ(trace.memory.peakOpId, 3);
  EXPECT_EQ(trace.ops[1].savedBytes, 4 * kGiB);
  EXPECT_FALSE(trace.ops[0].savedBytes.has_value());
  EXPECT_FALSE(trace.ops[0].liveBytes.has_value());
  // Written back as read.
  const nlohmann::json again = traceToJson(trace);
  EXPECT_EQ(again["memory"]["peak_live_bytes"], 14 * kGiB);
  EXPECT_EQ(again["memory"]["peak_phase"], "backward");
  EXPECT_EQ(again["ops"][1]["saved_bytes"], 4 * kGiB);
  EXPECT_FALSE(again["ops"][0].contains("saved_bytes"));
}

TEST(Memory, GradientsSetToNoneCountAsFarAsBackwardMadeThem) {
  // The tracer saw zero_grad(set_to_none=True) before the forward: at the peak only 1 MiB
  // of the 4 MiB of gradients exists. The peak's parts still sum to the peak, and the
  // activations are what is left of it beside that 1 MiB.
  nlohmann::json doc = tracedDocument();
  doc["memory"]["gradients_at_peak_bytes"] = 1 * kMiB;
  const Trace trace = traceFromJson(doc);
  EXPECT_EQ(trace.memory.gradientsAtPeakBytes, 1 * kMiB);
  EXPECT_EQ(traceToJson(trace)["memory"]["gradients_at_peak_bytes"], 1 * kMiB);
  const MemoryEstimate memory = estimateMemory(trace, *db().find("A10"), PredictorOptions{});
  EXPECT_EQ(memory.gradientsBytes, 1 * kMiB);
  EXPECT_EQ(memory.activationsBytes, 14 * kGiB - 5 * kMiB);
  EXPECT_EQ(memory.tensorBytes(), 14 * kGiB);
}

TEST(Memory, TracedPeakGivesTheActivations) {
  const Trace trace = traceFromJson(tracedDocument());
  const PredictorOptions options;
  const DeviceSpec& a10 = *db().find("A10");
  const MemoryEstimate memory = estimateMemory(trace, a10, options);
  EXPECT_EQ(memory.activationsSource, ActivationsSource::Traced);
  EXPECT_EQ(memory.weightsBytes, 4 * kMiB);
  EXPECT_EQ(memory.gradientsBytes, 4 * kMiB);
  // Everything live at the peak that is not weights, gradients or optimizer state.
  EXPECT_EQ(memory.activationsBytes, 14 * kGiB - 8 * kMiB);
  EXPECT_EQ(memory.activationsSavedBytes, 4 * kGiB);
  EXPECT_EQ(memory.peakPhase, Phase::Backward);
  EXPECT_EQ(memory.peakOpId, 3);
  // Allocated: the 14 GiB of tensors and cuBLAS's workspace. No convolution, and the kept
  // relu output is a whole number of 2 MiB segments: reserved adds nothing. Process: + the
  // CUDA context.
  EXPECT_EQ(memory.allocatedPeakBytes(), 14 * kGiB + cublasWorkspace(a10, options));
  EXPECT_EQ(memory.reservedPeakBytes(), memory.allocatedPeakBytes());
  EXPECT_EQ(memory.processPeakBytes(), memory.reservedPeakBytes() + options.runtimeReserveBytes);
  EXPECT_EQ(memory.workspaceBytes(), options.runtimeReserveBytes + cublasWorkspace(a10, options));
  EXPECT_EQ(memory.peakBytes(), memory.processPeakBytes());
}

TEST(Memory, AllocatorBlocksAsTheCachingAllocatorRoundsThem) {
  EXPECT_EQ(allocatorBlockBytes(0), 0);
  EXPECT_EQ(allocatorBlockBytes(4), 512); // a scalar takes the smallest block
  EXPECT_EQ(allocatorBlockBytes(512), 512);
  EXPECT_EQ(allocatorBlockBytes(513), 1024);
  EXPECT_EQ(allocatorBlockBytes(3 * kMiB + 1), 3 * kMiB + 512); // under 10 MiB: 512 B steps
  EXPECT_EQ(allocatorBlockBytes(10 * kMiB - 1), 10 * kMiB);     // 512 B up to 10 MiB exactly
  EXPECT_EQ(allocatorBlockBytes(10 * kMiB + 1), 12 * kMiB);     // a segment of 2 MiB steps
  EXPECT_EQ(allocatorBlockBytes(4 * kGiB), 4 * kGiB);
}

TEST(Memory, ReservedAddsTheRoundingOfKeptTensorsAndTheConvolutionWorkspace) {
  // The relu output kept for backward becomes 11 MiB + 4 bytes: its segment is 12 MiB.
  nlohmann::json doc = tracedDocument();
  const nlohmann::json odd = {{"shape", {11 * kMiB + 4}}, {"dtype", "uint8"}};
  doc["ops"][1]["outputs"] = {odd};
  doc["ops"][1]["saved_bytes"] = 11 * kMiB + 4;
  const PredictorOptions options;
  const MemoryEstimate memory = estimateMemory(traceFromJson(doc), *db().find("T4"), options);
  EXPECT_EQ(memory.reservedPeakBytes() - memory.allocatedPeakBytes(), kMiB - 4);
  EXPECT_LT(memory.allocatedPeakBytes(), memory.reservedPeakBytes());
  EXPECT_LT(memory.reservedPeakBytes(), memory.processPeakBytes());
}

TEST(Memory, ReservedTakesTheTracersReplayOfTheCachingAllocator) {
  // The tracer's replay reserved 15 GiB for the 14 GiB peak: its fragmentation replaces
  // the rounding of the kept tensors (the odd relu output would add 1 MiB - 4 bytes).
  nlohmann::json doc = tracedDocument();
  const nlohmann::json odd = {{"shape", {11 * kMiB + 4}}, {"dtype", "uint8"}};
  doc["ops"][1]["outputs"] = {odd};
  doc["ops"][1]["saved_bytes"] = 11 * kMiB + 4;
  doc["memory"]["peak_reserved_bytes"] = 15 * kGiB;
  const Trace trace = traceFromJson(doc);
  EXPECT_EQ(trace.memory.peakReservedBytes, 15 * kGiB);
  EXPECT_EQ(traceToJson(trace)["memory"]["peak_reserved_bytes"], 15 * kGiB);
  const MemoryEstimate memory = estimateMemory(trace, *db().find("T4"), PredictorOptions{});
  EXPECT_EQ(memory.reservedPeakBytes() - memory.allocatedPeakBytes(), 1 * kGiB);
}

TEST(Memory, FitsInMemoryUsesTheProcessTotal) {
  nlohmann::json doc = tracedDocument();
  doc["memory"]["peak_live_bytes"] = 14 * kGiB + 3 * kGiB / 4;
  const Trace trace = traceFromJson(doc);
  // 14.75 GiB allocated, + the 0.5 GiB CUDA context: not on a 15 GiB T4, yes on a 24 GiB L4.
  const Prediction p = Predictor().predict(trace, db().resolve({"T4,L4"}));
  ASSERT_EQ(p.summaries.size(), 2u);
  EXPECT_FALSE(p.summaries[0].fitsInMemory);
  EXPECT_TRUE(p.summaries[1].fitsInMemory);
  EXPECT_LT(p.summaries[0].memory.allocatedPeakBytes(), 15 * kGiB);
  EXPECT_GT(p.summaries[0].memory.processPeakBytes(), 15 * kGiB);
  EXPECT_LT(p.summaries[0].memory.processPeakBytes(), 16 * kGiB);
  const advisory::OutOfMemory* t4 = nullptr;
  for (const Advisory& advisory : p.advisories)
    if (const auto* facts = advisory.as<advisory::OutOfMemory>())
      t4 = facts;
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->gpu, "T4");
  EXPECT_EQ(t4->peakBytes, p.summaries[0].memory.peakBytes());
  EXPECT_EQ(t4->capacityBytes, p.summaries[0].memoryCapacityBytes);
  EXPECT_FALSE(t4->activationsUpperBound);

  // The same ops without the tracer's figures: every forward output counts as kept
  // (mm 4 GiB + relu 4 GiB + sum); the warning says it is an upper bound.
  nlohmann::json older = tracedDocument();
  older["memory"] = {{"parameters_bytes", 4 * kMiB}, {"gradients_bytes", 4 * kMiB}};
  for (auto& op : older["ops"])
    op.erase("saved_bytes");
  const Prediction upper = Predictor().predict(traceFromJson(older), db().resolve({"P4"}));
  EXPECT_EQ(upper.summaries[0].memory.activationsSource, ActivationsSource::UpperBound);
  EXPECT_EQ(upper.summaries[0].memory.activationsBytes, 8 * kGiB + 4);
  EXPECT_FALSE(upper.summaries[0].fitsInMemory); // 8 GiB P4
  ASSERT_FALSE(upper.advisories.empty());
  const auto* p4 = upper.advisories.back().as<advisory::OutOfMemory>();
  ASSERT_NE(p4, nullptr);
  EXPECT_TRUE(p4->activationsUpperBound);
}

TEST(Memory, WorkspaceDependsOnTheGpu) {
  const Trace trace = traceFromJson(tracedDocument());
  const PredictorOptions options;
  const MemoryEstimate t4 = estimateMemory(trace, *db().find("T4"), options);
  const MemoryEstimate h100 = estimateMemory(trace, *db().find("H100-SXM"), options);
  // One workspace for forward's GEMMs, one for backward's: 2 x (32 MiB - (8 MiB + 128 KiB)).
  EXPECT_EQ(h100.cublasWorkspaceBytes, 64 * kMiB);
  EXPECT_EQ(t4.cublasWorkspaceBytes, 2 * (8 * kMiB + 128 * 1024));
  EXPECT_EQ(h100.workspaceBytes() - t4.workspaceBytes(), 48 * kMiB - 256 * 1024);

  // Without GEMMs in backward only the script's thread holds one; without any, none.
  nlohmann::json forwardOnly = tracedDocument();
  forwardOnly["ops"][4]["name"] = "aten::threshold_backward";
  EXPECT_EQ(estimateMemory(traceFromJson(forwardOnly), *db().find("H100-SXM"), options)
                .cublasWorkspaceBytes,
            32 * kMiB);
  forwardOnly["ops"][0]["name"] = "aten::relu";
  EXPECT_EQ(estimateMemory(traceFromJson(forwardOnly), *db().find("H100-SXM"), options)
                .cublasWorkspaceBytes,
            0);

  PredictorOptions lean;
  lean.runtimeReserveBytes = 0;
  lean.cublasWorkspaceBytes = 0;
  EXPECT_EQ(estimateMemory(trace, *db().find("T4"), lean).workspaceBytes(), 0);
}

TEST(Memory, ConvolutionWorkspaceIsBoundedByItsLargestOperand) {
  nlohmann::json doc = tracedDocument();
  doc["ops"][0]["name"] = "aten::convolution";
  doc["ops"][0]["inputs"] = {{{"shape", {8, 64, 56, 56}}, {"dtype", "float32"}},
                             {{"shape", {64, 64, 3, 3}}, {"dtype", "float32"}}};
  doc["ops"][0]["outputs"] = {{{"shape", {8, 64, 56, 56}}, {"dtype", "float32"}}};
  PredictorOptions options;
  const DeviceSpec& t4 = *db().find("T4");
  const MemoryEstimate withConv = estimateMemory(traceFromJson(doc), t4, options);
  // The same iteration with an op that is neither convolution nor GEMM in its place (the
  // forward mm's cuBLAS workspace goes with it in both).
  nlohmann::json plain = tracedDocument();
  plain["ops"][0]["name"] = "aten::relu";
  const MemoryEstimate without = estimateMemory(traceFromJson(plain), t4, options);
  // Freed after the convolution, so reserved, not allocated.
  EXPECT_EQ(withConv.reservedPeakBytes() - without.reservedPeakBytes(),
            int64_t{8} * 64 * 56 * 56 * 4);
  EXPECT_EQ(withConv.allocatedPeakBytes(), without.allocatedPeakBytes());
  options.convWorkspaceLimitBytes = kMiB;
  EXPECT_EQ(estimateMemory(traceFromJson(doc), t4, options).workspaceBytes() -
                without.workspaceBytes(),
            kMiB);
}

// The tracedDocument with its forward mm made a convolution whose output is 49 MiB, and the
// bytes live once each op's outputs exist: 10 GiB at the convolution, 14 GiB (the peak) at
// the threshold backward.
nlohmann::json liveBytesDocument(int64_t liveAtConvolution) {
  nlohmann::json doc = tracedDocument();
  doc["ops"][0]["name"] = "aten::convolution";
  doc["ops"][0]["inputs"] = {{{"shape", {8, 64, 56, 56}}, {"dtype", "float32"}},
                             {{"shape", {64, 64, 3, 3}}, {"dtype", "float32"}}};
  doc["ops"][0]["outputs"] = {{{"shape", {8, 64, 56, 56}}, {"dtype", "float32"}}};
  doc["ops"][0]["live_bytes"] = liveAtConvolution;
  doc["ops"][3]["live_bytes"] = 14 * kGiB;
  return doc;
}

TEST(Memory, AWorkspaceCountsAsAllocatedWhereLiveTensorsPlusItTopTheTensorsPeak) {
  const int64_t output = int64_t{8} * 64 * 56 * 56 * 4;
  PredictorOptions options;
  const DeviceSpec& t4 = *db().find("T4");
  // The convolution's workspace (its largest operand, without a calibration) on top of
  // what is live there stays under the 14 GiB peak: allocated is the tensors' peak, and
  // the workspace's segment is cached (reserved).
  const MemoryEstimate under =
      estimateMemory(traceFromJson(liveBytesDocument(10 * kGiB)), t4, options);
  EXPECT_EQ(under.transientBytes, 0);
  EXPECT_EQ(under.allocatedPeakBytes(), 14 * kGiB + under.cublasWorkspaceBytes);
  EXPECT_EQ(under.reservedPeakBytes() - under.allocatedPeakBytes(), output);
  // 14 GiB - 1 MiB live at the convolution: its workspace tops the peak by all but that
  // MiB, which max_memory_allocated() counts; reserved keeps the one workspace, not two.
  const MemoryEstimate over =
      estimateMemory(traceFromJson(liveBytesDocument(14 * kGiB - kMiB)), t4, options);
  EXPECT_EQ(over.transientBytes, output - kMiB);
  EXPECT_EQ(over.allocatedPeakBytes(), 14 * kGiB + over.cublasWorkspaceBytes + output - kMiB);
  EXPECT_EQ(over.reservedPeakBytes(), under.reservedPeakBytes());
  EXPECT_EQ(over.tensorBytes(), under.tensorBytes()) << "the tensors' own peak is unchanged";
  // An op without live bytes (an older trace, a split layout) adds nothing to allocated.
  nlohmann::json older = liveBytesDocument(14 * kGiB - kMiB);
  older["ops"][0].erase("live_bytes");
  EXPECT_EQ(estimateMemory(traceFromJson(older), t4, options).allocatedPeakBytes(),
            under.allocatedPeakBytes());
}

TEST(Memory, ACalibratedGpuUsesItsMeasuredWorkspace) {
  nlohmann::json doc = liveBytesDocument(14 * kGiB - kMiB);
  doc["precision"] = {{"cudnn_tf32", false}};
  const Trace trace = traceFromJson(doc);
  EXPECT_EQ(traceToJson(trace)["ops"][0]["live_bytes"], 14 * kGiB - kMiB);
  const DeviceSpec& t4 = *db().find("T4");
  // T4's calibration measured this very convolution holding 3 MiB while it ran.
  nlohmann::json entry = doc["ops"][0];
  entry.erase("id");
  entry.erase("loc");
  entry.erase("live_bytes");
  entry["precision"] = "fp32";
  entry["median_ms"] = 0.1;
  entry["transient_bytes"] = 3 * kMiB;
  const nlohmann::json calibration = {{"format", "wavecast-calibration"},
                                      {"version", 1},
                                      {"complete", true},
                                      {"gpu", {{"name", "Tesla T4"}}},
                                      {"entries", {entry}}};
  PredictorOptions options;
  options.calibrations[t4.id] =
      std::make_shared<const CalibrationTable>(calibrationFromJson(calibration, "t4.json"));
  const MemoryEstimate memory = estimateMemory(trace, t4, options);
  EXPECT_EQ(memory.transientBytes, 2 * kMiB);
  // Another GPU has no calibration: the largest operand.
  const int64_t byOperand = int64_t{8} * 64 * 56 * 56 * 4 - kMiB;
  const MemoryEstimate a10 = estimateMemory(trace, *db().find("A10"), options);
  EXPECT_EQ(a10.transientBytes, byOperand);
  // A file without transient memory (written before calibrate read the allocator) times the
  // op but does not say its workspace: the largest operand again.
  nlohmann::json older = calibration;
  older["entries"][0].erase("transient_bytes");
  options.calibrations[t4.id] =
      std::make_shared<const CalibrationTable>(calibrationFromJson(older, "t4-older.json"));
  EXPECT_EQ(estimateMemory(trace, t4, options).transientBytes, byOperand);
}

TEST(Memory, InferenceTraceHasNoGradients) {
  nlohmann::json doc = tracedDocument();
  nlohmann::json forward = nlohmann::json::array();
  for (const auto& op : doc["ops"])
    if (op["phase"] == "forward")
      forward.push_back(op);
  doc["ops"] = forward;
  doc["memory"]["peak_live_bytes"] = 8 * kGiB;
  doc["memory"]["peak_phase"] = "forward";
  const MemoryEstimate memory =
      estimateMemory(traceFromJson(doc), *db().find("A10"), PredictorOptions{});
  EXPECT_EQ(memory.gradientsBytes, 0);
  EXPECT_EQ(memory.activationsBytes, 8 * kGiB - 4 * kMiB);
  EXPECT_EQ(memory.peakPhase, Phase::Forward);
}

TEST(Memory, ActivationBytesPerLine) {
  const Prediction p = Predictor().predict(traceFromJson(tracedDocument()), db().resolve({"A10"}));
  std::map<int, int64_t> byLine;
  for (const auto& line : p.lines)
    byLine[line.loc.line] = line.activationBytes;
  EXPECT_EQ(byLine, (std::map<int, int64_t>{{5, 0}, {6, 4 * kGiB}, {7, 0}, {9, 0}}));

  // Older trace: each line's fresh forward outputs.
  nlohmann::json older = tracedDocument();
  older["memory"] = {{"parameters_bytes", 4 * kMiB}};
  const Prediction upper = Predictor().predict(traceFromJson(older), db().resolve({"A10"}));
  byLine.clear();
  for (const auto& line : upper.lines)
    byLine[line.loc.line] = line.activationBytes;
  EXPECT_EQ(byLine, (std::map<int, int64_t>{{5, 4 * kGiB}, {6, 4 * kGiB}, {7, 4}, {9, 0}}));
}

TEST(Memory, JsonCarriesTheMemoryFields) {
  const Trace trace = traceFromJson(tracedDocument());
  const auto doc = resultsJson(Predictor().predict(trace, db().resolve({"L4"})), traceFacts(trace));
  const auto& memory = doc["summaries"][0]["memory"];
  EXPECT_EQ(memory["activations_source"], "traced");
  EXPECT_EQ(memory["activations_saved_bytes"], 4 * kGiB);
  EXPECT_EQ(memory["activations_bytes"], 14 * kGiB - 8 * kMiB);
  EXPECT_EQ(memory["peak_phase"], "backward");
  EXPECT_EQ(memory["peak_op_id"], 3);
  EXPECT_EQ(memory["peak_bytes"].get<int64_t>(),
            memory["weights_bytes"].get<int64_t>() + memory["gradients_bytes"].get<int64_t>() +
                memory["optimizer_state_bytes"].get<int64_t>() +
                memory["activations_bytes"].get<int64_t>() +
                memory["workspace_bytes"].get<int64_t>());
  // Two cuBLAS workspaces (forward's and backward's mm) of 8 MiB + 128 KiB on the L4.
  EXPECT_EQ(memory["peak_allocated_bytes"], 14 * kGiB + 2 * (8 * kMiB + 128 * 1024));
  EXPECT_EQ(memory["peak_reserved_bytes"], memory["peak_allocated_bytes"]);
  EXPECT_EQ(memory["process_bytes"].get<int64_t>(),
            memory["peak_reserved_bytes"].get<int64_t>() + 512 * kMiB);
  EXPECT_EQ(memory["peak_bytes"], memory["process_bytes"]);
  EXPECT_EQ(doc["summaries"][0]["fits_in_memory"], true);
  const auto& lines = doc["lines"];
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1]["line"], 6);
  EXPECT_EQ(lines[1]["activation_bytes"], 4 * kGiB);
  EXPECT_EQ(lines[0]["activation_bytes"], 0);
  // Keys of an op entry, in the documented set.
  const auto& op = doc["ops"][1];
  for (const char* key : {"id", "name", "phase", "file", "line", "module", "family", "flops",
                          "bytes", "approximate", "per_gpu"})
    EXPECT_TRUE(op.contains(key)) << key;
  EXPECT_EQ(op["per_gpu"][0]["gpu"], "L4");
  EXPECT_EQ(op["per_gpu"][0]["method"], "roofline");
  EXPECT_GT(op["per_gpu"][0]["time_ms"].get<double>(), 0);
}

} // namespace
} // namespace wavecast
