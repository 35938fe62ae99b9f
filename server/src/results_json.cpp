#include "results_json.h"

#include "json_writer.h"
#include "presentation.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <variant>
#include <vector>

namespace wavecast {
namespace {

// torch's name of a layout's dtype ("bfloat16"); null where the layout leaves it to the model.
std::optional<std::string> dtypeName(const std::optional<ScalarType>& dtype) {
  if (!dtype)
    return std::nullopt;
  return std::string(toString(*dtype));
}

void writeMemory(JsonWriter& w, const MemoryEstimate& memory) {
  w.beginObject()
      .field("activations_bytes", memory.activationsBytes)
      .field("activations_saved_bytes", memory.activationsSavedBytes)
      .field("activations_source", toString(memory.activationsSource))
      .field("gradients_bytes", memory.gradientsBytes)
      .field("optimizer_state_bytes", memory.optimizerStateBytes)
      .field("peak_allocated_bytes", memory.allocatedPeakBytes())
      .field("peak_bytes", memory.peakBytes())
      .field("peak_reserved_bytes", memory.reservedPeakBytes())
      .field("process_bytes", memory.processPeakBytes())
      .field("weights_bytes", memory.weightsBytes)
      .field("workspace_bytes", memory.workspaceBytes());
  if (memory.peakPhase)
    w.field("peak_phase", toString(*memory.peakPhase));
  if (memory.peakOpId)
    w.field("peak_op_id", *memory.peakOpId);
  w.endObject();
}

void writeSummaries(JsonWriter& w, const Prediction& prediction) {
  w.beginArray();
  for (const auto& s : prediction.summaries) {
    w.beginObject()
        .field("gpu", s.gpuId)
        .field("name", s.gpuName)
        .field("method", gpuMethodText(s.methods))
        .field("iteration_ms", Milliseconds{s.iterationMs})
        .field("input_ms", Milliseconds{s.inputMs})
        .field("forward_ms", Milliseconds{s.forwardMs})
        .field("backward_ms", Milliseconds{s.backwardMs})
        .field("optimizer_ms", Milliseconds{s.optimizerMs})
        .field("gpu_ms", Milliseconds{s.gpuMs})
        .field("host_ms", Milliseconds{s.hostMs})
        .field("gpu_idle_ms", Milliseconds{s.gpuIdleMs})
        .field("comm_ms", Milliseconds{s.commMs})
        .field("comm_hidden_ms", Milliseconds{s.commHiddenMs})
        .field("host_bound", s.hostBound)
        .field("samples_per_second", s.samplesPerSecond)
        .field("cost_per_1k_samples_usd", s.costPer1kSamplesUsd)
        .field("price_per_hour_usd", s.pricePerHourUsd)
        .key("memory");
    writeMemory(w, s.memory);
    w.field("memory_capacity_bytes", s.memoryCapacityBytes)
        .field("fits_in_memory", s.fitsInMemory)
        .endObject();
  }
  w.endArray();
}

void writePerGpuTimes(JsonWriter& w, const std::vector<LineTimes>& times,
                      const std::vector<std::string>& gpuIds) {
  const size_t count = std::min(times.size(), gpuIds.size());
  w.beginArray();
  for (size_t g = 0; g < count; ++g)
    w.beginObject()
        .field("backward_ms", Milliseconds{times[g].backwardMs})
        .field("comm_hidden_ms", Milliseconds{times[g].commHiddenMs})
        .field("comm_ms", Milliseconds{times[g].commMs})
        .field("forward_ms", Milliseconds{times[g].forwardMs})
        .field("gpu", gpuIds[g])
        .field("gpu_idle_ms", Milliseconds{times[g].gpuIdleMs})
        .field("gpu_ms", Milliseconds{times[g].gpuMs})
        .field("host_bound", times[g].hostBound)
        .field("input_ms", Milliseconds{times[g].inputMs})
        .field("optimizer_ms", Milliseconds{times[g].optimizerMs})
        .field("share", times[g].shareOfIteration)
        .field("total_ms", Milliseconds{times[g].totalMs()})
        .endObject();
  w.endArray();
}

void writeOp(JsonWriter& w, const Prediction& prediction, size_t i) {
  const std::vector<std::string>& gpuIds = prediction.gpus;
  const size_t gpuCount = std::min(prediction.ops.size(), gpuIds.size());
  const OpInfo& info = prediction.opInfo[i];
  const OpPrediction* first = prediction.ops.empty() ? nullptr : &prediction.ops[0][i];
  w.beginObject()
      .field("approximate", first ? first->approximate : false)
      .field("bytes", first ? first->bytes : 0.0)
      .field("family", first ? toString(first->family) : "")
      .field("file", info.loc.file)
      .field("flops", first ? first->flops : 0.0)
      .field("host_ms", Milliseconds{info.hostMs})
      .field("id", info.id)
      .field("line", info.loc.line)
      .field("module", info.module)
      .field("name", info.name);
  if (info.note != CostNote::None)
    w.field("note",
            costNoteText(info.note, info.name, first ? first->family : CostFamily::Elementwise));
  w.key("per_gpu").beginArray();
  for (size_t g = 0; g < gpuCount; ++g) {
    const OpPrediction& p = prediction.ops[g][i];
    w.beginObject();
    if (p.family == CostFamily::Collective)
      w.field("comm_hidden_ms", Milliseconds{p.commHiddenMs});
    w.field("gpu", gpuIds[g])
        .field("method", toString(p.method))
        .field("time_ms", Milliseconds{p.timeMs})
        .field("wall_ms", Milliseconds{p.wallMs})
        .endObject();
  }
  w.endArray().field("phase", toString(info.phase)).endObject();
}

struct AdvisoryFacts {
  JsonWriter& out;
  void operator()(const advisory::MeasuredWithoutKernels&) const {}
  void operator()(const advisory::UnknownMeasuredGpu& facts) const {
    out.field("device", facts.device);
  }
  void operator()(const advisory::UntrainedGpus& facts) const { out.field("gpus", facts.gpus); }
  void operator()(const advisory::WaveScalingAssumption& facts) const {
    out.field("allowed", facts.problem.allowed)
        .field("count", facts.count)
        .field("gpu", facts.gpu)
        .field("kernel", facts.kernel)
        .field("limit", toString(facts.problem.limit))
        .field("requested", facts.problem.requested);
  }
  void operator()(const advisory::AttentionSubstituted& facts) const {
    out.field("compute_capability", facts.computeCapability)
        .field("count", facts.count)
        .field("gpu", facts.gpu)
        .field("runs", toString(facts.runs))
        .field("traced", toString(facts.traced));
  }
  void operator()(const advisory::ApproximateOp& facts) const {
    out.field("count", facts.count).field("family", toString(facts.family)).field("op", facts.op);
  }
  void operator()(const advisory::HostBound& facts) const {
    out.field("gpu", facts.gpu)
        .field("gpu_idle_ms", Milliseconds{facts.gpuIdleMs})
        .field("gpu_ms", Milliseconds{facts.gpuMs})
        .field("iteration_ms", Milliseconds{facts.iterationMs});
    if (facts.compiled)
      out.field("compiled", toString(*facts.compiled));
  }
  void operator()(const advisory::InputBound& facts) const {
    out.field("gpu", facts.gpu)
        .field("iteration_ms", Milliseconds{facts.iterationMs})
        .field("loader_ms", Milliseconds{facts.loaderMs})
        .field("wait_ms", Milliseconds{facts.waitMs})
        .field("workers", facts.workers);
  }
  void operator()(const advisory::HeldByCopies& facts) const {
    out.field("bytes", facts.bytes)
        .field("copy_ms", Milliseconds{facts.copyMs})
        .field("count", facts.count)
        .field("gpu", facts.gpu)
        .field("iteration_ms", Milliseconds{facts.iterationMs})
        .field("pageable", facts.pageable);
  }
  void operator()(const advisory::OutOfMemory& facts) const {
    out.field("activations_upper_bound", facts.activationsUpperBound)
        .field("capacity_bytes", facts.capacityBytes)
        .field("gpu", facts.gpu)
        .field("peak_bytes", facts.peakBytes);
  }
  void operator()(const advisory::ReplicatedExperts& facts) const {
    out.field("count", facts.count).field("tensor_parallel", facts.tensorParallel);
  }
  void operator()(const advisory::CompiledAgainstEager& facts) const {
    out.field("compiled_ms", Milliseconds{facts.compiledMs})
        .field("compiled_peak_bytes", facts.compiledPeakBytes)
        .field("eager_ms", Milliseconds{facts.eagerMs})
        .field("eager_peak_bytes", facts.eagerPeakBytes)
        .field("gpu", facts.gpu);
  }
};

void writeAdvisories(JsonWriter& w, const std::vector<Advisory>& advisories) {
  w.beginArray();
  for (const Advisory& advisory : advisories) {
    w.beginObject()
        .field("kind", toString(advisory.kind()))
        .field("message", advisoryMessage(advisory))
        .field("severity", toString(advisory.severity()));
    std::visit(AdvisoryFacts{w}, advisory.facts);
    w.endObject();
  }
  w.endArray();
}

void writeTraceWarnings(JsonWriter& w, const std::vector<TraceWarning>& warnings) {
  w.beginArray();
  for (const TraceWarning& warning : warnings) {
    w.beginObject();
    if (!warning.call.empty())
      w.field("call", warning.call);
    if (warning.count)
      w.field("count", warning.count);
    if (!warning.device.empty())
      w.field("device", warning.device);
    if (!warning.dtype.empty())
      w.field("dtype", warning.dtype);
    if (warning.loc.valid())
      w.field("file", warning.loc.file);
    w.field("kind", toString(warning.kind));
    if (warning.loc.valid())
      w.field("line", warning.loc.line);
    w.field("message", traceWarningMessage(warning));
    if (warning.ms)
      w.field("ms", warning.ms);
    if (warning.origin)
      w.key("origin")
          .beginObject()
          .field("file", warning.origin->file)
          .field("line", warning.origin->line)
          .endObject();
    if (warning.repeat)
      w.field("repeat", warning.repeat);
    w.field("severity", toString(warning.severity));
    if (!warning.version.empty())
      w.field("version", warning.version);
    w.endObject();
  }
  w.endArray();
}

void writeParallel(JsonWriter& w, const std::vector<ParallelSummary>& layouts) {
  w.beginArray();
  for (const auto& s : layouts) {
    const ParallelConfig& c = s.config;
    w.beginObject().key("advisories");
    writeAdvisories(w, s.advisories);
    w.field("batch_per_replica", s.batchPerReplica)
        .field("bubble_fraction", s.bubbleFraction)
        .field("bubble_ms", Milliseconds{s.bubbleMs})
        .field("communication_exposed_ms", Milliseconds{s.communication.exposedMs})
        .field("communication_hidden_ms", Milliseconds{s.communication.hiddenMs()})
        .field("communication_ms", Milliseconds{s.communication.ms})
        .field("communication_text",
               communicationText(s.communication.ms, s.communication.hiddenMs()))
        .field("compute_ms", Milliseconds{s.computeMs})
        .field("cost_per_1k_samples_usd", s.costPer1kSamplesUsd)
        .field("dp", c.dp)
        .field("ep", c.ep)
        .field("fits_in_memory", s.fitsInMemory)
        .field("global_batch", s.globalBatch)
        .field("gpu", s.gpuId)
        .field("gpus", s.gpus)
        .field("iteration_ms", Milliseconds{s.iterationMs})
        .field("label", parallelConfigLabel(c, s.gpuId))
        .field("mfu", s.mfu)
        .field("mfu_precision", s.mfuPrecision)
        .field("microbatch_pricing", toString(s.microbatchPricing))
        .field("microbatch_text", microbatchPricingText(s))
        .field("microbatches", c.microbatches)
        .field("model_flops", s.modelFlops)
        .field("nodes", s.nodes)
        .field("param_dtype", dtypeName(c.paramDtype))
        .field("point_to_point_ms", Milliseconds{s.pointToPointMs})
        .field("pp", c.pp)
        .field("price_per_hour_usd", s.clusterPricePerHourUsd)
        .field("recompute", c.recompute)
        .field("recompute_every", c.recompute ? c.recomputeEvery : 0)
        .field("recompute_policy", c.recompute ? toString(c.recomputePolicy) : "none")
        .field("reduce_dtype", dtypeName(c.reduceDtype))
        .field("samples_per_second", s.samplesPerSecond)
        .field("samples_per_second_per_gpu", s.samplesPerSecondPerGpu)
        .field("schedule", toString(c.schedule))
        .field("sequence_length", s.sequenceLength)
        .field("sequence_parallel", c.sequenceParallel)
        .field("sharding", toString(c.sharding))
        .key("stages")
        .beginArray();
    for (const auto& stage : s.stages) {
      w.beginObject()
          .field("backward_ms", Milliseconds{stage.backwardMs})
          .field("first_block", stage.firstBlock)
          .field("fits_in_memory", stage.fitsInMemory)
          .field("forward_ms", Milliseconds{stage.forwardMs})
          .field("last_block", stage.lastBlock)
          .key("memory");
      writeMemory(w, stage.memory);
      w.field("microbatches_in_flight", stage.microbatchesInFlight)
          .field("optimizer_ms", Milliseconds{stage.optimizerMs})
          .endObject();
    }
    w.endArray()
        .field("system", s.systemId)
        .field("tokens_per_second", s.tokensPerSecond)
        .field("tokens_per_second_per_gpu", s.tokensPerSecondPerGpu)
        .field("tp", c.tp)
        .endObject();
  }
  w.endArray();
}

void writeRefusals(JsonWriter& w, const std::vector<ParallelRefusal>& refusals) {
  w.beginArray();
  for (const auto& r : refusals)
    w.beginObject()
        .field("gpu", r.gpuId)
        .field("kind", toString(r.problem.kind))
        .field("label", parallelConfigLabel(r.config, r.gpuId))
        .field("message", layoutProblemMessage(r.problem))
        .field("system", r.systemId)
        .endObject();
  w.endArray();
}

void writeResults(JsonWriter& w, const Prediction& prediction, const TraceFacts& trace,
                  const std::vector<ParallelSummary>& parallel,
                  const std::vector<ParallelRefusal>& refusals, ResultsParts parts) {
  w.beginObject().field("method", predictionMethodText(prediction)).key("precision").beginObject();
  for (const auto& entry : prediction.precisions)
    w.field(toString(entry.family), entry.precision);
  w.endObject()
      .field("batch_size", prediction.batchSize)
      .field("routed_experts", prediction.routedExperts)
      .field("samples_per_iteration", prediction.samplesPerIteration)
      .field("gpus", prediction.gpus);
  w.key("summaries");
  writeSummaries(w, prediction);

  w.key("lines").beginArray();
  for (const auto& line : prediction.lines) {
    w.beginObject()
        .field("file", line.loc.file)
        .field("line", line.loc.line)
        .field("ops", line.opNames)
        .field("op_count", line.opCount)
        .field("activation_bytes", line.activationBytes)
        .key("per_gpu");
    writePerGpuTimes(w, line.perGpu, prediction.gpus);
    w.endObject();
  }
  w.endArray().key("modules").beginArray();
  for (const auto& module : prediction.modules) {
    w.beginObject().field("module", module.module).field("op_count", module.opCount).key("per_gpu");
    writePerGpuTimes(w, module.perGpu, prediction.gpus);
    w.endObject();
  }
  w.endArray().key("ops").beginArray();
  for (size_t i = 0; parts.ops && i < prediction.opInfo.size(); ++i)
    writeOp(w, prediction, i);
  w.endArray().key("advisories");
  writeAdvisories(w, prediction.advisories);
  w.field("file", trace.entryFile)
      .field("trace_mode", toString(trace.mode))
      .field("torch_version", trace.torchVersion)
      .field("python_env", trace.pythonEnv)
      .field("traced_with", tracedWith(trace.torchVersion, trace.pythonEnv))
      .field("fallback_ops", trace.fallbackOps)
      .key("trace_warnings");
  writeTraceWarnings(w, trace.warnings);
  if (!parallel.empty()) {
    w.key("parallel");
    writeParallel(w, parallel);
  }
  if (!refusals.empty()) {
    w.key("parallel_refusals");
    writeRefusals(w, refusals);
  }
  w.endObject();
}

} // namespace

std::string resultsJsonText(const Prediction& prediction, const TraceFacts& trace,
                            const std::vector<ParallelSummary>& parallel,
                            const std::vector<ParallelRefusal>& refusals, ResultsParts parts) {
  std::string out;
  // About 80 bytes per op and GPU, the bulk of a large model's results.
  const size_t opBytes =
      parts.ops ? prediction.opInfo.size() * (300 + 80 * prediction.gpus.size()) : 0;
  out.reserve(4096 + opBytes + prediction.lines.size() * (200 + 260 * prediction.gpus.size()));
  JsonWriter w(out);
  writeResults(w, prediction, trace, parallel, refusals, parts);
  w.finish();
  return out;
}

nlohmann::json resultsJson(const Prediction& prediction, const TraceFacts& trace,
                           const std::vector<ParallelSummary>& parallel,
                           const std::vector<ParallelRefusal>& refusals) {
  return nlohmann::json::parse(resultsJsonText(prediction, trace, parallel, refusals));
}

nlohmann::json summariesJson(const Prediction& prediction) {
  std::string out;
  {
    JsonWriter w(out);
    writeSummaries(w, prediction);
  }
  return nlohmann::json::parse(out);
}

} // namespace wavecast
