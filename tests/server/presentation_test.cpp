#include "fake_analyzer.h"
#include "presentation.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

namespace wavecast {
namespace {

using Json = nlohmann::json;

// docs/presentation.md's examples, which vscode-extension/test/unit/presentation.test.ts runs too.
Json presentationCases() {
  std::ifstream in(WAVECAST_PRESENTATION_CASES);
  return Json::parse(in);
}

// null, or a missing key, stands for a number the results do not have.
double number(const Json& value) {
  return value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
}
double number(const Json& object, const char* key) {
  return number(object.value(key, Json()));
}

const std::map<std::string, std::function<std::string(double)>>& numberFormats() {
  static const std::map<std::string, std::function<std::string(double)>> formats = {
      {"formatMs", formatMs},
      {"formatShare", formatShare},
      {"formatBytes", formatBytes},
      {"formatUsd", formatUsd},
      {"formatCount", formatCount}};
  return formats;
}

TEST(Presentation, AScriptThatExitedSaysWhatItLastPrinted) {
  ProfileError error;
  error.kind = ProfileErrorKind::BlockedCall;
  error.message = "the script exited (sys.exit(2)) before its second optimizer step";
  error.hint = "Check the script's arguments.";
  error.file = "train.py";
  error.line = 10;
  error.output =
      "usage: train.py --width W\n  train.py: error: the following arguments are required: "
      "--width\n\n";
  EXPECT_EQ(errorLine(error),
            "train.py:10: the script exited (sys.exit(2)) before its second optimizer "
            "step (Check the script's arguments.); it printed: train.py: error: the "
            "following arguments are required: --width");
  EXPECT_EQ(errorMessage(error),
            "the script exited (sys.exit(2)) before its second optimizer step; it "
            "printed: train.py: error: the following arguments are required: "
            "--width\nCheck the script's arguments.");
  error.kind = ProfileErrorKind::UserException; // its last output need not be about it
  EXPECT_EQ(errorMessage(error), error.message + "\n" + error.hint);
}

TEST(Presentation, EverySectionOfTheSharedCasesIsRunHere) {
  const Json cases = presentationCases();
  for (const auto& [section, examples] : cases.items())
    EXPECT_TRUE(section == "about" || section == "lines" || numberFormats().count(section))
        << "no test runs the section " << section;
}

TEST(Presentation, NumbersReadAsTheSharedCasesSay) {
  const Json cases = presentationCases();
  for (const auto& [name, format] : numberFormats()) {
    ASSERT_FALSE(cases.at(name).empty()) << name;
    for (const Json& example : cases.at(name)) {
      EXPECT_EQ(format(number(example[0])), example[1].get<std::string>())
          << name << "(" << example[0] << ")";
    }
  }
}

TEST(Presentation, LineLabelsAndHoversReadAsTheSharedCasesSay) {
  const Json cases = presentationCases().at("lines");
  ASSERT_FALSE(cases.empty());
  for (const Json& example : cases) {
    SCOPED_TRACE(example.at("name").get<std::string>());
    Prediction prediction;
    prediction.batchSize = example.at("prediction").at("batch_size").get<int64_t>();
    prediction.gpus = example.at("prediction").at("gpus").get<std::vector<std::string>>();
    prediction.learnedModel = example.at("prediction").value("learned_model", std::string());
    GpuMethods methods; // every GPU timed alike ("roofline", "learned")
    for (const Json& name : example.at("prediction").at("methods"))
      for (size_t m = 0; m < kPredictionMethodCount; ++m)
        if (name == toString(static_cast<PredictionMethod>(m)))
          methods.used[m] = true;
    for (const std::string& gpu : prediction.gpus) {
      GpuSummary summary;
      summary.gpuId = gpu;
      summary.methods = methods;
      prediction.summaries.push_back(summary);
    }
    const Json& json = example.at("line");
    LineBreakdown line;
    line.loc = {json.at("file").get<std::string>(), json.at("line").get<int>(), ""};
    line.opNames = json.at("ops").get<std::vector<std::string>>();
    line.opCount = json.at("op_count").get<int>();
    for (const Json& gpu : json.at("per_gpu")) {
      LineTimes times;
      times.forwardMs = number(gpu, "forward_ms");
      times.backwardMs = number(gpu, "backward_ms");
      times.optimizerMs = number(gpu, "optimizer_ms");
      times.shareOfIteration = number(gpu, "share");
      times.gpuMs = number(gpu, "gpu_ms");
      times.gpuIdleMs = number(gpu, "gpu_idle_ms");
      times.hostBound = gpu.value("host_bound", false);
      // The results carry total_ms; the daemon adds the phases. A case must agree with both.
      ASSERT_EQ(times.totalMs(), number(gpu, "total_ms")) << gpu;
      ASSERT_EQ(gpu.at("gpu").get<std::string>(), prediction.gpus.at(line.perGpu.size()));
      line.perGpu.push_back(times);
    }
    std::string hover;
    for (const Json& text : example.at("hover"))
      hover += (hover.empty() ? "" : "\n") + text.get<std::string>();
    EXPECT_EQ(lineLabel(prediction, line), example.at("label").get<std::string>());
    EXPECT_EQ(lineHover(prediction, line), hover);
  }
}

TEST(Presentation, RoundsAnExactTieAwayFromZero) {
  EXPECT_EQ(formatFixed(0.125, 2), "0.13");
  EXPECT_EQ(formatFixed(-0.125, 2), "-0.13");
  EXPECT_EQ(formatFixed(2.5, 0), "3");
  EXPECT_EQ(formatFixed(1.115, 2), "1.11") << "1.115 is stored just below the tie";
}

TEST(Presentation, SummaryAndMemoryTitles) {
  auto output = lsp::testing::sampleOutput("/w/train.py");
  EXPECT_EQ(summaryTitle(output.prediction.summaries[0]),
            "H100-SXM: 10.0 ms/iter \u00b7 3,200 samples/s \u00b7 $0.012/1k samples");
  EXPECT_EQ(memoryTitle(output.prediction),
            "batch 32 \u00b7 peak memory 2.0 GiB \u00b7 fits on all targets");
  output.prediction.summaries[0].hostBound = true;
  output.prediction.summaries[0].gpuMs = 2.5;
  EXPECT_EQ(summaryTitle(output.prediction.summaries[0]),
            "H100-SXM: 10.0 ms/iter \u00b7 3,200 samples/s \u00b7 $0.012/1k samples \u00b7 "
            "host-bound (GPU busy 2.50 ms)");
  output.prediction.summaries[1].fitsInMemory = false;
  EXPECT_EQ(memoryTitle(output.prediction),
            "batch 32 \u00b7 peak memory 2.0 GiB \u00b7 does not fit on T4");
}

TEST(Presentation, AdvisoriesReadAsSentencesWithTheirFigures) {
  EXPECT_EQ(advisoryMessage({advisory::OutOfMemory{"T4", int64_t{2} << 30, int64_t{16} << 30}}),
            "out of memory on T4: the iteration needs about 2.0 GiB, the GPU has 16.0 GiB; lower "
            "the batch size or choose a larger GPU");
  EXPECT_EQ(advisoryMessage({advisory::ReplicatedExperts{4, 32}}),
            "tp 4 splits the Linear layers, not the 32 grouped GEMMs of the mixture of experts: "
            "the ranks of a tp group hold the same experts and run all of their tokens through "
            "them, as a tensor-parallel plan that leaves the experts out does (--ep N spreads "
            "the experts over N data-parallel ranks)");
  EXPECT_EQ(advisoryMessage({advisory::CompiledAgainstEager{"H200", 40.2, 91.8, int64_t{15} << 30,
                                                            int64_t{18} << 30}}),
            "H200: with torch.compile, 40.2 ms an iteration and 15.0 GiB allocated at the peak; "
            "the same ops eagerly, 91.8 ms and 18.0 GiB (compiled: 2.28x as fast)");
  EXPECT_EQ(advisoryMessage({advisory::CompiledAgainstEager{"H200", 41.0, 31.4, 3 << 20, 3 << 20}}),
            "H200: with torch.compile, 41.0 ms an iteration and 3.0 MiB allocated at the peak; "
            "the same ops eagerly, 31.4 ms and 3.0 MiB (compiled: 1.31x as slow)");
  EXPECT_EQ(advisoryMessage({advisory::HostBound{"L4", 8.5, 10, 1.5}}),
            "L4: host-bound: the GPU waits for the CPU to issue work for 8.50 ms of the 10.0 ms "
            "of an iteration (its kernels take 1.50 ms); a larger batch, CUDA graphs or "
            "torch.compile (fewer, larger kernels) would use it better");
  // A compiled script is not told to compile; one under CUDA graphs, not to use them.
  EXPECT_EQ(advisoryMessage({advisory::HostBound{"L4", 8.5, 10, 1.5, CompileMode::Default}}),
            "L4: host-bound: the GPU waits for the CPU to issue work for 8.50 ms of the 10.0 ms "
            "of an iteration (its kernels take 1.50 ms); a larger batch or CUDA graphs "
            "(torch.compile's mode=\"reduce-overhead\": one launch for its kernels) would use it "
            "better");
  EXPECT_EQ(advisoryMessage({advisory::HostBound{"L4", 8.5, 10, 1.5, CompileMode::ReduceOverhead}}),
            "L4: host-bound: the GPU waits for the CPU to issue work for 8.50 ms of the 10.0 ms "
            "of an iteration (its kernels take 1.50 ms); a larger batch would use it better");
  EXPECT_EQ(advisoryMessage({advisory::InputBound{"H100-SXM", 2.83, 19.9, 19.9, 4}}),
            "H100-SXM: input-bound: the loop waits 2.83 ms of the 19.9 ms of an iteration for "
            "its 4 DataLoader workers, which take 19.9 ms to make its batches (as fast as this "
            "CPU made them); more workers, lighter transforms or preprocessed data would feed "
            "the GPU faster");
  EXPECT_EQ(advisoryMessage({advisory::InputBound{"H100-SXM", 95.1, 107, 95.1, 0}}),
            "H100-SXM: input-bound: the loop makes its batches itself, 95.1 ms of the 107 ms of "
            "an iteration (as fast as this CPU made them), while the GPU waits; DataLoader "
            "workers (num_workers) would make them beside the loop");
  EXPECT_NE(advisoryMessage({advisory::InputBound{"L4", 1, 10, 11, 1}})
                .find("its 1 DataLoader worker, which takes 11.0 ms"),
            std::string::npos);
  EXPECT_EQ(advisoryMessage({advisory::HeldByCopies{"T4", 3.25, 40, 38535168, 2, true}}),
            "T4: 2 copies of host tensors to the GPU (36.8 MiB) hold the CPU for 3.25 ms of the "
            "40.0 ms of an iteration (pageable memory is staged on the CPU first); "
            "DataLoader(pin_memory=True) and .to(device, non_blocking=True) would let the CPU "
            "issue the next work while they run");
  EXPECT_NE(advisoryMessage({advisory::HeldByCopies{"T4", 1, 10, 512, 1, false}})
                .find("1 copy of host tensors to the GPU (512 B) hold the CPU for 1.00 ms of the "
                      "10.0 ms of an iteration (non_blocking=False waits for the GPU)"),
            std::string::npos);
  EXPECT_EQ(advisoryMessage({advisory::AttentionSubstituted{"T4", "7.5", AttentionBackend::Flash,
                                                            AttentionBackend::Efficient, 12}}),
            "T4 (compute capability 7.5) has no flash attention: 12 attention ops predicted as "
            "memory-efficient attention, which torch runs there instead");
  EXPECT_EQ(
      advisoryMessage({advisory::ApproximateOp{"aten::frobnicate", CostFamily::Elementwise, 2}}),
      "aten::frobnicate x2 has no formula of its own and was predicted approximately, as "
      "its closest family (elementwise)");
  // An op with a formula that misses something says what.
  EXPECT_EQ(advisoryMessage({advisory::ApproximateOp{"aten::_ctc_loss", CostFamily::Loss, 1,
                                                     CostNote::SerialOverFrames}}),
            "aten::_ctc_loss x1: CTC loss: priced by its tensors, but its kernels step through "
            "the frames one at a time, a latency that price does not count unless a calibration "
            "of the GPU ('wavecast calibrate') measured it");
  EXPECT_EQ(advisoryMessage({advisory::UntrainedGpus{{"L4", "T4"}}}).rfind("L4, T4: not among", 0),
            0u);
  EXPECT_EQ(advisoryMessage({advisory::WaveScalingAssumption{
                "T4", "sgemm_128x128", {LaunchLimit::SharedMemoryPerBlock, 98304, 65536}, 3}}),
            "kernel sgemm_128x128 cannot launch on T4 as recorded (98304 bytes of shared memory "
            "per block exceed the limit of 65536); assumed one block per SM (3 times)");
}

TEST(Presentation, CostNotesNameTheOpAndItsFamily) {
  EXPECT_EQ(costNoteText(CostNote::NoFormula, "aten::frobnicate", CostFamily::Copy),
            "no formula for aten::frobnicate; predicted as its closest family (copy) from its "
            "tensors");
  EXPECT_EQ(costNoteText(CostNote::NegativeDimension, "aten::mm", CostFamily::Gemm),
            "negative dimension in a tensor shape of aten::mm; its dimensions count as 0 "
            "(re-trace the script)");
  EXPECT_EQ(costNoteText(CostNote::None, "aten::mm", CostFamily::Gemm), "");
  for (int n = 1; n <= static_cast<int>(CostNote::FusedIntoKernel); ++n)
    EXPECT_FALSE(costNoteText(static_cast<CostNote>(n), "aten::x", CostFamily::Copy).empty()) << n;
}

TEST(Presentation, AScriptRunAsWrittenSaysWhatWasStubbedAndWhereHostTimeWasMeasured) {
  TraceWarning stubbed;
  stubbed.kind = TraceWarningKind::CallStubbed;
  stubbed.loc = {"/w/train.py", 40, ""};
  stubbed.call = "torch.save";
  EXPECT_EQ(traceWarningLine(stubbed).rfind("/w/train.py:40: torch.save: not run while tracing", 0),
            0u)
      << traceWarningLine(stubbed);
  TraceWarning loading;
  loading.kind = TraceWarningKind::HostTimeMeasured;
  loading.loc = {"/w/train.py", 31, ""};
  loading.ms = 12.5;
  EXPECT_EQ(traceWarningLine(loading).rfind("/w/train.py:31: data loading took 12.5 ms per "
                                            "iteration, measured on this CPU",
                                            0),
            0u)
      << traceWarningLine(loading);
  loading.count = 4; // the script's DataLoader workers
  EXPECT_NE(traceWarningLine(loading).find("the script's 4 workers share it and load beside the "
                                           "loop, which waits here only for what they take"),
            std::string::npos)
      << traceWarningLine(loading);
  loading.count = 1;
  EXPECT_NE(traceWarningLine(loading).find("the script's worker makes it beside the loop, which "
                                           "waits here only for what it takes"),
            std::string::npos)
      << traceWarningLine(loading);
}

TEST(Presentation, ModulesSumTheirRepeatedBlocksLargestFirst) {
  Prediction prediction;
  prediction.gpus = {"H100-SXM", "T4"};
  const auto module = [](const std::string& name, double h100, double t4) {
    ModuleBreakdown m;
    m.module = name;
    m.perGpu.resize(2);
    m.perGpu[0].forwardMs = h100;
    m.perGpu[0].shareOfIteration = h100 / 10;
    m.perGpu[1].backwardMs = t4;
    m.perGpu[1].shareOfIteration = t4 / 40;
    return m;
  };
  prediction.modules = {module("", 3, 4), module("bert.encoder.layer.0.attention", 1, 5),
                        module("bert.encoder.layer.11.attention", 1, 5),
                        module("bert.embeddings", 0.5, 1), module("layers.3", 0.25, 1)};
  const std::vector<ModuleGroup> groups = modulesOverRepeats(prediction);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].pattern, "");
  EXPECT_EQ(groups[1].pattern, "bert.encoder.layer.*.attention");
  EXPECT_EQ(groups[1].modules, 2);
  EXPECT_EQ(groups[1].totalMs, (std::vector<double>{2, 10}));
  EXPECT_EQ(groups[1].share, (std::vector<double>{0.2, 0.25}));
  EXPECT_EQ(groups[2].pattern, "bert.embeddings");
  EXPECT_EQ(groups[3].pattern, "layers.*");
}

TEST(Presentation, TheLineHoldingTheIterationHoversItsModules) {
  Prediction prediction;
  prediction.gpus = {"H100-SXM"};
  const auto line = [](int number, double ms, double share) {
    LineBreakdown l;
    l.loc = {"/w/train.py", number, ""};
    l.perGpu.resize(1);
    l.perGpu[0].forwardMs = ms;
    l.perGpu[0].shareOfIteration = share;
    return l;
  };
  const auto module = [](const std::string& name, double ms) {
    ModuleBreakdown m;
    m.module = name;
    m.perGpu.resize(1);
    m.perGpu[0].forwardMs = ms;
    m.perGpu[0].shareOfIteration = ms / 10;
    return m;
  };
  prediction.lines = {line(12, 9, 0.9), line(14, 1, 0.1)};
  prediction.modules = {module("bert.encoder.layer.0", 3), module("bert.encoder.layer.1", 3),
                        module("", 2), module("bert.embeddings", 1)};
  ASSERT_EQ(lineHoldingIteration(prediction), &prediction.lines[0]);
  const std::string hover = lineHover(prediction, prediction.lines[0]);
  EXPECT_NE(hover.find("**By module** (a repeated block's copies summed):\n\n"
                       "| module | H100-SXM | share |\n|---|---:|---:|\n"
                       "| `bert.encoder.layer.* (2)` | 6.00 ms | 60% |\n"
                       "| `(outside any module: loss, optimizer, loop)` | 2.00 ms | 20% |\n"
                       "| `bert.embeddings` | 1.00 ms | 10% |\n"),
            std::string::npos)
      << hover;
  EXPECT_EQ(lineHover(prediction, prediction.lines[1]).find("By module"), std::string::npos);

  prediction.lines = {line(12, 7, 0.7), line(14, 3, 0.3)}; // no line holds 80%
  EXPECT_EQ(lineHoldingIteration(prediction), nullptr);
  EXPECT_EQ(lineHover(prediction, prediction.lines[0]).find("By module"), std::string::npos);
  prediction.lines = {line(12, 9, 0.9)};
  prediction.modules = {module("", 9)}; // nothing the line does not tell
  EXPECT_EQ(lineHoldingIteration(prediction), nullptr);
}

TEST(Presentation, APartialBatchSaysTheFiguresAreItsAndHowToPredictAFullOne) {
  TraceWarning partial;
  partial.kind = TraceWarningKind::PartialBatch;
  partial.loc = {"/w/train.py", 40, ""};
  partial.count = 32;
  EXPECT_EQ(traceWarningLine(partial),
            "/w/train.py:40: the recorded step trained on its DataLoader's last, partial batch, "
            "short of the 32 samples its other batches hold: the figures are for that batch. Give "
            "the script at least two full batches of data (more samples, or a smaller batch "
            "size) to predict a full one");
}

TEST(Presentation, UnrepeatedWorkSaysItIsNotInTheIterationAndCountsItsLines) {
  TraceWarning unrepeated;
  unrepeated.kind = TraceWarningKind::UnrepeatedWork;
  unrepeated.loc = {"/w/train.py", 217, ""};
  unrepeated.count = 3;
  EXPECT_EQ(traceWarningLine(unrepeated),
            "/w/train.py:217: this line worked on tensors before the recorded iteration and not "
            "in it (the busiest of 3 such lines): work the loop does on some steps only (an "
            "evaluation, a checkpoint, a logged value) or once before training is not in the "
            "iteration time");
  unrepeated.count = 1;
  EXPECT_EQ(traceWarningLine(unrepeated).find("busiest"), std::string::npos);
}

TEST(Presentation, EvenRoutingSaysWhatItAssumesAndWhenItDoesNotMatter) {
  TraceWarning routing;
  routing.kind = TraceWarningKind::EvenRouting;
  routing.loc = {"/w/train.py", 341, ""};
  routing.origin = SourceLocation{"/w/train.py", 518, ""};
  routing.count = 1000;
  const std::string line = traceWarningLine(routing);
  EXPECT_NE(line.find("(at /w/train.py:518), which shape-only tracing does not compute: they are "
                      "taken as spread evenly over the 1000 choices"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("a value only printed or logged (a top-k accuracy) changes nothing "
                      "predicted"),
            std::string::npos)
      << line;
}

TEST(Presentation, TraceWarningsReadAsSentencesAtTheirLines) {
  TraceWarning mixed;
  mixed.kind = TraceWarningKind::HostTensorWithGpu;
  mixed.loc = {"/w/train.py", 12, ""};
  mixed.origin = SourceLocation{"/w/train.py", 9, ""};
  EXPECT_EQ(traceWarningLine(mixed).rfind("/w/train.py:12: a tensor created on the CPU inside "
                                          "the iteration (created at /w/train.py:9) is used",
                                          0),
            0u)
      << traceWarningLine(mixed);
  TraceWarning compiled;
  compiled.kind = TraceWarningKind::TorchCompile;
  compiled.loc = {"/w/train.py", 3, ""};
  EXPECT_EQ(traceWarningLine(compiled).rfind(
                "/w/train.py:3: torch.compile: the eager ops were traced", 0),
            0u);
  TraceWarning outside;
  outside.kind = TraceWarningKind::KernelsOutsideOps;
  outside.severity = Severity::Info;
  outside.count = 4;
  outside.ms = 0.2;
  EXPECT_EQ(traceWarningLine(outside), "4 GPU kernels, copies or fills (about 0.200 ms per "
                                       "iteration) ran outside any recorded op and are not in "
                                       "the measurements");
  TraceWarning objects;
  objects.kind = TraceWarningKind::UnsupportedDistributed;
  objects.loc = {"/w/train.py", 7, ""};
  objects.call = "all_gather_object";
  EXPECT_EQ(traceWarningLine(objects),
            "/w/train.py:7: torch.distributed.all_gather_object cannot run as one rank of the "
            "traced launch: it was skipped and its communication is not predicted");
  TraceWarning values;
  values.kind = TraceWarningKind::TracedInCpuMode;
  values.severity = Severity::Info;
  values.loc = {"/w/train.py", 16, ""};
  values.call = "aten::nonzero";
  values.origin = SourceLocation{"/venv/torchvision/ops/boxes.py", 145, ""};
  EXPECT_EQ(traceWarningLine(values),
            "/w/train.py:16: this line needs tensor values, which shape-only tracing does not "
            "compute (aten::nonzero, at /venv/torchvision/ops/boxes.py:145): the script was "
            "traced in cpu mode instead, its arithmetic run on this CPU (the same ops; the trace "
            "takes longer)");
  values.origin.reset();
  EXPECT_NE(traceWarningLine(values).find("compute (aten::nonzero): the script"),
            std::string::npos);
  TraceWarning legacy;
  legacy.text = "/w/train.py:5: from a version-1 trace";
  EXPECT_EQ(traceWarningLine(legacy), legacy.text);
}

} // namespace
} // namespace wavecast

namespace wavecast {

// A line's collectives read kind by kind, with what hid them (docs/presentation.md).
TEST(Presentation, CommunicationReadsKindByKind) {
  LineTimes times;
  times.commMs = 3.5;
  times.commHiddenMs = 2.4;
  times.communication = {{CollectiveKind::AllReduce, Phase::Backward, 3.1, 2.4},
                         {CollectiveKind::AllGather, Phase::Forward, 0.4, 0}};
  EXPECT_EQ(lineCommunicationText(times), "all-reduce 3.10 ms, 2.40 ms of it hidden behind "
                                          "backward; all-gather 0.400 ms, none of it hidden");
  times.forwardMs = 1.0;
  ParallelConfig fsdp;
  fsdp.dp = 8;
  fsdp.sharding = Sharding::Zero3;
  EXPECT_EQ(layoutLineText(fsdp, "H100-SXM", times),
            "- **8\u00d7 H100-SXM, FSDP**: 1.00 ms; all-reduce 3.10 ms, 2.40 ms of it hidden "
            "behind backward; all-gather 0.400 ms, none of it hidden\n");
  EXPECT_EQ(layoutsHoverSection(""), "");
  EXPECT_EQ(
      targetTextProblemMessage("8x H100-SXM, FSPD", {TargetTextProblemKind::UnknownWord, "FSPD"})
          .rfind("cannot read the target '8x H100-SXM, FSPD' at 'FSPD': ", 0),
      0u);
}

} // namespace wavecast
