#include "wavecast/predictor/prediction.h"

#include <nlohmann/json.hpp>

namespace wavecast {

using nlohmann::json;

nlohmann::json predictionToJson(const Prediction& prediction) {
  json doc;
  doc["method"] = prediction.method;
  doc["batch_size"] = prediction.batchSize;
  doc["gpus"] = prediction.gpus;

  json summaries = json::array();
  for (const auto& s : prediction.summaries) {
    summaries.push_back({
        {"gpu", s.gpuId},
        {"name", s.gpuName},
        {"iteration_ms", s.iterationMs},
        {"forward_ms", s.forwardMs},
        {"backward_ms", s.backwardMs},
        {"optimizer_ms", s.optimizerMs},
        {"samples_per_second", s.samplesPerSecond},
        {"cost_per_1k_samples_usd", s.costPer1kSamplesUsd},
        {"price_per_hour_usd", s.pricePerHourUsd},
        {"memory",
         {{"weights_bytes", s.memory.weightsBytes},
          {"gradients_bytes", s.memory.gradientsBytes},
          {"optimizer_state_bytes", s.memory.optimizerStateBytes},
          {"activations_bytes", s.memory.activationsBytes},
          {"workspace_bytes", s.memory.workspaceBytes},
          {"peak_bytes", s.memory.peakBytes()}}},
        {"memory_capacity_bytes", s.memoryCapacityBytes},
        {"fits_in_memory", s.fitsInMemory},
    });
  }
  doc["summaries"] = std::move(summaries);

  const auto perGpuTimes = [&](const std::vector<LineTimes>& times) {
    json perGpu = json::array();
    for (size_t g = 0; g < times.size() && g < prediction.gpus.size(); ++g)
      perGpu.push_back({{"gpu", prediction.gpus[g]},
                        {"forward_ms", times[g].forwardMs},
                        {"backward_ms", times[g].backwardMs},
                        {"optimizer_ms", times[g].optimizerMs},
                        {"total_ms", times[g].totalMs()},
                        {"share", times[g].shareOfIteration}});
    return perGpu;
  };

  json lines = json::array();
  for (const auto& line : prediction.lines)
    lines.push_back({{"file", line.loc.file},
                     {"line", line.loc.line},
                     {"ops", line.opNames},
                     {"op_count", line.opCount},
                     {"per_gpu", perGpuTimes(line.perGpu)}});
  doc["lines"] = std::move(lines);

  json modules = json::array();
  for (const auto& module : prediction.modules)
    modules.push_back({{"module", module.module},
                       {"op_count", module.opCount},
                       {"per_gpu", perGpuTimes(module.perGpu)}});
  doc["modules"] = std::move(modules);

  json ops = json::array();
  for (size_t i = 0; i < prediction.opInfo.size(); ++i) {
    const OpInfo& info = prediction.opInfo[i];
    json perGpu = json::array();
    for (size_t g = 0; g < prediction.ops.size(); ++g) {
      const OpPrediction& p = prediction.ops[g][i];
      perGpu.push_back(
          {{"gpu", prediction.gpus[g]}, {"time_ms", p.timeMs}, {"method", toString(p.method)}});
    }
    const OpPrediction* first = prediction.ops.empty() ? nullptr : &prediction.ops[0][i];
    json op = {{"id", info.id},
               {"name", info.name},
               {"phase", toString(info.phase)},
               {"file", info.loc.file},
               {"line", info.loc.line},
               {"module", info.module},
               {"family", first ? first->family : std::string()},
               {"flops", first ? first->flops : 0.0},
               {"bytes", first ? first->bytes : 0.0},
               {"approximate", first ? first->approximate : false},
               {"per_gpu", std::move(perGpu)}};
    if (!info.note.empty())
      op["note"] = info.note;
    ops.push_back(std::move(op));
  }
  doc["ops"] = std::move(ops);
  doc["warnings"] = prediction.warnings;
  return doc;
}

} // namespace wavecast
