#include "wavecast/eval/harness.h"

#include "wavecast/learned/learned_models.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace wavecast::eval {
namespace {

using learned::GpuFeatures;
using learned::KernelShape;

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

constexpr std::array<OpFamily, 5> kReportedFamilies = {
    OpFamily::Gemm, OpFamily::Elementwise, OpFamily::Norm, OpFamily::Softmax, OpFamily::Other};

double signedPercent(double predicted, double measured) {
  return measured > 0 ? 100.0 * (predicted - measured) / measured : 0.0;
}

nlohmann::json summaryJson(const ErrorSummary& s) {
  return {{"count", s.count},
          {"mapePercent", s.mapePercent},
          {"medianPercent", s.medianPercent},
          {"biasPercent", s.biasPercent}};
}

nlohmann::json familiesJson(const std::array<FamilyComparison, kOpFamilyCount>& families) {
  nlohmann::json out = nlohmann::json::object();
  for (OpFamily f : kReportedFamilies) {
    const FamilyComparison& c = families[size_t(f)];
    out[toString(f)] = {{"measuredMs", c.measuredMs},
                        {"predictedMs", c.predictedMs},
                        {"weightedErrorPercent", c.weightedErrorPercent()}};
  }
  return out;
}

std::string familyCells(const std::array<FamilyComparison, kOpFamilyCount>& families,
                        const char* separator) {
  std::string out;
  for (OpFamily f : kReportedFamilies) {
    const FamilyComparison& c = families[size_t(f)];
    out += separator;
    out += c.measuredMs > 0 ? format("%.1f%%", c.weightedErrorPercent()) : std::string("-");
  }
  return out;
}

} // namespace

std::vector<double> RooflineTimer::timesMs(const std::vector<KernelShape>& kernels,
                                           const GpuFeatures& gpu) const {
  std::vector<double> times;
  times.reserve(kernels.size());
  for (const KernelShape& k : kernels)
    times.push_back(k.valid() ? learned::rooflineCost(k, gpu).boundMs() : 0.0);
  return times;
}

std::vector<double> LearnedTimer::timesMs(const std::vector<KernelShape>& kernels,
                                          const GpuFeatures& gpu) const {
  std::vector<learned::KernelQuery> queries;
  queries.reserve(kernels.size());
  for (const KernelShape& k : kernels)
    queries.push_back({k, gpu});
  const auto answers = models_.predictMs(queries);
  std::vector<double> times;
  times.reserve(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i)
    times.push_back(answers[i]           ? *answers[i]
                    : kernels[i].valid() ? learned::rooflineCost(kernels[i], gpu).boundMs()
                                         : 0.0);
  return times;
}

double FamilyComparison::weightedErrorPercent() const {
  return measuredMs > 0 ? 100.0 * absErrorMs / measuredMs : 0.0;
}

void FamilyComparison::add(const FamilyComparison& other) {
  measuredMs += other.measuredMs;
  predictedMs += other.predictedMs;
  absErrorMs += other.absErrorMs;
}

double LabelResult::errorPercent() const {
  return signedPercent(predictedE2eMs, measuredE2eMs);
}

double LabelResult::baselineErrorPercent() const {
  return signedPercent(baselineE2eMs, measuredE2eMs);
}

ErrorSummary ErrorSummary::of(const std::vector<double>& signedPercents) {
  ErrorSummary s;
  s.count = int(signedPercents.size());
  if (signedPercents.empty())
    return s;
  std::vector<double> absolute;
  for (double e : signedPercents) {
    absolute.push_back(std::abs(e));
    s.mapePercent += std::abs(e);
    s.biasPercent += e;
  }
  s.mapePercent /= s.count;
  s.biasPercent /= s.count;
  std::sort(absolute.begin(), absolute.end());
  const size_t mid = absolute.size() / 2;
  s.medianPercent = absolute.size() % 2 ? absolute[mid] : 0.5 * (absolute[mid - 1] + absolute[mid]);
  return s;
}

LabelResult evaluateLabel(const LabelRun& run, const GpuFeatures& gpu, const KernelTimer& model,
                          const KernelTimer& baseline, std::vector<UnmappedRow>* unmapped) {
  LabelResult result;
  result.gpu = run.gpu;
  result.label = run.id();
  result.mode = run.mode;
  result.numLayers = run.numLayers;
  result.measuredE2eMs = run.e2eMs;

  std::vector<MappedRow> mapped;
  std::vector<KernelShape> kernels;
  for (const FxRow& row : run.rows) {
    mapped.push_back(mapFxRow(row, run.training()));
    for (const auto* list :
         {&mapped.back().forward, &mapped.back().backward, &mapped.back().accumulate})
      kernels.insert(kernels.end(), list->begin(), list->end());
  }
  const std::vector<double> modelTimes = model.timesMs(kernels, gpu);
  const std::vector<double> baselineTimes = baseline.timesMs(kernels, gpu);

  size_t next = 0;
  for (size_t i = 0; i < run.rows.size(); ++i) {
    const FxRow& row = run.rows[i];
    const MappedRow& m = mapped[i];
    const double repeat = row.inRepeatedLayer ? run.numLayers : 1.0;
    double predicted = 0, predictedBaseline = 0;
    const size_t count = m.forward.size() + m.backward.size() + m.accumulate.size();
    for (size_t k = 0; k < count; ++k, ++next) {
      predicted += modelTimes[next];
      predictedBaseline += baselineTimes[next];
    }
    ++result.rows;
    result.measuredOpSumMs += repeat * row.measuredMs();
    if (!m.mapped) {
      ++result.unmappedRows;
      if (unmapped)
        unmapped->push_back({run.gpu + "/" + run.id(), row.name, row.kind, row.target, m.reason});
      continue;
    }
    if (m.family == OpFamily::Metadata) {
      ++result.metadataRows;
      continue;
    }
    result.predictedE2eMs += repeat * predicted;
    result.baselineE2eMs += repeat * predictedBaseline;
    FamilyComparison& family = result.families[size_t(m.family)];
    family.measuredMs += repeat * row.measuredMs();
    family.predictedMs += repeat * predicted;
    family.absErrorMs += repeat * std::abs(predicted - row.measuredMs());
    std::string described;
    for (const KernelShape& k : m.forward)
      described += (described.empty() ? "" : "; ") + k.describe();
    result.details.push_back(
        {row.name, m.op, m.family, repeat, row.measuredMs(), predicted, described});
  }
  return result;
}

EvalReport evaluateLabels(const LabelListing& listing,
                          const std::map<std::string, GpuFeatures>& gpus, const KernelTimer& model,
                          const KernelTimer& baseline) {
  EvalReport report;
  report.modelName = model.name();
  report.labelsWithoutRows = listing.withoutRows;
  std::map<std::string, std::vector<const LabelResult*>> byGpu;
  for (const LabelFile& file : listing.runs) {
    const auto spec = gpus.find(file.gpu);
    if (spec == gpus.end())
      throw std::runtime_error("no spec sheet for GPU folder '" + file.gpu +
                               "': add the GPU to data/gpus.json (docs/gpus.md)");
    const LabelRun run = readLabelRun(file.gpu, file.csvPath);
    report.labels.push_back(evaluateLabel(run, spec->second, model, baseline, &report.unmapped));
  }
  summarise(report);
  return report;
}

void summarise(EvalReport& report) {
  report.gpus.clear();
  report.families = {};
  std::vector<double> all, allBaseline;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> errors;
  for (const LabelResult& label : report.labels) {
    errors[label.gpu].first.push_back(label.errorPercent());
    errors[label.gpu].second.push_back(label.baselineErrorPercent());
    all.push_back(label.errorPercent());
    allBaseline.push_back(label.baselineErrorPercent());
  }
  for (const auto& [gpu, lists] : errors) {
    GpuResult g;
    g.gpu = gpu;
    g.model = ErrorSummary::of(lists.first);
    g.baseline = ErrorSummary::of(lists.second);
    for (const LabelResult& label : report.labels)
      if (label.gpu == gpu)
        for (int f = 0; f < kOpFamilyCount; ++f)
          g.families[size_t(f)].add(label.families[size_t(f)]);
    for (int f = 0; f < kOpFamilyCount; ++f)
      report.families[size_t(f)].add(g.families[size_t(f)]);
    report.gpus.push_back(g);
  }
  report.overall = ErrorSummary::of(all);
  report.overallBaseline = ErrorSummary::of(allBaseline);
}

nlohmann::json toJson(const EvalReport& report) {
  nlohmann::json out;
  out["model"] = report.modelName;
  out["overall"] = summaryJson(report.overall);
  out["overallRoofline"] = summaryJson(report.overallBaseline);
  out["families"] = familiesJson(report.families);
  out["gpus"] = nlohmann::json::array();
  for (const GpuResult& g : report.gpus)
    out["gpus"].push_back(
        {{"gpu", g.gpu},
         {"databaseId",
          report.databaseIds.count(g.gpu) ? report.databaseIds.at(g.gpu) : std::string()},
         {"summary", summaryJson(g.model)},
         {"roofline", summaryJson(g.baseline)},
         {"families", familiesJson(g.families)}});
  out["labels"] = nlohmann::json::array();
  for (const LabelResult& l : report.labels)
    out["labels"].push_back({{"gpu", l.gpu},
                             {"label", l.label},
                             {"numLayers", l.numLayers},
                             {"measuredE2eMs", l.measuredE2eMs},
                             {"predictedE2eMs", l.predictedE2eMs},
                             {"errorPercent", l.errorPercent()},
                             {"rooflineE2eMs", l.baselineE2eMs},
                             {"rooflineErrorPercent", l.baselineErrorPercent()},
                             {"measuredOpSumMs", l.measuredOpSumMs},
                             {"rows", l.rows},
                             {"metadataRows", l.metadataRows},
                             {"unmappedRows", l.unmappedRows},
                             {"families", familiesJson(l.families)}});
  out["unmappedRows"] = nlohmann::json::array();
  for (const UnmappedRow& u : report.unmapped)
    out["unmappedRows"].push_back({{"label", u.label},
                                   {"row", u.row},
                                   {"kind", u.kind},
                                   {"target", u.target},
                                   {"reason", u.reason}});
  out["labelsWithoutRows"] = report.labelsWithoutRows;
  return out;
}

std::string toText(const EvalReport& report) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-22s %-26s %11s %11s %8s %9s   %s\n", "GPU", "label",
                "measured", "predicted", "error", "roofline",
                "family error: GEMM elem norm softmax other");
  out << line;
  for (const LabelResult& l : report.labels) {
    std::snprintf(line, sizeof line, "%-22s %-26s %9.1fms %9.1fms %+7.1f%% %+8.1f%%  ",
                  l.gpu.c_str(), l.label.c_str(), l.measuredE2eMs, l.predictedE2eMs,
                  l.errorPercent(), l.baselineErrorPercent());
    out << line << familyCells(l.families, " ") << "\n";
  }
  out << "\n";
  std::snprintf(line, sizeof line, "%-34s %6s %8s %8s %8s %14s\n", "GPU (database id)", "labels",
                "MAPE", "median", "bias", "roofline MAPE");
  out << line;
  for (const GpuResult& g : report.gpus) {
    const auto id = report.databaseIds.find(g.gpu);
    const std::string name =
        id == report.databaseIds.end() ? g.gpu : g.gpu + " (" + id->second + ")";
    std::snprintf(line, sizeof line, "%-34s %6d %7.1f%% %7.1f%% %+7.1f%% %13.1f%%\n", name.c_str(),
                  g.model.count, g.model.mapePercent, g.model.medianPercent, g.model.biasPercent,
                  g.baseline.mapePercent);
    out << line;
  }
  std::snprintf(line, sizeof line, "%-34s %6d %7.1f%% %7.1f%% %+7.1f%% %13.1f%%\n", "overall",
                report.overall.count, report.overall.mapePercent, report.overall.medianPercent,
                report.overall.biasPercent, report.overallBaseline.mapePercent);
  out << line;
  out << "family error (latency-weighted):" << familyCells(report.families, " ")
      << "  (GEMM elementwise norm softmax other)\n";
  out << report.unmapped.size() << " unmapped rows";
  for (const UnmappedRow& u : report.unmapped)
    out << "\n  " << u.label << " " << u.row << " (" << u.kind << " " << u.target
        << "): " << u.reason;
  out << "\n" << report.labelsWithoutRows.size() << " labels without per-op rows (not evaluable)\n";
  return out.str();
}

std::string toMarkdown(const EvalReport& report) {
  std::ostringstream out;
  out << "| GPU | label | measured ms | predicted ms | error | roofline error | GEMM | "
         "elementwise | norm | softmax | other |\n"
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const LabelResult& l : report.labels)
    out << "| " << l.gpu << " | " << l.label << " | " << format("%.1f", l.measuredE2eMs) << " | "
        << format("%.1f", l.predictedE2eMs) << " | " << format("%+.1f%%", l.errorPercent()) << " | "
        << format("%+.1f%%", l.baselineErrorPercent()) << familyCells(l.families, " | ") << " |\n";
  out << "\n| GPU | labels | MAPE | median | bias | roofline MAPE |\n"
         "|---|---:|---:|---:|---:|---:|\n";
  auto row = [&](const std::string& name, const ErrorSummary& s, const ErrorSummary& b) {
    out << "| " << name << " | " << s.count << " | " << format("%.1f%%", s.mapePercent) << " | "
        << format("%.1f%%", s.medianPercent) << " | " << format("%+.1f%%", s.biasPercent) << " | "
        << format("%.1f%%", b.mapePercent) << " |\n";
  };
  for (const GpuResult& g : report.gpus) {
    const auto id = report.databaseIds.find(g.gpu);
    row(id == report.databaseIds.end() ? g.gpu : g.gpu + " (" + id->second + ")", g.model,
        g.baseline);
  }
  row("**overall**", report.overall, report.overallBaseline);
  out << "\nUnmapped rows: " << report.unmapped.size() << ".";
  for (const UnmappedRow& u : report.unmapped)
    out << "\n- " << u.label << " `" << u.row << "` (" << u.kind << "): " << u.reason;
  out << "\n";
  return out.str();
}

} // namespace wavecast::eval
