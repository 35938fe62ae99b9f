#include "results_json.h"

#include "presentation.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <variant>
#include <vector>

namespace wavecast {
namespace {

using nlohmann::json;

// Builds objects and arrays in place: nlohmann's initializer-list constructor copies every
// value and inspects the list to decide object vs array, which dominated large results.
// Keys given in ascending order are appended without a search (hint: the end); any order
// is still correct.
class ObjectBuilder {
public:
  ObjectBuilder() : value_(json::value_t::object), object_(value_.get_ref<json::object_t&>()) {}
  ObjectBuilder(const ObjectBuilder&) = delete;
  ObjectBuilder& operator=(const ObjectBuilder&) = delete;
  template <class Value> ObjectBuilder& add(const char* key, Value&& value) {
    object_.emplace_hint(object_.end(), key, std::forward<Value>(value));
    return *this;
  }
  json take() { return std::move(value_); }

private:
  json value_;
  json::object_t& object_;
};

json arrayWithCapacity(size_t size) {
  json array(json::value_t::array);
  array.get_ref<json::array_t&>().reserve(size);
  return array;
}

void append(json& array, json&& value) {
  array.get_ref<json::array_t&>().push_back(std::move(value));
}

json memoryJson(const MemoryEstimate& memory) {
  ObjectBuilder out;
  out.add("activations_bytes", memory.activationsBytes)
      .add("activations_saved_bytes", memory.activationsSavedBytes)
      .add("activations_source", toString(memory.activationsSource))
      .add("gradients_bytes", memory.gradientsBytes)
      .add("optimizer_state_bytes", memory.optimizerStateBytes)
      .add("peak_allocated_bytes", memory.allocatedPeakBytes())
      .add("peak_bytes", memory.peakBytes())
      .add("peak_reserved_bytes", memory.reservedPeakBytes())
      .add("process_bytes", memory.processPeakBytes())
      .add("weights_bytes", memory.weightsBytes)
      .add("workspace_bytes", memory.workspaceBytes());
  if (memory.peakPhase)
    out.add("peak_phase", toString(*memory.peakPhase));
  if (memory.peakOpId)
    out.add("peak_op_id", *memory.peakOpId);
  return out.take();
}

json summariesJson(const Prediction& prediction) {
  json summaries = arrayWithCapacity(prediction.summaries.size());
  for (const auto& s : prediction.summaries)
    append(summaries, ObjectBuilder()
                          .add("gpu", s.gpuId)
                          .add("name", s.gpuName)
                          .add("method", gpuMethodText(s.methods))
                          .add("iteration_ms", s.iterationMs)
                          .add("forward_ms", s.forwardMs)
                          .add("backward_ms", s.backwardMs)
                          .add("optimizer_ms", s.optimizerMs)
                          .add("gpu_ms", s.gpuMs)
                          .add("host_ms", s.hostMs)
                          .add("gpu_idle_ms", s.gpuIdleMs)
                          .add("comm_ms", s.commMs)
                          .add("comm_hidden_ms", s.commHiddenMs)
                          .add("host_bound", s.hostBound)
                          .add("samples_per_second", s.samplesPerSecond)
                          .add("cost_per_1k_samples_usd", s.costPer1kSamplesUsd)
                          .add("price_per_hour_usd", s.pricePerHourUsd)
                          .add("memory", memoryJson(s.memory))
                          .add("memory_capacity_bytes", s.memoryCapacityBytes)
                          .add("fits_in_memory", s.fitsInMemory)
                          .take());
  return summaries;
}

json perGpuTimesJson(const std::vector<LineTimes>& times, const std::vector<json>& gpuIds) {
  const size_t count = std::min(times.size(), gpuIds.size());
  json perGpu = arrayWithCapacity(count);
  for (size_t g = 0; g < count; ++g)
    append(perGpu, ObjectBuilder()
                       .add("backward_ms", times[g].backwardMs)
                       .add("comm_hidden_ms", times[g].commHiddenMs)
                       .add("comm_ms", times[g].commMs)
                       .add("forward_ms", times[g].forwardMs)
                       .add("gpu", gpuIds[g])
                       .add("gpu_idle_ms", times[g].gpuIdleMs)
                       .add("gpu_ms", times[g].gpuMs)
                       .add("host_bound", times[g].hostBound)
                       .add("optimizer_ms", times[g].optimizerMs)
                       .add("share", times[g].shareOfIteration)
                       .add("total_ms", times[g].totalMs())
                       .take());
  return perGpu;
}

json opJson(const Prediction& prediction, size_t i, const std::vector<json>& gpuIds,
            const json* methods) {
  const size_t gpuCount = std::min(prediction.ops.size(), gpuIds.size());
  const OpInfo& info = prediction.opInfo[i];
  json perGpu = arrayWithCapacity(gpuCount);
  for (size_t g = 0; g < gpuCount; ++g) {
    const OpPrediction& p = prediction.ops[g][i];
    ObjectBuilder entry;
    if (p.family == CostFamily::Collective)
      entry.add("comm_hidden_ms", p.commHiddenMs);
    append(perGpu, entry.add("gpu", gpuIds[g])
                       .add("method", methods[static_cast<int>(p.method)])
                       .add("time_ms", p.timeMs)
                       .add("wall_ms", p.wallMs)
                       .take());
  }
  const OpPrediction* first = prediction.ops.empty() ? nullptr : &prediction.ops[0][i];
  ObjectBuilder op;
  op.add("approximate", first ? first->approximate : false)
      .add("bytes", first ? first->bytes : 0.0)
      .add("family", first ? toString(first->family) : "")
      .add("file", info.loc.file)
      .add("flops", first ? first->flops : 0.0)
      .add("host_ms", info.hostMs)
      .add("id", info.id)
      .add("line", info.loc.line)
      .add("module", info.module)
      .add("name", info.name);
  if (info.note != CostNote::None)
    op.add("note",
           costNoteText(info.note, info.name, first ? first->family : CostFamily::Elementwise));
  op.add("per_gpu", std::move(perGpu)).add("phase", toString(info.phase));
  return op.take();
}

json opsJson(const Prediction& prediction, const std::vector<json>& gpuIds) {
  // The method names as JSON strings, built once.
  json methods[kPredictionMethodCount];
  for (size_t m = 0; m < kPredictionMethodCount; ++m)
    methods[m] = toString(static_cast<PredictionMethod>(m));
  json ops = arrayWithCapacity(prediction.opInfo.size());
  for (size_t i = 0; i < prediction.opInfo.size(); ++i)
    append(ops, opJson(prediction, i, gpuIds, methods));
  return ops;
}

struct AdvisoryFacts {
  ObjectBuilder& out;
  void operator()(const advisory::MeasuredWithoutKernels&) const {}
  void operator()(const advisory::UnknownMeasuredGpu& facts) const {
    out.add("device", facts.device);
  }
  void operator()(const advisory::UntrainedGpus& facts) const { out.add("gpus", facts.gpus); }
  void operator()(const advisory::WaveScalingAssumption& facts) const {
    out.add("allowed", facts.problem.allowed)
        .add("count", facts.count)
        .add("gpu", facts.gpu)
        .add("kernel", facts.kernel)
        .add("limit", toString(facts.problem.limit))
        .add("requested", facts.problem.requested);
  }
  void operator()(const advisory::AttentionSubstituted& facts) const {
    out.add("compute_capability", facts.computeCapability)
        .add("count", facts.count)
        .add("gpu", facts.gpu)
        .add("runs", toString(facts.runs))
        .add("traced", toString(facts.traced));
  }
  void operator()(const advisory::ApproximateOp& facts) const {
    out.add("count", facts.count).add("family", toString(facts.family)).add("op", facts.op);
  }
  void operator()(const advisory::HostBound& facts) const {
    out.add("gpu", facts.gpu)
        .add("gpu_idle_ms", facts.gpuIdleMs)
        .add("gpu_ms", facts.gpuMs)
        .add("iteration_ms", facts.iterationMs);
  }
  void operator()(const advisory::OutOfMemory& facts) const {
    out.add("activations_upper_bound", facts.activationsUpperBound)
        .add("capacity_bytes", facts.capacityBytes)
        .add("gpu", facts.gpu)
        .add("peak_bytes", facts.peakBytes);
  }
};

json advisoriesJson(const std::vector<Advisory>& advisories) {
  json out = arrayWithCapacity(advisories.size());
  for (const Advisory& advisory : advisories) {
    ObjectBuilder object;
    object.add("kind", toString(advisory.kind()))
        .add("message", advisoryMessage(advisory))
        .add("severity", toString(advisory.severity()));
    std::visit(AdvisoryFacts{object}, advisory.facts);
    append(out, object.take());
  }
  return out;
}

json locationJson(const SourceLocation& loc) {
  return ObjectBuilder().add("file", loc.file).add("line", loc.line).take();
}

json traceWarningsJson(const std::vector<TraceWarning>& warnings) {
  json out = arrayWithCapacity(warnings.size());
  for (const TraceWarning& warning : warnings) {
    ObjectBuilder object;
    if (!warning.call.empty())
      object.add("call", warning.call);
    if (warning.count)
      object.add("count", warning.count);
    if (!warning.device.empty())
      object.add("device", warning.device);
    if (!warning.dtype.empty())
      object.add("dtype", warning.dtype);
    if (warning.loc.valid())
      object.add("file", warning.loc.file);
    object.add("kind", toString(warning.kind));
    if (warning.loc.valid())
      object.add("line", warning.loc.line);
    object.add("message", traceWarningMessage(warning));
    if (warning.ms)
      object.add("ms", warning.ms);
    if (warning.origin)
      object.add("origin", locationJson(*warning.origin));
    if (warning.repeat)
      object.add("repeat", warning.repeat);
    object.add("severity", toString(warning.severity));
    if (!warning.version.empty())
      object.add("version", warning.version);
    append(out, object.take());
  }
  return out;
}

json parallelJson(const std::vector<ParallelSummary>& layouts) {
  json out = arrayWithCapacity(layouts.size());
  for (const auto& s : layouts) {
    const ParallelConfig& c = s.config;
    json stages = arrayWithCapacity(s.stages.size());
    for (const auto& stage : s.stages)
      append(stages, ObjectBuilder()
                         .add("backward_ms", stage.backwardMs)
                         .add("first_block", stage.firstBlock)
                         .add("fits_in_memory", stage.fitsInMemory)
                         .add("forward_ms", stage.forwardMs)
                         .add("last_block", stage.lastBlock)
                         .add("memory", memoryJson(stage.memory))
                         .add("microbatches_in_flight", stage.microbatchesInFlight)
                         .add("optimizer_ms", stage.optimizerMs)
                         .take());
    append(out, ObjectBuilder()
                    .add("batch_per_replica", s.batchPerReplica)
                    .add("bubble_fraction", s.bubbleFraction)
                    .add("bubble_ms", s.bubbleMs)
                    .add("communication_exposed_ms", s.communication.exposedMs)
                    .add("communication_hidden_ms", s.communication.hiddenMs())
                    .add("communication_ms", s.communication.ms)
                    .add("communication_text",
                         communicationText(s.communication.ms, s.communication.hiddenMs()))
                    .add("compute_ms", s.computeMs)
                    .add("cost_per_1k_samples_usd", s.costPer1kSamplesUsd)
                    .add("dp", c.dp)
                    .add("fits_in_memory", s.fitsInMemory)
                    .add("global_batch", s.globalBatch)
                    .add("gpu", s.gpuId)
                    .add("gpus", s.gpus)
                    .add("iteration_ms", s.iterationMs)
                    .add("label", parallelConfigLabel(c, s.gpuId))
                    .add("mfu", s.mfu)
                    .add("mfu_precision", s.mfuPrecision)
                    .add("microbatches", c.microbatches)
                    .add("model_flops", s.modelFlops)
                    .add("nodes", s.nodes)
                    .add("point_to_point_ms", s.pointToPointMs)
                    .add("pp", c.pp)
                    .add("price_per_hour_usd", s.clusterPricePerHourUsd)
                    .add("samples_per_second", s.samplesPerSecond)
                    .add("samples_per_second_per_gpu", s.samplesPerSecondPerGpu)
                    .add("schedule", toString(c.schedule))
                    .add("sequence_length", s.sequenceLength)
                    .add("sequence_parallel", c.sequenceParallel)
                    .add("sharding", toString(c.sharding))
                    .add("stages", std::move(stages))
                    .add("system", s.systemId)
                    .add("tokens_per_second", s.tokensPerSecond)
                    .add("tokens_per_second_per_gpu", s.tokensPerSecondPerGpu)
                    .add("tp", c.tp)
                    .take());
  }
  return out;
}

json refusalsJson(const std::vector<ParallelRefusal>& refusals) {
  json out = arrayWithCapacity(refusals.size());
  for (const auto& r : refusals)
    append(out, ObjectBuilder()
                    .add("gpu", r.gpuId)
                    .add("kind", toString(r.problem.kind))
                    .add("label", parallelConfigLabel(r.config, r.gpuId))
                    .add("message", layoutProblemMessage(r.problem))
                    .add("system", r.systemId)
                    .take());
  return out;
}

} // namespace

nlohmann::json resultsJson(const Prediction& prediction, const TraceFacts& trace,
                           const std::vector<ParallelSummary>& parallel,
                           const std::vector<ParallelRefusal>& refusals) {
  std::vector<json> gpuIds(prediction.gpus.begin(), prediction.gpus.end());
  ObjectBuilder doc;
  json precision = json::object();
  for (const auto& entry : prediction.precisions)
    precision[toString(entry.family)] = entry.precision;
  doc.add("method", predictionMethodText(prediction))
      .add("precision", std::move(precision))
      .add("batch_size", prediction.batchSize)
      .add("gpus", prediction.gpus)
      .add("summaries", summariesJson(prediction));

  json lines = arrayWithCapacity(prediction.lines.size());
  for (const auto& line : prediction.lines)
    append(lines, ObjectBuilder()
                      .add("file", line.loc.file)
                      .add("line", line.loc.line)
                      .add("ops", line.opNames)
                      .add("op_count", line.opCount)
                      .add("activation_bytes", line.activationBytes)
                      .add("per_gpu", perGpuTimesJson(line.perGpu, gpuIds))
                      .take());
  doc.add("lines", std::move(lines));

  json modules = arrayWithCapacity(prediction.modules.size());
  for (const auto& module : prediction.modules)
    append(modules, ObjectBuilder()
                        .add("module", module.module)
                        .add("op_count", module.opCount)
                        .add("per_gpu", perGpuTimesJson(module.perGpu, gpuIds))
                        .take());
  doc.add("modules", std::move(modules));
  doc.add("ops", opsJson(prediction, gpuIds));
  doc.add("advisories", advisoriesJson(prediction.advisories));
  doc.add("file", trace.entryFile)
      .add("trace_mode", toString(trace.mode))
      .add("torch_version", trace.torchVersion)
      .add("python_env", trace.pythonEnv)
      .add("traced_with", tracedWith(trace.torchVersion, trace.pythonEnv))
      .add("fallback_ops", trace.fallbackOps)
      .add("trace_warnings", traceWarningsJson(trace.warnings));
  if (!parallel.empty())
    doc.add("parallel", parallelJson(parallel));
  if (!refusals.empty())
    doc.add("parallel_refusals", refusalsJson(refusals));
  return doc.take();
}

} // namespace wavecast
