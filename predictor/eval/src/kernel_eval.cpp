#include "wavecast/eval/kernel_eval.h"

#include "wavecast/learned/kernel_dataset.h"
#include "wavecast/learned/learned_models.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace wavecast::eval {
namespace {

using learned::KernelFamily;
using learned::KernelSample;

std::vector<double> modelTimes(const learned::LearnedModels& models,
                               const std::vector<const KernelSample*>& samples,
                               const learned::KernelDataset& data) {
  std::vector<learned::KernelQuery> queries;
  for (const KernelSample* s : samples)
    queries.push_back({s->shape, data.gpus.at(s->gpu)});
  const auto answers = models.predictMs(queries);
  std::vector<double> times;
  for (size_t i = 0; i < answers.size(); ++i)
    times.push_back(answers[i]
                        ? *answers[i]
                        : learned::rooflineCost(samples[i]->shape, queries[i].gpu).boundMs());
  return times;
}

std::vector<double> rooflineTimes(const std::vector<const KernelSample*>& samples,
                                  const learned::KernelDataset& data) {
  std::vector<double> times;
  for (const KernelSample* s : samples)
    times.push_back(learned::rooflineCost(s->shape, data.gpus.at(s->gpu)).boundMs());
  return times;
}

nlohmann::json errorsJson(const KernelErrors& e) {
  return {{"samples", e.samples},
          {"mapePercent", e.mapePercent},
          {"medianPercent", e.medianPercent},
          {"weightedErrorPercent", e.weightedErrorPercent}};
}

} // namespace

KernelErrors kernelErrors(const std::vector<double>& predicted,
                          const std::vector<double>& measured) {
  KernelErrors e;
  e.samples = int64_t(measured.size());
  if (measured.empty())
    return e;
  std::vector<double> relative;
  double absSum = 0, measuredSum = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    relative.push_back(std::abs(predicted[i] - measured[i]) / measured[i]);
    absSum += std::abs(predicted[i] - measured[i]);
    measuredSum += measured[i];
  }
  double sum = 0;
  for (double r : relative)
    sum += r;
  e.mapePercent = 100.0 * sum / double(relative.size());
  std::nth_element(relative.begin(), relative.begin() + long(relative.size() / 2), relative.end());
  e.medianPercent = 100.0 * relative[relative.size() / 2];
  e.weightedErrorPercent = 100.0 * absSum / measuredSum;
  return e;
}

KernelEvalReport evaluateKernels(const learned::LearnedModels& models,
                                 const KernelEvalOptions& options) {
  learned::KernelDatasetOptions dataOptions;
  dataOptions.families = options.families;
  dataOptions.onlyGpus = options.targetGpus;
  dataOptions.gpuDatabase = options.gpuDatabase;
  for (const std::string& g : options.originGpus)
    dataOptions.onlyGpus.push_back(g);
  const learned::KernelDataset data = learned::loadKernelDataset(options.dataDir, dataOptions);

  KernelEvalReport report;
  for (KernelFamily family : options.families) {
    // family -> GPU -> shape key -> sample
    std::map<std::string, std::map<std::string, const KernelSample*>> byGpu;
    for (const KernelSample& s : data.samples)
      if (s.shape.family == family)
        byGpu[s.gpu][s.shape.describe()] = &s;
    for (const std::string& target : options.targetGpus) {
      const auto found = byGpu.find(target);
      if (found == byGpu.end())
        continue;
      std::vector<const KernelSample*> samples;
      std::vector<double> measured;
      for (const auto& [key, s] : found->second) {
        samples.push_back(s);
        measured.push_back(s->latencyMs);
      }
      const std::vector<double> predicted = modelTimes(models, samples, data);
      report.families.push_back({family, target, kernelErrors(predicted, measured),
                                 kernelErrors(rooflineTimes(samples, data), measured)});
      std::map<std::string, double> targetModel;
      for (size_t i = 0; i < samples.size(); ++i)
        targetModel[samples[i]->shape.describe()] = predicted[i];

      for (const std::string& origin : options.originGpus) {
        const auto originRows = byGpu.find(origin);
        if (origin == target || originRows == byGpu.end())
          continue;
        std::vector<const KernelSample*> originSamples, targetSamples;
        for (const auto& [key, s] : originRows->second) {
          const auto twin = found->second.find(key);
          if (twin != found->second.end()) {
            originSamples.push_back(s);
            targetSamples.push_back(twin->second);
          }
        }
        const std::vector<double> originModel = modelTimes(models, originSamples, data);
        const std::vector<double> originRoof = rooflineTimes(originSamples, data);
        const std::vector<double> targetRoof = rooflineTimes(targetSamples, data);
        std::vector<double> byModel, byRoofline, truth;
        for (size_t i = 0; i < originSamples.size(); ++i) {
          const double measuredA = originSamples[i]->latencyMs;
          byModel.push_back(measuredA * targetModel.at(targetSamples[i]->shape.describe()) /
                            originModel[i]);
          byRoofline.push_back(measuredA * targetRoof[i] / originRoof[i]);
          truth.push_back(targetSamples[i]->latencyMs);
        }
        report.crossGpu.push_back({family, origin, target, kernelErrors(byModel, truth),
                                   kernelErrors(byRoofline, truth)});
      }
    }
  }
  return report;
}

nlohmann::json toJson(const KernelEvalReport& report) {
  nlohmann::json out;
  out["families"] = nlohmann::json::array();
  for (const auto& f : report.families)
    out["families"].push_back({{"family", toString(f.family)},
                               {"gpu", f.gpu},
                               {"model", errorsJson(f.model)},
                               {"roofline", errorsJson(f.roofline)}});
  out["crossGpu"] = nlohmann::json::array();
  for (const auto& c : report.crossGpu)
    out["crossGpu"].push_back({{"family", toString(c.family)},
                               {"origin", c.origin},
                               {"target", c.target},
                               {"scaledByModel", errorsJson(c.scaledByModel)},
                               {"scaledByRoofline", errorsJson(c.scaledByRoofline)}});
  return out;
}

std::string toText(const KernelEvalReport& report) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %-24s %7s %8s %8s %9s %14s\n", "family", "GPU", "rows",
                "MAPE", "median", "weighted", "roofline MAPE");
  out << line;
  for (const auto& f : report.families) {
    std::snprintf(line, sizeof line, "%-12s %-24s %7lld %7.1f%% %7.1f%% %8.1f%% %13.1f%%\n",
                  toString(f.family), f.gpu.c_str(), static_cast<long long>(f.model.samples),
                  f.model.mapePercent, f.model.medianPercent, f.model.weightedErrorPercent,
                  f.roofline.mapePercent);
    out << line;
  }
  if (!report.crossGpu.empty()) {
    std::snprintf(line, sizeof line, "\n%-12s %-24s %-24s %7s %12s %15s\n", "family", "origin",
                  "target", "rows", "model-scaled", "roofline-scaled");
    out << line;
    for (const auto& c : report.crossGpu) {
      std::snprintf(line, sizeof line, "%-12s %-24s %-24s %7lld %11.1f%% %14.1f%%\n",
                    toString(c.family), c.origin.c_str(), c.target.c_str(),
                    static_cast<long long>(c.scaledByModel.samples), c.scaledByModel.mapePercent,
                    c.scaledByRoofline.mapePercent);
      out << line;
    }
  }
  return out.str();
}

} // namespace wavecast::eval
