#include "wavecast/eval/logo.h"

#include "wavecast/learned/kernel_dataset.h"
#include "wavecast/learned/learned_models.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace wavecast::eval {
namespace {

std::string chipOf(const std::string& stem) {
  static const std::regex chip(R"([A-Z]+[0-9]+)");
  std::smatch match;
  return std::regex_search(stem, match, chip) ? match.str() : stem;
}

// Every GPU with single-kernel measurements (kernels/<op>/<stem>.csv).
std::vector<std::string> kernelGpuStems(const std::string& dataDir) {
  std::set<std::string> stems;
  const fs::path kernels = fs::path(dataDir) / "kernels";
  if (!fs::is_directory(kernels))
    throw std::runtime_error(kernels.string() + " not found: pass the NeuSight folder (--data)");
  for (const auto& op : fs::directory_iterator(kernels))
    if (op.is_directory())
      for (const auto& file : fs::directory_iterator(op.path()))
        if (file.path().extension() == ".csv")
          stems.insert(file.path().stem().string());
  return {stems.begin(), stems.end()};
}

std::string pct(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f%%", value);
  return buffer;
}

std::string signedPct(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%+.1f%%", value);
  return buffer;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? separator : "") + items[i];
  return out;
}

} // namespace

std::vector<std::string> sameChipStems(const std::string& stem,
                                       const std::vector<std::string>& stems) {
  std::vector<std::string> same;
  for (const std::string& s : stems)
    if (chipOf(s) == chipOf(stem))
      same.push_back(s);
  return same;
}

LogoReport runLeaveOneGpuOut(const LogoOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> stems = kernelGpuStems(options.training.dataDir);
  const auto gpus = learned::loadSpecSheets(options.training.dataDir, options.training.gpuDatabase);
  const LabelListing all = listLabels(options.labelsDir, options.onlyGpus);
  std::vector<std::string> labelGpus;
  for (const LabelFile& f : all.runs)
    if (std::find(labelGpus.begin(), labelGpus.end(), f.gpu) == labelGpus.end())
      labelGpus.push_back(f.gpu);

  LogoReport report;
  report.labels.modelName = "learned (leave-one-GPU-out)";
  report.labels.labelsWithoutRows = all.withoutRows;
  const RooflineTimer roofline;
  for (const std::string& heldOut : labelGpus) {
    LogoFold fold;
    fold.heldOut = heldOut;
    fold.excluded = sameChipStems(heldOut, stems);
    if (std::find(fold.excluded.begin(), fold.excluded.end(), heldOut) == fold.excluded.end())
      fold.excluded.push_back(heldOut);
    for (const std::string& s : stems)
      if (std::find(fold.excluded.begin(), fold.excluded.end(), s) == fold.excluded.end())
        fold.trainedOn.push_back(s);

    learned::TrainOptions training = options.training;
    training.outDir = (fs::path(options.workDir) / heldOut).string();
    training.excludeGpus = fold.excluded;
    fold.trainSeconds = learned::trainLearnedModels(training).seconds;
    const learned::LearnedModels models = learned::LearnedModels::open(training.outDir);

    KernelEvalOptions kernelOptions;
    kernelOptions.dataDir = options.training.dataDir;
    kernelOptions.gpuDatabase = options.training.gpuDatabase;
    kernelOptions.targetGpus = fold.excluded;
    kernelOptions.originGpus = fold.trainedOn;
    kernelOptions.families = options.training.families;
    fold.kernels = evaluateKernels(models, kernelOptions);

    const LabelListing listing = listLabels(options.labelsDir, {heldOut});
    LabelListing rowsOnly;
    rowsOnly.runs = listing.runs;
    fold.labels = evaluateLabels(rowsOnly, gpus, LearnedTimer(models), roofline);
    for (const LabelResult& l : fold.labels.labels)
      report.labels.labels.push_back(l);
    for (const UnmappedRow& u : fold.labels.unmapped)
      report.labels.unmapped.push_back(u);
    report.folds.push_back(std::move(fold));
  }
  summarise(report.labels);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

std::string logoMarkdown(const LogoReport& report, const learned::TrainOptions& training) {
  std::ostringstream out;
  out << "Training per fold: seed " << training.seed << ", " << training.ensembleSize
      << " network(s) per family, " << training.epochs << " epochs, at most "
      << training.maxRowsPerFile << " rows per (op, GPU) file, " << training.threads
      << " threads. Whole run: " << int(report.seconds + 0.5) << " s.\n\n";

  out << "### End to end, leave-one-GPU-out (labels)\n\n"
         "| held-out GPU | trained on | labels | MAPE | median | bias | roofline MAPE | GEMM "
         "error | train s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const LogoFold& fold : report.folds) {
    for (const GpuResult& g : fold.labels.gpus)
      out << "| " << g.gpu << " | " << join(fold.trainedOn, ", ") << " | " << g.model.count << " | "
          << pct(g.model.mapePercent) << " | " << pct(g.model.medianPercent) << " | "
          << signedPct(g.model.biasPercent) << " | " << pct(g.baseline.mapePercent) << " | "
          << pct(g.families[size_t(OpFamily::Gemm)].weightedErrorPercent()) << " | "
          << int(fold.trainSeconds + 0.5) << " |\n";
  }
  const EvalReport& pooled = report.labels;
  out << "| **all** | | " << pooled.overall.count << " | **" << pct(pooled.overall.mapePercent)
      << "** | " << pct(pooled.overall.medianPercent) << " | "
      << signedPct(pooled.overall.biasPercent) << " | " << pct(pooled.overallBaseline.mapePercent)
      << " | " << pct(pooled.families[size_t(OpFamily::Gemm)].weightedErrorPercent()) << " | |\n\n";

  out << "Latency-weighted error per op family over all held-out labels: ";
  std::vector<std::string> familyErrors;
  for (OpFamily f :
       {OpFamily::Gemm, OpFamily::Elementwise, OpFamily::Norm, OpFamily::Softmax, OpFamily::Other})
    familyErrors.push_back(std::string(toString(f)) + " " +
                           pct(pooled.families[size_t(f)].weightedErrorPercent()));
  out << join(familyErrors, ", ") << ".\n\n";

  out << "### Per label (each predicted by the fold that never saw its GPU)\n\n"
      << toMarkdown(pooled) << "\n";

  out << "### Single kernels, from specs alone (held-out GPU)\n\n"
         "| family | GPU | rows | MAPE | median | latency-weighted | roofline MAPE |\n"
         "|---|---|---:|---:|---:|---:|---:|\n";
  for (const LogoFold& fold : report.folds)
    for (const auto& f : fold.kernels.families)
      out << "| " << learned::toString(f.family) << " | " << f.gpu << " | " << f.model.samples
          << " | " << pct(f.model.mapePercent) << " | " << pct(f.model.medianPercent) << " | "
          << pct(f.model.weightedErrorPercent) << " | " << pct(f.roofline.mapePercent) << " |\n";

  out << "\n### Single kernels, scaled from a GPU that was measured (Habitat's way)\n\n"
         "time_B = measured_A x model(B) / model(A), A one of the training GPUs, B the held-out "
         "one; mean MAPE over the origins A (the roofline ratio in place of the model for "
         "comparison).\n\n"
         "| family | target GPU | origins | model-scaled MAPE | roofline-scaled MAPE |\n"
         "|---|---|---:|---:|---:|\n";
  for (const LogoFold& fold : report.folds) {
    std::map<std::pair<std::string, std::string>, std::vector<const CrossGpuAccuracy*>> groups;
    for (const auto& c : fold.kernels.crossGpu)
      groups[{learned::toString(c.family), c.target}].push_back(&c);
    for (const auto& [key, list] : groups) {
      double model = 0, roof = 0;
      for (const CrossGpuAccuracy* c : list) {
        model += c->scaledByModel.mapePercent;
        roof += c->scaledByRoofline.mapePercent;
      }
      out << "| " << key.first << " | " << key.second << " | " << list.size() << " | "
          << pct(model / double(list.size())) << " | " << pct(roof / double(list.size())) << " |\n";
    }
  }

  out << "\n### Against the goals\n\n";
  const double e2e = pooled.overall.mapePercent;
  out << "- End-to-end MAPE, leave-one-GPU-out: " << pct(e2e) << " (goal <= 5%): "
      << (e2e <= 5.0 ? std::string("met")
                     : "short by " + pct(e2e - 5.0).substr(0, pct(e2e - 5.0).size() - 1) +
                           " percentage points")
      << ".\n";
  std::vector<std::string> over;
  for (const GpuResult& g : pooled.gpus)
    if (g.model.mapePercent >= 10.0)
      over.push_back(g.gpu + " " + pct(g.model.mapePercent));
  out << "- Every GPU under 10%: "
      << (over.empty() ? std::string("met") : "not met (" + join(over, ", ") + ")") << ".\n";
  const double gemm = pooled.families[size_t(OpFamily::Gemm)].weightedErrorPercent();
  out << "- GEMM op-family error (latency-weighted, labels): " << pct(gemm)
      << " (goal < 10%): " << (gemm < 10.0 ? "met" : "not met") << ".\n";
  return out.str();
}

} // namespace wavecast::eval
