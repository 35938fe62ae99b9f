#include "presentation.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <map>
#include <variant>

namespace wavecast {

namespace {

const char* const kMissing = "\u2013";

// Values below `bound` (once rounded) show `decimals` decimals.
struct Band {
  double bound;
  int decimals;
};
constexpr Band kMsBands[] = {{1, 3}, {10, 2}, {100, 1}, {1000, 0}};
constexpr Band kUsdBands[] = {{0.00001, 7}, {0.0001, 6}, {0.001, 5}, {0.01, 4}, {0.1, 3}, {100, 2}};

// Whether `value` rounded to `decimals` decimals stays below `bound` in magnitude:
// a band of docs/presentation.md holds the value.
bool roundsBelow(double value, int decimals, double bound) {
  const std::string text = formatFixed(std::fabs(value), decimals);
  double rounded = 0;
  std::from_chars(text.data(), text.data() + text.size(), rounded);
  return rounded < bound;
}

// "2600" -> "2,600"
std::string groupThousands(const std::string& digits) {
  std::string out;
  const size_t start = digits[0] == '-' ? 1 : 0;
  const size_t end = std::min(digits.find('.'), digits.size());
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > start && i < end && (end - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

} // namespace

std::string hostBoundAdvice(std::optional<CompileMode> compiled) {
  if (!compiled)
    return "a larger batch, CUDA graphs or torch.compile (fewer, larger kernels) would use it "
           "better";
  if (!usesCudaGraphs(*compiled))
    return "a larger batch or CUDA graphs (torch.compile's mode=\"reduce-overhead\": one launch "
           "for its kernels) would use it better";
  return "a larger batch would use it better";
}

std::string formatFixed(double value, int decimals) {
  double doubledScale = 2;
  for (int i = 0; i < decimals; ++i)
    doubledScale *= 10;
  // printf rounds an exact tie to even, JavaScript's toFixed away from zero. The value is a
  // tie when value * 2 * 10^decimals is an odd integer; fma's zero remainder proves the
  // product exact.
  const double doubled = value * doubledScale;
  if (std::fma(value, doubledScale, -doubled) == 0 && std::fabs(doubled) < 0x1p53 &&
      doubled == std::trunc(doubled) && std::fmod(doubled, 2) != 0)
    value = (doubled + std::copysign(1.0, doubled)) / doubledScale;
  char buffer[400];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string formatMs(double ms) {
  if (!std::isfinite(ms))
    return kMissing;
  if (ms == 0)
    return "0 ms";
  if (roundsBelow(ms * 1000, 1, 10))
    return formatFixed(ms * 1000, 1) + " \u00b5s";
  for (const Band& band : kMsBands)
    if (roundsBelow(ms, band.decimals, band.bound))
      return formatFixed(ms, band.decimals) + " ms";
  const double seconds = ms / 1000;
  return formatFixed(seconds, roundsBelow(seconds, 2, 10) ? 2 : 1) + " s";
}

std::string formatShare(double share) {
  if (!std::isfinite(share))
    return kMissing;
  const double percent = share * 100;
  if (percent == 0)
    return "0%";
  if (!roundsBelow(percent, 1, 1))
    return formatFixed(percent, 0) + "%";
  // Rounds to 0.0: too small to show, but not nothing.
  return roundsBelow(percent, 1, 0.1) ? "<0.1%" : formatFixed(percent, 1) + "%";
}

std::string formatBytes(double bytes) {
  if (!std::isfinite(bytes) || bytes < 0)
    return kMissing;
  if (roundsBelow(bytes, 0, 1024))
    return formatFixed(bytes, 0) + " B";
  const char* const units[] = {"KiB", "MiB", "GiB", "TiB"};
  const size_t last = std::size(units) - 1;
  double value = bytes;
  for (size_t unit = 0;; ++unit) {
    value /= 1024; // exact: a power of two
    if (roundsBelow(value, 1, 100))
      return formatFixed(value, 1) + " " + units[unit];
    if (unit == last || roundsBelow(value, 0, 1024))
      return formatFixed(value, 0) + " " + units[unit];
  }
}

std::string formatUsd(double usd) {
  if (!std::isfinite(usd))
    return kMissing;
  if (usd == 0)
    return "$0";
  for (const Band& band : kUsdBands)
    if (roundsBelow(usd, band.decimals, band.bound))
      return "$" + formatFixed(usd, band.decimals);
  return "$" + formatFixed(usd, 0);
}

std::string formatCount(double count) {
  if (!std::isfinite(count))
    return kMissing;
  if (roundsBelow(count, 1, 100))
    return formatFixed(count, 1);
  return groupThousands(formatFixed(count, 0));
}

double lineShare(const LineBreakdown& line) {
  double share = 0;
  for (const LineTimes& times : line.perGpu)
    share = std::max(share, times.shareOfIteration);
  return share;
}

std::vector<ModuleGroup> modulesOverRepeats(const Prediction& prediction) {
  // A path component that is a number is a repeated block's index.
  const auto pattern = [](const std::string& module) {
    std::string out;
    size_t start = 0;
    while (start <= module.size()) {
      const size_t dot = std::min(module.find('.', start), module.size());
      const std::string part = module.substr(start, dot - start);
      const bool index = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
      out += (start > 0 ? "." : "") + (index ? std::string("*") : part);
      start = dot + 1;
    }
    return out;
  };
  const size_t gpus = prediction.gpus.size();
  std::vector<ModuleGroup> groups;
  std::map<std::string, size_t> index;
  for (const auto& module : prediction.modules) {
    const std::string key = pattern(module.module);
    auto [it, added] = index.emplace(key, groups.size());
    if (added)
      groups.push_back({key, 0, std::vector<double>(gpus, 0.0), std::vector<double>(gpus, 0.0)});
    ModuleGroup& group = groups[it->second];
    ++group.modules;
    for (size_t g = 0; g < gpus && g < module.perGpu.size(); ++g) {
      group.totalMs[g] += module.perGpu[g].totalMs();
      group.share[g] += module.perGpu[g].shareOfIteration;
    }
  }
  std::stable_sort(groups.begin(), groups.end(), [](const ModuleGroup& a, const ModuleGroup& b) {
    return !a.totalMs.empty() && !b.totalMs.empty() && a.totalMs[0] > b.totalMs[0];
  });
  return groups;
}

std::string moduleGroupName(const ModuleGroup& group) {
  return (group.pattern.empty() ? std::string("(outside any module: loss, optimizer, loop)")
                                : group.pattern) +
         (group.modules > 1 ? " (" + std::to_string(group.modules) + ")" : std::string());
}

const LineBreakdown* lineHoldingIteration(const Prediction& prediction) {
  constexpr double kOneLineShare = 0.8;
  const auto top = std::max_element(
      prediction.lines.begin(), prediction.lines.end(),
      [](const LineBreakdown& a, const LineBreakdown& b) { return lineShare(a) < lineShare(b); });
  if (top == prediction.lines.end() || lineShare(*top) < kOneLineShare)
    return nullptr;
  return modulesOverRepeats(prediction).size() < 2 ? nullptr : &*top;
}

namespace {

// The hover's table of the modules under the line that holds the iteration.
std::string modulesHoverSection(const Prediction& prediction) {
  const std::vector<ModuleGroup> groups = modulesOverRepeats(prediction);
  std::string md = "\n**By module** (a repeated block's copies summed):\n\n| module |";
  std::string rule = "|---|";
  for (const auto& gpu : prediction.gpus) {
    md += " " + gpu + " |";
    rule += "---:|";
  }
  md += " share |\n" + rule + "---:|\n";
  for (size_t i = 0; i < groups.size() && i < kModuleGroupsShown; ++i) {
    const ModuleGroup& group = groups[i];
    md += "| `" + moduleGroupName(group) + "` |";
    for (const double ms : group.totalMs)
      md += " " + formatMs(ms) + " |";
    md += " " + formatShare(group.largestShare()) + " |\n";
  }
  if (groups.size() > kModuleGroupsShown)
    md += "\n" + std::to_string(groups.size() - kModuleGroupsShown) +
          " more in the results' modules.\n";
  return md;
}

} // namespace

std::string lineLabel(const Prediction& prediction, const LineBreakdown& line) {
  std::string label;
  for (size_t i = 0; i < line.perGpu.size() && i < prediction.gpus.size(); ++i) {
    if (!label.empty())
      label += " \u00b7 ";
    label += prediction.gpus[i] + " " + formatMs(line.perGpu[i].totalMs());
  }
  if (!label.empty())
    label += " (" + formatShare(lineShare(line)) + ")";
  return label;
}

std::string batchText(const Prediction& prediction) {
  std::string text = "batch size " + std::to_string(prediction.batchSize);
  if (prediction.samplesPerIteration > prediction.batchSize)
    text += ", " + std::to_string(prediction.samplesPerIteration) + " samples per optimizer step";
  return text;
}

std::string lineHover(const Prediction& prediction, const LineBreakdown& line) {
  std::string md = "**wavecast** \u2014 predicted time of this line per training iteration "
                   "(batch " +
                   std::to_string(prediction.batchSize) + ")\n\n";
  // The loop's line: the time it waits for its DataLoader's batch, before the forward pass.
  const bool waitsForBatches = std::any_of(line.perGpu.begin(), line.perGpu.end(),
                                           [](const LineTimes& t) { return t.inputMs > 0; });
  md += std::string("| GPU |") + (waitsForBatches ? " waiting for the batch |" : "") +
        " forward | backward | optimizer | total | GPU busy | share |\n";
  md +=
      std::string("|---|") + (waitsForBatches ? "---:|" : "") + "---:|---:|---:|---:|---:|---:|\n";
  std::string hostBound;
  for (size_t i = 0; i < line.perGpu.size() && i < prediction.gpus.size(); ++i) {
    const LineTimes& t = line.perGpu[i];
    md += "| " + prediction.gpus[i] + " | " +
          (waitsForBatches ? formatMs(t.inputMs) + " | " : std::string()) + formatMs(t.forwardMs) +
          " | " + formatMs(t.backwardMs) + " | " + formatMs(t.optimizerMs) + " | " +
          formatMs(t.totalMs()) + " | " + formatMs(t.gpuMs) + " | " +
          formatShare(t.shareOfIteration) + " |\n";
    if (t.hostBound)
      hostBound += (hostBound.empty() ? "" : ", ") + prediction.gpus[i] + " (GPU idle " +
                   formatMs(t.gpuIdleMs) + " of " + formatMs(t.totalMs()) + ")";
  }
  std::string comm;
  for (size_t i = 0; i < line.perGpu.size() && i < prediction.gpus.size(); ++i)
    if (line.perGpu[i].commMs > 0)
      comm += (comm.empty() ? "" : "; ") + prediction.gpus[i] + ": " +
              lineCommunicationText(line.perGpu[i]);
  if (!comm.empty())
    md += "\n**Communication** (NCCL collectives): " + comm + ".\n";
  if (!hostBound.empty())
    md += "\n**Host-bound** on " + hostBound +
          ": the GPU waits for the CPU to issue this line's work; " + hostBoundAdvice() + ".\n";
  const LineBreakdown* holder = lineHoldingIteration(prediction);
  if (holder && holder->loc.file == line.loc.file && holder->loc.line == line.loc.line)
    md += modulesHoverSection(prediction);
  md += "\n" + std::to_string(line.opCount) + (line.opCount == 1 ? " op" : " ops");
  for (size_t i = 0; i < line.opNames.size(); ++i)
    md += (i ? ", `" : ": `") + line.opNames[i] + "`";
  md += "\n\nMethod: " + predictionMethodText(prediction);
  return md;
}

std::string summaryTitle(const GpuSummary& summary) {
  std::string title = summary.gpuId + ": " + formatMs(summary.iterationMs) + "/iter \u00b7 " +
                      formatCount(summary.samplesPerSecond) + " samples/s";
  if (summary.costPer1kSamplesUsd > 0)
    title += " \u00b7 " + formatUsd(summary.costPer1kSamplesUsd) + "/1k samples";
  if (!summary.fitsInMemory)
    title += " \u00b7 out of memory";
  if (summary.hostBound)
    title += " \u00b7 host-bound (GPU busy " + formatMs(summary.gpuMs) + ")";
  return title;
}

std::string memoryTitle(const Prediction& prediction) {
  if (prediction.summaries.empty())
    return "batch " + std::to_string(prediction.batchSize);
  std::string title =
      "batch " + std::to_string(prediction.batchSize) + " \u00b7 peak memory " +
      formatBytes(static_cast<double>(prediction.summaries.front().memory.peakBytes()));
  std::string tooBig;
  for (const auto& summary : prediction.summaries)
    if (!summary.fitsInMemory)
      tooBig += (tooBig.empty() ? "" : ", ") + summary.gpuId;
  title += tooBig.empty() ? " \u00b7 fits on all targets" : " \u00b7 does not fit on " + tooBig;
  return title;
}

std::string joinedWith(const std::vector<std::string>& parts, const char* separator) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i)
    text += (i ? separator : "") + parts[i];
  return text;
}

std::string gpuMethodText(const GpuMethods& methods) {
  if (methods.uses(PredictionMethod::Measured))
    return "measured on " + methods.origin;
  std::vector<std::string> parts;
  if (methods.uses(PredictionMethod::Calibrated))
    parts.push_back("calibrated on " + methods.calibratedOn);
  if (methods.uses(PredictionMethod::WaveScaling))
    parts.push_back("scaled from " + methods.origin);
  if (methods.uses(PredictionMethod::Learned))
    parts.push_back(parts.empty() || !methods.uses(PredictionMethod::WaveScaling)
                        ? "learned per-op model"
                        : "learned models for kernel-varying ops");
  if (methods.uses(PredictionMethod::Roofline) || methods.uses(PredictionMethod::Fallback) ||
      parts.empty())
    parts.push_back("analytic roofline");
  if (methods.uses(PredictionMethod::Collective))
    parts.push_back("NCCL collective model");
  return joinedWith(parts, " + ");
}

std::string calibrationUnknownGpuNote(const std::string& file, const std::string& gpuName) {
  return "calibration " + file + " is for '" + gpuName +
         "', which the GPU database does not know; add it with --gpu-file (docs/gpus.md) to use "
         "the file";
}

std::string predictionMethodText(const Prediction& prediction) {
  GpuMethods any;
  for (const auto& summary : prediction.summaries)
    for (size_t m = 0; m < kPredictionMethodCount; ++m)
      any.used[m] = any.used[m] || summary.methods.used[m];
  if (!any.uses(PredictionMethod::Measured) && !any.uses(PredictionMethod::WaveScaling) &&
      !any.uses(PredictionMethod::Calibrated)) {
    std::vector<std::string> parts;
    if (any.uses(PredictionMethod::Learned))
      parts.push_back("learned per-op model (" + prediction.learnedModel + ")");
    if (any.uses(PredictionMethod::Roofline) || any.uses(PredictionMethod::Fallback) ||
        parts.empty())
      parts.push_back("analytic roofline (FLOPs and bytes against each GPU's spec-sheet peaks)");
    if (any.uses(PredictionMethod::Collective))
      parts.push_back("NCCL collective model on the GPU's node");
    return joinedWith(parts, " + ");
  }
  // "H100-SXM: measured on H100-SXM; A100, T4: scaled from H100-SXM (...)"
  std::vector<std::pair<std::string, std::string>> gpusByMethod; // in first-use order
  for (const auto& summary : prediction.summaries) {
    const std::string method = gpuMethodText(summary.methods);
    auto found = std::find_if(gpusByMethod.begin(), gpusByMethod.end(),
                              [&](const auto& entry) { return entry.first == method; });
    if (found == gpusByMethod.end())
      gpusByMethod.push_back({method, summary.gpuId});
    else
      found->second += ", " + summary.gpuId;
  }
  std::string text;
  for (const auto& [method, gpus] : gpusByMethod)
    text += (text.empty() ? "" : "; ") + gpus + ": " + method;
  if (any.uses(PredictionMethod::WaveScaling))
    text += " (Habitat's wave scaling of each measured kernel" +
            std::string(any.uses(PredictionMethod::Learned)
                            ? "; convolutions, matmuls and RNNs by the learned per-op model (" +
                                  prediction.learnedModel + ")"
                            : "") +
            ")";
  return text;
}

std::string costNoteText(CostNote note, const std::string& op, CostFamily family) {
  switch (note) {
  case CostNote::None:
    return "";
  case CostNote::EmbeddingLike:
    return "predicted as embedding / embedding_dense_backward";
  case CostNote::NoFormula:
    return "no formula for " + op + "; predicted as its closest family (" + toString(family) +
           ") from its tensors";
  case CostNote::ViewOrAllocation:
    return "view or allocation: no kernel, no memory traffic";
  case CostNote::NegativeDimension:
    return "negative dimension in a tensor shape of " + op +
           "; its dimensions count as 0 (re-trace the script)";
  case CostNote::OnHost:
    return "runs on the CPU (host work, no GPU kernel)";
  case CostNote::EmptyTensors:
    return "empty tensors (a zero-sized dimension): no work";
  case CostNote::DeviceToHostScalar:
    return "device-to-host copy of a scalar; synchronises the GPU";
  case CostNote::WaitsForGpu:
    return "waits for the GPU to finish the work queued before it; no kernel";
  case CostNote::ConvWithoutShapes:
    return "convolution without input/weight shapes: counted as a copy of its tensors";
  case CostNote::ConvBackwardWithoutShapes:
    return "convolution_backward without grad_output/input/weight shapes";
  case CostNote::MatrixOperandsMissing:
    return "matrix operands missing from the trace; counted by its tensors' bytes only";
  case CostNote::AttentionWithoutShapes:
    return "attention without query/key/value shapes";
  case CostNote::RecurrentWithoutHidden:
    return "recurrent op without hidden size: counted by its tensors' bytes";
  case CostNote::RecurrentSerial:
    return "recurrent: per-step GEMMs are serial, so small batches are latency bound";
  case CostNote::SerialOverFrames:
    return "CTC loss: priced by its tensors, but its kernels step through the frames one "
           "at a time, a latency that price does not count unless a calibration of the GPU "
           "('wavecast calibrate') measured it";
  case CostNote::OddLeadingDimension:
    return "an operand width that is not a multiple of 8 (bf16/fp16) keeps cuBLAS on its "
           "element-wise loading kernels, about a tenth of the tensor-core peak on an H100; "
           "padding it to a multiple of 8 (GPT-2's 50257-word head to 50304) avoids them";
  case CostNote::EvenExpertGroups:
    return "a grouped GEMM, one per expert: which tokens go to which expert is known only "
           "when the router runs, so they are taken as spread evenly over the experts, as a "
           "load-balancing loss aims for. CUDA runs it as one kernel for bf16 on sm90/sm100 "
           "GPUs, elsewhere as one mm per expert after copying the group sizes to the host, "
           "which makes the CPU wait for the GPU";
  case CostNote::GeneratedKernel:
    return "torch.compile: Inductor fuses this op and the ops around it that feed it or read "
           "it into generated kernels, priced here by the traffic that crosses their edges";
  case CostNote::FusedIntoKernel:
    return "torch.compile: fused into a kernel Inductor generates, whose time is on the line "
           "of the group's reduction (or first op)";
  }
  return "";
}

std::string attentionBackendName(AttentionBackend backend) {
  switch (backend) {
  case AttentionBackend::None:
    return "no attention kernel";
  case AttentionBackend::Flash:
    return "flash attention";
  case AttentionBackend::Efficient:
    return "memory-efficient attention";
  case AttentionBackend::Cudnn:
    return "cuDNN attention";
  case AttentionBackend::Math:
    return "the math decomposition of attention (matmuls and a softmax)";
  }
  return "unknown attention";
}

std::string tracedWith(const std::string& torchVersion, const std::string& pythonEnv) {
  std::string text =
      "torch " + (torchVersion.empty() ? std::string("(unknown version)") : torchVersion);
  if (pythonEnv == "system")
    text += " (the system python3's packages)";
  else if (!pythonEnv.empty())
    text += " (" + pythonEnv + ")";
  return text;
}

std::string localTime(std::chrono::system_clock::time_point when) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &local);
  return text;
}

} // namespace wavecast
