#include "lsp/presentation.h"

#include <cmath>
#include <cstdio>

namespace wavecast::lsp {

namespace {

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

std::string percent(double share) {
  return format(share < 0.1 ? "%.1f%%" : "%.0f%%", share * 100);
}

// 2600.4 -> "2,600"
std::string groupedInteger(double value) {
  std::string digits = format("%.0f", value);
  std::string out;
  size_t start = digits[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > start && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

} // namespace

std::string formatMs(double ms) {
  if (ms < 0.005)
    return "<0.01ms";
  if (ms < 1)
    return format("%.2fms", ms);
  if (ms < 100)
    return format("%.1fms", ms);
  if (ms < 10000)
    return format("%.0fms", ms);
  return format("%.1fs", ms / 1000);
}

std::string formatBytes(int64_t bytes) {
  double value = static_cast<double>(bytes);
  if (value >= 1024.0 * 1024 * 1024)
    return format("%.1f GiB", value / (1024.0 * 1024 * 1024));
  if (value >= 1024.0 * 1024)
    return format("%.1f MiB", value / (1024.0 * 1024));
  return format("%.0f KiB", value / 1024.0);
}

std::string formatUsd(double usd) {
  if (usd <= 0)
    return "$0";
  if (usd < 0.01)
    return format("$%.4f", usd);
  return format("$%.3f", usd);
}

std::string lineLabel(const Prediction& prediction, const LineBreakdown& line) {
  std::string label;
  for (size_t i = 0; i < line.perGpu.size() && i < prediction.gpus.size(); ++i) {
    if (!label.empty())
      label += " \u00b7 ";
    label += prediction.gpus[i] + " " + formatMs(line.perGpu[i].totalMs());
  }
  if (!line.perGpu.empty())
    label += " (" + percent(line.perGpu[0].shareOfIteration) + ")";
  return label;
}

std::string lineHover(const Prediction& prediction, const LineBreakdown& line) {
  std::string md = "**wavecast** \u2014 predicted time of this line per training iteration "
                   "(batch " +
                   std::to_string(prediction.batchSize) + ")\n\n";
  md += "| GPU | forward | backward | optimizer | total | GPU busy | share of iteration |\n";
  md += "|---|---:|---:|---:|---:|---:|---:|\n";
  std::string hostBound;
  for (size_t i = 0; i < line.perGpu.size() && i < prediction.gpus.size(); ++i) {
    const LineTimes& t = line.perGpu[i];
    md += "| " + prediction.gpus[i] + " | " + formatMs(t.forwardMs) + " | " +
          formatMs(t.backwardMs) + " | " + formatMs(t.optimizerMs) + " | " + formatMs(t.totalMs()) +
          " | " + formatMs(t.gpuMs) + " | " + percent(t.shareOfIteration) + " |\n";
    if (t.hostBound)
      hostBound += (hostBound.empty() ? "" : ", ") + prediction.gpus[i] + " (GPU idle " +
                   formatMs(t.gpuIdleMs) + " of " + formatMs(t.totalMs()) + ")";
  }
  if (!hostBound.empty())
    md += "\n**Host-bound** on " + hostBound +
          ": the GPU waits for the CPU to issue this line's work. A larger batch, CUDA graphs "
          "or `torch.compile` (fewer, larger kernels) help.\n";
  md += "\nOps on this line (" + std::to_string(line.opCount) + "): ";
  for (size_t i = 0; i < line.opNames.size(); ++i)
    md += (i ? ", `" : "`") + line.opNames[i] + "`";
  md += "\n\nMethod: " + prediction.method + "\n";
  return md;
}

std::string summaryTitle(const GpuSummary& summary) {
  std::string title = summary.gpuId + ": " + formatMs(summary.iterationMs) + "/iter \u00b7 " +
                      groupedInteger(summary.samplesPerSecond) + " samples/s";
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
  std::string title = "batch " + std::to_string(prediction.batchSize) + " \u00b7 peak memory " +
                      formatBytes(prediction.summaries.front().memory.peakBytes());
  std::string tooBig;
  for (const auto& summary : prediction.summaries)
    if (!summary.fitsInMemory)
      tooBig += (tooBig.empty() ? "" : ", ") + summary.gpuId;
  title += tooBig.empty() ? " \u00b7 fits on all targets" : " \u00b7 does not fit on " + tooBig;
  return title;
}

std::string outOfMemoryMessage(const Prediction& prediction) {
  std::string message;
  for (const auto& summary : prediction.summaries) {
    if (summary.fitsInMemory)
      continue;
    if (!message.empty())
      message += "\n";
    message += "Out of memory on " + summary.gpuId + ": batch size " +
               std::to_string(prediction.batchSize) + " needs about " +
               formatBytes(summary.memory.peakBytes()) + ", the GPU has " +
               formatBytes(summary.memoryCapacityBytes) + ". Lower the batch size.";
  }
  return message;
}

std::string errorMessage(const ProfileError& error) {
  std::string message = error.message;
  if (!error.hint.empty())
    message += "\n" + error.hint;
  return message;
}

} // namespace wavecast::lsp
