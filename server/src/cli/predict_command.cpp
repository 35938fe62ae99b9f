#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/terminal.h"
#include "presentation.h"
#include "results_json.h"
#include "wavecast/predictor/measured_trace.h"
#include "wavecast/predictor/parallel.h"
#include "wavecast/predictor/predictor.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

namespace wavecast::cli {
namespace fs = std::filesystem;

namespace {

// Source text of the files a prediction points into, read once each.
class SourceCache {
public:
  const std::string& line(const std::string& file, int number) {
    auto& lines = files_[file];
    if (lines.empty()) {
      std::ifstream in(file);
      std::string text;
      while (std::getline(in, text))
        lines.push_back(text);
      lines.emplace_back(); // marks the file as read even when it is empty
    }
    static const std::string none;
    if (number < 1 || static_cast<size_t>(number) >= lines.size())
      return none;
    return lines[number - 1];
  }

private:
  std::map<std::string, std::vector<std::string>> files_;
};

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos)
    return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

std::string displayPath(const std::string& file, const fs::path& base) {
  std::error_code ec;
  auto relative = fs::relative(file, base, ec);
  if (ec || relative.empty() || relative.native().rfind("..", 0) == 0)
    return fs::path(file).filename().string();
  return relative.string();
}

// A script whose iteration runs almost all under one line (a Hugging Face Trainer's
// `trainer.train()`, a library's fit loop) gets its modules, repeated blocks summed: what
// the line table cannot tell.
void printModulesOfOneLine(const Prediction& prediction, const fs::path& base, size_t nameWidth,
                           size_t gpuWidth, std::ostream& out) {
  const LineBreakdown* top = lineHoldingIteration(prediction);
  if (!top)
    return;
  const std::vector<ModuleGroup> groups = modulesOverRepeats(prediction);
  out << "\nby module, under " << displayPath(top->loc.file, base) << ":" << top->loc.line << " ("
      << formatShare(lineShare(*top)) << " of the iteration; * sums a repeated block's copies):\n"
      << padRight("module", nameWidth);
  for (const auto& gpu : prediction.gpus)
    out << padLeft(gpu, gpuWidth);
  out << padLeft("share", 8) << "\n";
  for (size_t i = 0; i < groups.size() && i < kModuleGroupsShown; ++i) {
    const ModuleGroup& group = groups[i];
    out << padRight(moduleGroupName(group), nameWidth);
    for (const double ms : group.totalMs)
      out << padLeft(formatMs(ms), gpuWidth);
    out << padLeft(formatShare(group.largestShare()), 8) << "\n";
  }
  if (groups.size() > kModuleGroupsShown)
    out << "(" << groups.size() - kModuleGroupsShown << " more in the JSON's modules)\n";
}

void printLineTable(const Prediction& prediction, const Trace& trace, std::ostream& out) {
  SourceCache sources;
  const fs::path base = fs::path(trace.entryFile).parent_path();
  size_t gpuWidth = 11;
  for (const auto& gpu : prediction.gpus)
    gpuWidth = std::max(gpuWidth, gpu.size() + 2);
  const size_t codeWidth = 46;
  size_t locWidth = 4;
  for (const auto& line : prediction.lines)
    locWidth = std::max(locWidth, displayPath(line.loc.file, base).size() + 1 +
                                      std::to_string(line.loc.line).size());

  out << padRight("line", locWidth) << "  " << padRight("code", codeWidth);
  for (const auto& gpu : prediction.gpus)
    out << padLeft(gpu, gpuWidth);
  // Lines that wait for collectives (a multi-GPU rank): their communication on the first
  // GPU, and how much of it compute hid.
  const bool communicates =
      std::any_of(prediction.lines.begin(), prediction.lines.end(), [](const LineBreakdown& line) {
        return !line.perGpu.empty() && line.perGpu[0].commMs > 0;
      });
  // With several GPUs a line's share differs by GPU: the column gives its largest.
  const bool severalGpus = prediction.gpus.size() > 1;
  const size_t shareWidth = severalGpus ? 11 : 8;
  out << padLeft(severalGpus ? "max share" : "share", shareWidth)
      << (communicates ? "  communication (hidden)" : "") << "\n";
  bool anyHostBound = false;
  for (const auto& line : prediction.lines) {
    const std::string loc = displayPath(line.loc.file, base) + ":" + std::to_string(line.loc.line);
    out << padRight(loc, locWidth) << "  "
        << padRight(trimmed(sources.line(line.loc.file, line.loc.line)), codeWidth);
    for (const auto& times : line.perGpu) {
      anyHostBound |= times.hostBound;
      out << padLeft(times.totalMs() > 0 ? formatMs(times.totalMs()) + (times.hostBound ? "*" : " ")
                                         : "- ",
                     gpuWidth);
    }
    out << padLeft(formatShare(lineShare(line)), shareWidth);
    if (communicates && line.perGpu[0].commMs > 0)
      out << "  " << formatMs(line.perGpu[0].commMs) << " ("
          << formatMs(line.perGpu[0].commHiddenMs) << ")";
    out << "\n";
  }
  if (anyHostBound)
    out << "* host-bound: the GPU waits for the CPU to issue this line's work most of the time\n";
  if (severalGpus)
    out << "max share: the line's largest share of an iteration on any of the GPUs\n";
  out << "a line's time includes the backward of the ops it runs forward; fwd, bwd and optim "
         "below split the iteration by phase"
      << (std::any_of(prediction.summaries.begin(), prediction.summaries.end(),
                      [](const GpuSummary& s) { return s.inputMs > 0; })
              ? ", after input: the loop waiting for its batches"
              : "")
      << "\n";
  printModulesOfOneLine(prediction, base, codeWidth + locWidth + 2, gpuWidth, out);
}

void printSummary(const Prediction& prediction, bool methodPerGpu, std::ostream& out) {
  std::vector<const GpuSummary*> order;
  for (const auto& summary : prediction.summaries)
    order.push_back(&summary);
  std::stable_sort(order.begin(), order.end(), [](const GpuSummary* a, const GpuSummary* b) {
    return a->iterationMs < b->iterationMs;
  });
  out << "\nper GPU, fastest first (" << batchText(prediction) << "):\n";
  size_t idWidth = 6;
  for (const auto& summary : prediction.summaries)
    idWidth = std::max(idWidth, summary.gpuId.size() + 2);
  // A script run as written waits for its DataLoader: that is no phase of the model's.
  const bool input =
      std::any_of(order.begin(), order.end(), [](const GpuSummary* s) { return s->inputMs > 0; });
  out << padRight("GPU", idWidth) << padLeft("iteration", 12) << padLeft("GPU busy", 10)
      << (input ? padLeft("input", 10) : std::string()) << padLeft("fwd", 10) << padLeft("bwd", 10)
      << padLeft("optim", 10) << padLeft("samples/s", 12) << padLeft("$/1k samples", 14)
      << padLeft("memory", 24) << "\n";
  for (const auto* s : order) {
    const std::string memory = formatBytes(static_cast<double>(s->memory.peakBytes())) + " / " +
                               formatBytes(static_cast<double>(s->memoryCapacityBytes));
    out << padRight(s->gpuId, idWidth) << padLeft(formatMs(s->iterationMs), 12)
        << padLeft(formatMs(s->gpuMs), 10)
        << (input ? padLeft(formatMs(s->inputMs), 10) : std::string())
        << padLeft(formatMs(s->forwardMs), 10) << padLeft(formatMs(s->backwardMs), 10)
        << padLeft(formatMs(s->optimizerMs), 10) << padLeft(formatCount(s->samplesPerSecond), 12)
        << padLeft(s->pricePerHourUsd > 0 ? formatUsd(s->costPer1kSamplesUsd) : "n/a", 14)
        << padLeft(memory, 24) << (s->fitsInMemory ? "" : "  OUT OF MEMORY")
        << (s->hostBound ? "  host-bound" : "")
        << (methodPerGpu ? "  " + gpuMethodText(s->methods) : "") << "\n";
  }
}

// The layout the flags ask for, through the one parser of layouts (parseParallelTarget);
// nullopt when none of them is given (one GPU).
std::optional<ParallelConfig> parallelLayout(const CommandLine& args) {
  std::string words = args.value("layout").value_or("");
  for (const char* degree : {"dp", "tp", "pp", "ep"})
    if (const auto value = args.positiveInt(degree))
      words += std::string(" ") + degree + std::to_string(*value);
  if (const auto value = args.positiveInt("microbatches"))
    words += " mb" + std::to_string(*value);
  if (const auto zero = args.value("zero"))
    words += " zero" + *zero;
  if (args.has("fsdp"))
    words += " fsdp";
  if (args.has("sequence-parallel"))
    words += " sp";
  if (args.has("recompute"))
    words += " recompute";
  if (args.has("recompute-ops"))
    words += " recompute ops";
  if (const auto every = args.positiveInt("recompute-every"))
    words += " recompute every " + std::to_string(*every);
  if (const auto schedule = args.value("schedule"))
    words += " " + *schedule;
  if (const auto dtype = args.value("param-dtype"))
    words += " param " + *dtype;
  if (const auto dtype = args.value("reduce-dtype"))
    words += " reduce " + *dtype;
  if (words.find_first_not_of(' ') == std::string::npos)
    return std::nullopt;
  const auto parsed = parseParallelTarget(words);
  if (const auto* problem = std::get_if<TargetTextProblem>(&parsed))
    throw UsageError("cannot read the layout at '" + problem->word +
                     "': use --dp/--tp/--pp/--ep N, --microbatches N, --zero 1|2|3 or --fsdp, "
                     "--sequence-parallel, --recompute, --recompute-ops, --recompute-every N, "
                     "--schedule gpipe|1f1b, --param-dtype and --reduce-dtype bf16|fp16|fp32");
  return std::get<ParallelTarget>(parsed).config;
}

void printParallelSummary(const std::vector<ParallelSummary>& layouts, std::ostream& out) {
  for (const auto& s : layouts) {
    out << "\n"
        << parallelConfigLabel(s.config, s.gpuId) << " on " << s.nodes << " " << s.systemId
        << " node" << (s.nodes > 1 ? "s" : "") << " (global batch " << s.globalBatch << "):\n";
    out << "  iteration " << formatMs(s.iterationMs) << "; "
        << communicationText(s.communication.ms, s.communication.hiddenMs());
    if (s.config.pp > 1)
      out << "; pipeline bubble " << formatMs(s.bubbleMs) << " (" << formatShare(s.bubbleFraction)
          << ")";
    out << "\n  " << formatCount(s.samplesPerSecond) << " samples/s ("
        << formatCount(s.samplesPerSecondPerGpu) << " per GPU)";
    if (s.tokensPerSecond > 0)
      out << ", " << formatCount(s.tokensPerSecond) << " tokens/s ("
          << formatCount(s.tokensPerSecondPerGpu) << " per GPU)";
    out << "; MFU " << formatShare(s.mfu) << " of the " << s.mfuPrecision << " peak";
    if (s.costPer1kSamplesUsd > 0)
      out << "; " << formatUsd(s.costPer1kSamplesUsd) << "/1k samples at "
          << formatUsd(s.clusterPricePerHourUsd) << "/h";
    out << "\n";
    if (const std::string microbatches = microbatchPricingText(s); !microbatches.empty())
      out << "  " << microbatches << "\n";
    for (size_t i = 0; i < s.stages.size(); ++i) {
      const auto& stage = s.stages[i];
      out << "  " << (s.stages.size() > 1 ? "stage " + std::to_string(i) + " " : std::string())
          << "memory per rank " << formatBytes(static_cast<double>(stage.memory.peakBytes()))
          << " (weights " << formatBytes(static_cast<double>(stage.memory.weightsBytes))
          << ", gradients " << formatBytes(static_cast<double>(stage.memory.gradientsBytes))
          << ", optimizer " << formatBytes(static_cast<double>(stage.memory.optimizerStateBytes))
          << ", activations " << formatBytes(static_cast<double>(stage.memory.activationsBytes))
          << ")" << (stage.fitsInMemory ? "" : "  OUT OF MEMORY") << "\n";
    }
    for (const Advisory& advisory : s.advisories)
      out << "  note: " << advisoryMessage(advisory) << "\n";
  }
}

// The script traced again at one microbatch's batch (microbatchBatchSize); nullopt also
// for a saved trace, and where that trace fails (the whole batch's ops at 1/m of their work
// then, as predictParallel does without it).
std::optional<Trace> microbatchTrace(ScriptTracer& tracer, const std::string& file,
                                     const Trace& trace, const ParallelConfig& config,
                                     const DeviceSpec* firstTarget) {
  const std::optional<int64_t> batch = microbatchBatchSize(trace, config);
  if (!batch || fs::path(file).extension() != ".py")
    return std::nullopt;
  try {
    return tracer.trace(file, *batch, firstTarget);
  } catch (const CommandError& e) {
    std::cerr << "wavecast: tracing one microbatch (batch " << *batch
              << ") failed, so each microbatch is priced as 1/" << config.microbatches
              << " of the batch's ops: " << e.what() << "\n";
    return std::nullopt;
  }
}

int runPredict(const CommandLine& args, const InstallLayout& layout) {
  const auto gpuList = args.value("gpu");
  if (!gpuList || splitList(*gpuList).empty())
    throw UsageError("--gpu is required, e.g. --gpu H100,A100,T4 (see 'wavecast gpus')");
  const auto database = loadGpuDatabase(layout, args);
  std::vector<DeviceSpec> gpus;
  try {
    gpus = database.resolve(splitList(*gpuList));
  } catch (const GpuDatabaseError& e) {
    throw CommandError(e.what());
  }

  const std::string file = args.positional().front();
  ScriptTracer tracer(layout, args);
  const Trace trace =
      tracer.trace(file, args.positiveInt("batch-size"), gpus.empty() ? nullptr : &gpus.front());

  PredictorOptions options = predictorOptions(layout, args, database);
  options.originGpu = measuredOrigin(trace, database);
  const auto parallel = parallelLayout(args);
  if (args.has("system") && !parallel)
    throw UsageError("--system applies to a multi-GPU layout: add --dp, --tp, --pp or --fsdp");
  std::vector<ParallelSummary> layouts;
  Prediction prediction;
  if (parallel) {
    if (!options.systemDatabase)
      throw CommandError("no systems database (data/systems.json); " + layout.repairAdvice());
    const ModelStructure model = analyzeModel(trace);
    for (const auto& gpu : gpus) {
      SystemSpec system = options.systemDatabase->defaultFor(gpu.id);
      if (const auto name = args.value("system")) {
        const SystemSpec* chosen = options.systemDatabase->find(*name);
        if (!chosen) {
          std::string message = "unknown system '" + *name + "'";
          const auto close = options.systemDatabase->suggestions(*name);
          for (size_t i = 0; i < close.size(); ++i)
            message += (i ? ", " : "; did you mean ") + close[i];
          throw CommandError(message + (close.empty() ? "" : "?") +
                             " (data/systems.json lists them; docs/systems.md)");
        }
        system = *chosen;
      }
      options.systems[gpu.id] = system;
    }
    const std::optional<Trace> microbatch =
        microbatchTrace(tracer, file, trace, *parallel, gpus.empty() ? nullptr : &gpus.front());
    for (const auto& gpu : gpus) {
      auto outcome = predictParallel(trace, model, *parallel, gpu, options.systems.at(gpu.id),
                                     options, microbatch ? &*microbatch : nullptr);
      if (outcome.problem)
        throw CommandError(layoutProblemMessage(*outcome.problem));
      layouts.push_back(std::move(outcome.prediction->summary));
      if (prediction.gpus.empty())
        prediction = std::move(outcome.prediction->rank);
    }
  } else {
    prediction = Predictor(std::move(options)).predict(trace, gpus);
  }

  if (args.has("json")) {
    std::cout << resultsJson(prediction, traceFacts(trace), layouts).dump(2) << "\n";
    return 0;
  }

  std::cout << "wavecast " << WAVECAST_VERSION << ": " << predictionMethodText(prediction) << "\n"
            << displayPath(trace.entryFile, fs::current_path()) << ", batch size "
            << trace.batchSize << ", " << trace.ops.size() << " ops traced ("
            << toString(trace.mode) << " mode) with "
            << tracedWith(trace.torchVersion, trace.pythonEnv) << "\n\n";
  printLineTable(prediction, trace, std::cout);
  // Each GPU's method differs when one was measured on or calibrated: show it per GPU.
  const bool methodPerGpu =
      hasMeasuredKernels(trace) ||
      std::any_of(prediction.summaries.begin(), prediction.summaries.end(),
                  [](const GpuSummary& s) { return s.methods.uses(PredictionMethod::Calibrated); });
  printSummary(prediction, methodPerGpu, std::cout);
  printParallelSummary(layouts, std::cout);
  if (!prediction.precisions.empty()) {
    std::cout << "precision:";
    for (size_t i = 0; i < prediction.precisions.size(); ++i)
      std::cout << (i ? ", " : " ") << toString(prediction.precisions[i].family) << " "
                << prediction.precisions[i].precision;
    std::cout << " (as the script sets it; --tf32-matmul/--tf32-conv override)\n";
  }
  for (const Advisory& advisory : prediction.advisories)
    std::cout << "note: " << advisoryMessage(advisory) << "\n";
  for (const TraceWarning& warning : trace.warnings)
    std::cout << "note: " << traceWarningLine(warning) << "\n";
  if (!trace.fallbackOps.empty()) {
    std::cout << "note: run for real on the CPU while tracing, on values shape mode knew or "
                 "for want of a shape-only kernel (the GPU's time is predicted as usual):";
    for (const auto& op : trace.fallbackOps)
      std::cout << " " << op;
    std::cout << "\n";
  }
  return 0;
}

} // namespace

Command predictCommand() {
  std::vector<OptionSpec> options = {
      {"gpu", "NAME[,NAME...]", "target GPUs (see 'wavecast gpus'), e.g. H100,A100,T4"},
      {"batch-size", "N", "batch size passed to wavecast_input (default: its own default)"},
      {"json", "", "print everything as JSON (docs/results-json.md)"},
      {"gpu-file", "FILE", "extra or overriding GPU definitions (docs/gpus.md)"},
      {"mode", "MODE",
       "shape (default: no arithmetic; a script whose shapes need tensor values is traced "
       "in cpu mode instead, with a note), cpu (run for real) or cuda"},
      pythonEnvOption(),
      worldSizeOption(),
      compileOption(),
      verboseOption(),
      {"timeout", "SECONDS", "give up tracing after this long (default 120)"},
      {"roofline", "", "analytic model only (no learned per-op models, no installed calibrations)"},
      calibrationOption(),
      noCalibrationOption(),
      {"dp", "N", "data-parallel replicas; --batch-size is each replica's batch"},
      {"tp", "N", "tensor-parallel degree (Megatron: attention and MLP Linear pairs)"},
      {"pp", "N", "pipeline stages, balanced by predicted time"},
      {"ep", "N",
       "expert parallelism: grouped-GEMM experts split over N of the dp ranks (divides dp)"},
      {"microbatches", "M", "microbatches per iteration and replica (pipeline)"},
      {"zero", "1|2|3", "ZeRO stage: shard optimizer states, gradients, parameters over dp"},
      {"fsdp", "", "fully sharded data parallelism (ZeRO-3)"},
      {"sequence-parallel", "", "Megatron sequence parallelism with --tp"},
      {"recompute", "", "recompute each repeated block's activations in backward (checkpointing)"},
      {"recompute-ops", "",
       "recompute all but attention and every other matmul (torchtitan's per-op policy)"},
      {"recompute-every", "N",
       "recompute every N-th block only (torchtitan's layer checkpointing)"},
      {"schedule", "gpipe|1f1b", "pipeline schedule (default 1f1b)"},
      {"param-dtype", "bf16|fp16|fp32",
       "FSDP's mixed precision: gather parameters (and compute) in this dtype"},
      {"reduce-dtype", "bf16|fp16|fp32",
       "FSDP's mixed precision: reduce-scatter gradients in this dtype (default: --param-dtype)"},
      {"layout", "TEXT", "the layout as words, e.g. \"dp4 tp2 fsdp\" (docs/parallel.md)"},
      {"system", "NAME",
       "the node the GPUs are in (data/systems.json); default: the GPU's usual "
       "8-GPU node"}};
  for (auto& option : precisionOptions())
    options.push_back(std::move(option));
  return {
      {"predict", "FILE.py --gpu NAME[,NAME...] [--batch-size N] [-- ARGS]",
       "Trace one training iteration of FILE.py without a GPU and predict, for each source line "
       "and each named GPU, its time; then iteration time, samples/s, cost and memory per GPU. "
       "FILE.py defines wavecast_model(), wavecast_input(batch_size=N) and "
       "wavecast_iteration(model) (deepview_*_provider names work too), or is a training script "
       "as written, run with the words after '--' as its arguments until its second optimizer "
       "step. FILE may also be a trace saved by 'wavecast trace'.",
       std::move(options), 1, 1, true},
      runPredict,
      {}};
}

} // namespace wavecast::cli
