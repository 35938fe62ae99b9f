#include "wavecast/trace.h"

#include "trace_warning_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace wavecast {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& what) {
  throw TraceFormatError("invalid wavecast trace: " + what);
}

// A malformed field of an op record, named from its `where` (opRecordFromJson's callers
// say which file it is).
[[noreturn]] void failField(const std::string& what) {
  throw TraceFormatError(what);
}

std::optional<TensorMeta> tensorFromJson(const json& j, const std::string& where) {
  if (j.is_null())
    return std::nullopt;
  if (!j.is_object())
    failField(where + " must be an object or null");
  TensorMeta t;
  const auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array())
    failField(where + ".shape must be a list of integers");
  for (const auto& d : *shape) {
    if (!d.is_number_integer())
      failField(where + ".shape must be a list of integers");
    t.shape.push_back(d.get<int64_t>());
  }
  t.dtype = scalarTypeFromString(j.value("dtype", std::string("float32")));
  t.contiguous = j.value("contiguous", true);
  if (const auto strides = j.find("strides"); strides != j.end()) {
    if (!strides->is_array() || strides->size() != t.shape.size())
      failField(where + ".strides must be a list of integers, one per dimension");
    for (const auto& s : *strides) {
      if (!s.is_number_integer())
        failField(where + ".strides must be a list of integers, one per dimension");
      t.strides.push_back(s.get<int64_t>());
    }
  }
  if (const auto same = j.find("same_as"); same != j.end()) {
    if (!same->is_number_integer() || same->get<int64_t>() < 0)
      failField(where + ".same_as must be the index of an earlier input");
    t.sameAs = same->get<int>();
  }
  if (const auto from = j.find("from"); from != j.end()) {
    if (!from->is_array() || from->size() != 2 || !(*from)[0].is_number_integer() ||
        !(*from)[1].is_number_integer() || (*from)[0].get<int64_t>() < 0 ||
        (*from)[1].get<int64_t>() < 0)
      failField(where + ".from must be [op id, output index]");
    t.source = TensorMeta::Source{(*from)[0].get<int64_t>(), (*from)[1].get<int>()};
  }
  return t;
}

json tensorToJson(const std::optional<TensorMeta>& t) {
  if (!t)
    return nullptr;
  json j{{"shape", t->shape}, {"dtype", toString(t->dtype)}, {"contiguous", t->contiguous}};
  if (!t->strides.empty())
    j["strides"] = t->strides;
  if (t->sameAs >= 0)
    j["same_as"] = t->sameAs;
  if (t->source)
    j["from"] = json::array({t->source->op, t->source->output});
  return j;
}

SourceLocation locationFromJson(const json& j) {
  SourceLocation loc;
  if (!j.is_object())
    return loc;
  loc.file = j.value("file", std::string());
  loc.line = j.value("line", 0);
  loc.function = j.value("function", std::string());
  return loc;
}

json locationToJson(const SourceLocation& loc) {
  return json{{"file", loc.file}, {"line", loc.line}, {"function", loc.function}};
}

std::optional<ArgValue> argFromJson(const json& j) {
  if (j.is_boolean())
    return ArgValue(j.get<bool>());
  if (j.is_number_integer())
    return ArgValue(j.get<int64_t>());
  if (j.is_number_float())
    return ArgValue(j.get<double>());
  if (j.is_string())
    return ArgValue(j.get<std::string>());
  if (j.is_array()) {
    std::vector<int64_t> values;
    for (const auto& e : j) {
      if (e.is_number_integer())
        values.push_back(e.get<int64_t>());
      else if (e.is_boolean())
        values.push_back(e.get<bool>() ? 1 : 0);
      else
        return std::nullopt; // lists of other kinds do not change the cost model
    }
    return ArgValue(std::move(values));
  }
  return std::nullopt;
}

json argToJson(const ArgValue& v) {
  return std::visit([](const auto& x) { return json(x); }, v);
}

KernelRecord kernelFromJson(const json& j) {
  KernelRecord k;
  // Unknown kinds (a newer worker's) are read as kernels: their grid decides their scaling.
  k.kind = gpuActivityKindFromString(j.value("kind", std::string("kernel")))
               .value_or(GpuActivityKind::Kernel);
  k.bytes = j.value("bytes", int64_t{0});
  k.name = j.value("name", std::string());
  k.grid = j.value("grid", std::vector<int64_t>{});
  k.block = j.value("block", std::vector<int64_t>{});
  k.registersPerThread = j.value("registers_per_thread", 0);
  k.staticSharedBytes = j.value("static_shared_bytes", int64_t{0});
  k.dynamicSharedBytes = j.value("dynamic_shared_bytes", int64_t{0});
  k.durationMs = j.value("duration_ms", 0.0);
  return k;
}

json kernelToJson(const KernelRecord& k) {
  json j{{"name", k.name},
         {"grid", k.grid},
         {"block", k.block},
         {"registers_per_thread", k.registersPerThread},
         {"static_shared_bytes", k.staticSharedBytes},
         {"dynamic_shared_bytes", k.dynamicSharedBytes},
         {"duration_ms", k.durationMs}};
  if (k.kind != GpuActivityKind::Kernel) {
    j["kind"] = toString(k.kind);
    j["bytes"] = k.bytes;
  }
  return j;
}

} // namespace

OpRecord opRecordFromJson(const json& j, const std::string& where) {
  if (!j.is_object())
    failField(where + " must be an object");
  OpRecord op;
  op.id = j.value("id", int64_t{0});
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    failField(where + ".name is missing");
  op.name = name->get<std::string>();
  const auto phase = phaseFromString(j.value("phase", std::string("forward")));
  if (!phase)
    failField(where + ".phase must be forward, backward or optimizer");
  op.phase = *phase;
  for (const char* key : {"inputs", "outputs"}) {
    auto& out = key[0] == 'i' ? op.inputs : op.outputs;
    const auto list = j.find(key);
    if (list == j.end())
      continue;
    if (!list->is_array())
      failField(where + "." + key + " must be a list");
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
      out.push_back(tensorFromJson((*list)[i], at));
      if (out.back() && out.back()->sameAs >= static_cast<int>(i))
        failField(at + ".same_as must be the index of an earlier input");
    }
  }
  if (const auto args = j.find("args"); args != j.end() && args->is_object()) {
    for (const auto& [key, value] : args->items())
      if (auto v = argFromJson(value))
        op.args.emplace(key, std::move(*v));
  }
  if (const auto loc = j.find("loc"); loc != j.end())
    op.loc = locationFromJson(*loc);
  if (const auto stack = j.find("stack"); stack != j.end() && stack->is_array())
    for (const auto& frame : *stack)
      op.stack.push_back(locationFromJson(frame));
  op.module = j.value("module", std::string());
  if (const auto fwd = j.find("forward_id"); fwd != j.end() && fwd->is_number_integer())
    op.forwardId = fwd->get<int64_t>();
  op.fallback = j.value("fallback", false);
  if (const auto m = j.find("measured"); m != j.end() && m->is_object() && m->contains("time_ms"))
    op.measuredMs = m->at("time_ms").get<double>();
  if (const auto ks = j.find("kernels"); ks != j.end() && ks->is_array())
    for (const auto& k : *ks)
      op.kernels.push_back(kernelFromJson(k));
  if (const auto saved = j.find("saved_bytes"); saved != j.end() && saved->is_number_integer())
    op.savedBytes = saved->get<int64_t>();
  if (const auto live = j.find("live_bytes"); live != j.end() && live->is_number_integer())
    op.liveBytes = live->get<int64_t>();
  op.onHost = j.value("device", std::string()) == "cpu";
  op.gradientWork = j.value("gradient_work", false);
  if (const auto compiled = j.find("compiled"); compiled != j.end()) {
    const auto mode =
        compiled->is_string() ? compileModeFromString(compiled->get<std::string>()) : std::nullopt;
    if (!mode)
      failField(where + ".compiled must be " + compileModeChoices());
    op.compiled = *mode;
  }
  return op;
}

namespace {

json opToJson(const OpRecord& op) {
  json j{{"id", op.id}, {"name", op.name}, {"phase", toString(op.phase)}};
  j["inputs"] = json::array();
  for (const auto& t : op.inputs)
    j["inputs"].push_back(tensorToJson(t));
  j["outputs"] = json::array();
  for (const auto& t : op.outputs)
    j["outputs"].push_back(tensorToJson(t));
  j["args"] = json::object();
  for (const auto& [key, value] : op.args)
    j["args"][key] = argToJson(value);
  j["loc"] = locationToJson(op.loc);
  j["stack"] = json::array();
  for (const auto& frame : op.stack)
    j["stack"].push_back(locationToJson(frame));
  j["module"] = op.module;
  if (op.forwardId)
    j["forward_id"] = *op.forwardId;
  j["fallback"] = op.fallback;
  if (op.measuredMs)
    j["measured"] = json{{"time_ms", *op.measuredMs}};
  if (!op.kernels.empty()) {
    j["kernels"] = json::array();
    for (const auto& k : op.kernels)
      j["kernels"].push_back(kernelToJson(k));
  }
  if (op.savedBytes)
    j["saved_bytes"] = *op.savedBytes;
  if (op.liveBytes)
    j["live_bytes"] = *op.liveBytes;
  if (op.onHost)
    j["device"] = "cpu";
  if (op.gradientWork)
    j["gradient_work"] = true;
  if (op.compiled)
    j["compiled"] = toString(*op.compiled);
  return j;
}

template <typename T> std::optional<T> getArg(const OpRecord& op, const std::string& key) {
  const auto it = op.args.find(key);
  if (it == op.args.end())
    return std::nullopt;
  if (const auto* v = std::get_if<T>(&it->second))
    return *v;
  return std::nullopt;
}

} // namespace

const char* toString(Phase phase) {
  switch (phase) {
  case Phase::Forward:
    return "forward";
  case Phase::Backward:
    return "backward";
  case Phase::Optimizer:
    return "optimizer";
  }
  return "forward";
}

std::optional<Phase> phaseFromString(const std::string& text) {
  if (text == "forward")
    return Phase::Forward;
  if (text == "backward")
    return Phase::Backward;
  if (text == "optimizer")
    return Phase::Optimizer;
  return std::nullopt;
}

const char* toString(Provider provider) {
  switch (provider) {
  case Provider::Model:
    return "model";
  case Provider::Input:
    return "input";
  case Provider::Iteration:
    return "iteration";
  }
  return "model";
}

std::optional<Provider> providerFromString(std::string_view text) {
  for (const Provider provider : {Provider::Model, Provider::Input, Provider::Iteration})
    if (text == toString(provider))
      return provider;
  return std::nullopt;
}

const char* toString(TraceMode mode) {
  switch (mode) {
  case TraceMode::Shape:
    return "shape";
  case TraceMode::Cpu:
    return "cpu";
  case TraceMode::Cuda:
    return "cuda";
  }
  return "shape";
}

std::optional<TraceMode> traceModeFromString(const std::string& text) {
  if (text == "shape")
    return TraceMode::Shape;
  if (text == "cpu")
    return TraceMode::Cpu;
  if (text == "cuda")
    return TraceMode::Cuda;
  return std::nullopt;
}

const char* toString(GpuActivityKind kind) {
  switch (kind) {
  case GpuActivityKind::Kernel:
    return "kernel";
  case GpuActivityKind::Memcpy:
    return "memcpy";
  case GpuActivityKind::Memset:
    return "memset";
  }
  return "kernel";
}

std::optional<GpuActivityKind> gpuActivityKindFromString(const std::string& text) {
  if (text == "kernel")
    return GpuActivityKind::Kernel;
  if (text == "memcpy")
    return GpuActivityKind::Memcpy;
  if (text == "memset")
    return GpuActivityKind::Memset;
  return std::nullopt;
}

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (const auto d : shape)
    n *= d;
  return n;
}

std::optional<int64_t> OpRecord::intArg(const std::string& key) const {
  if (auto v = getArg<int64_t>(*this, key))
    return v;
  if (auto b = getArg<bool>(*this, key))
    return *b ? 1 : 0;
  return std::nullopt;
}

std::optional<double> OpRecord::floatArg(const std::string& key) const {
  if (auto v = getArg<double>(*this, key))
    return v;
  if (auto i = getArg<int64_t>(*this, key))
    return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> OpRecord::boolArg(const std::string& key) const {
  if (auto v = getArg<bool>(*this, key))
    return v;
  if (auto i = getArg<int64_t>(*this, key))
    return *i != 0;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> OpRecord::intListArg(const std::string& key) const {
  if (auto v = getArg<std::vector<int64_t>>(*this, key))
    return v;
  if (auto i = getArg<int64_t>(*this, key))
    return std::vector<int64_t>{*i};
  return std::nullopt;
}

const TensorMeta* OpRecord::input(size_t index) const {
  return index < inputs.size() && inputs[index] ? &*inputs[index] : nullptr;
}

const TensorMeta* OpRecord::output(size_t index) const {
  return index < outputs.size() && outputs[index] ? &*outputs[index] : nullptr;
}

bool OpRecord::broadcastsAnInput() const {
  int64_t largest = 0;
  for (const auto* tensors : {&inputs, &outputs})
    for (const auto& t : *tensors)
      if (t)
        largest = std::max(largest, t->numel());
  return std::any_of(inputs.begin(), inputs.end(), [&](const std::optional<TensorMeta>& t) {
    return t && t->numel() > 1 && t->numel() < largest;
  });
}

Trace traceFromJson(const json& doc) {
  if (!doc.is_object())
    fail("expected a JSON object");
  if (doc.value("format", std::string()) != "wavecast-trace")
    fail("\"format\" must be \"wavecast-trace\"; is this a wavecast trace file?");
  const auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer())
    fail("\"version\" is missing");
  Trace t;
  t.version = version->get<int>();
  if (t.version > kTraceFormatVersion)
    throw TraceFormatError("this trace has format version " + std::to_string(t.version) +
                           " but this wavecast reads up to version " +
                           std::to_string(kTraceFormatVersion) + "; update wavecast to read it");
  if (t.version < 1)
    fail("\"version\" must be at least 1");
  if (const auto p = doc.find("producer"); p != doc.end() && p->is_object()) {
    t.torchVersion = p->value("torch", std::string());
    t.pythonVersion = p->value("python", std::string());
    t.pythonEnv = p->value("python_env", std::string());
  }
  t.entryFile = doc.value("entry_file", std::string());
  t.projectRoot = doc.value("project_root", std::string());
  t.batchSize = doc.value("batch_size", int64_t{0});
  t.samplesPerIteration = doc.value("samples_per_iteration", int64_t{0});
  if (const auto args = doc.find("script_args"); args != doc.end() && args->is_array())
    for (const auto& word : *args)
      if (word.is_string())
        t.scriptArgs.push_back(word.get<std::string>());
  const auto mode = traceModeFromString(doc.value("mode", std::string("shape")));
  if (!mode)
    fail("trace.mode must be shape, cpu or cuda");
  t.mode = *mode;
  if (const auto p = doc.find("providers"); p != doc.end() && p->is_object())
    for (const auto& [key, value] : p->items())
      if (const auto provider = providerFromString(key); provider && value.is_number_integer())
        t.providerLines[*provider] = value.get<int>();
  const auto ops = doc.find("ops");
  if (ops == doc.end() || !ops->is_array())
    fail("\"ops\" must be a list");
  t.ops.reserve(ops->size());
  for (size_t i = 0; i < ops->size(); ++i)
    try {
      t.ops.push_back(opRecordFromJson((*ops)[i], "ops[" + std::to_string(i) + "]"));
      if (!(*ops)[i].contains("id"))
        t.ops.back().id = static_cast<int64_t>(i);
    } catch (const TraceFormatError& e) {
      fail(e.what());
    }
  t.fallbackOps = doc.value("fallback_ops", std::vector<std::string>{});
  if (const auto m = doc.find("memory"); m != doc.end() && m->is_object()) {
    t.memory.parametersBytes = m->value("parameters_bytes", int64_t{0});
    t.memory.gradientsBytes = m->value("gradients_bytes", int64_t{0});
    t.memory.optimizerStateBytes = m->value("optimizer_state_bytes", int64_t{0});
    const auto optionalInt = [&](const char* key) -> std::optional<int64_t> {
      const auto v = m->find(key);
      return v != m->end() && v->is_number_integer() ? std::optional(v->get<int64_t>())
                                                     : std::nullopt;
    };
    t.memory.activationsSavedBytes = optionalInt("activations_saved_bytes");
    t.memory.peakLiveBytes = optionalInt("peak_live_bytes");
    t.memory.gradientsAtPeakBytes = optionalInt("gradients_at_peak_bytes");
    t.memory.peakReservedBytes = optionalInt("peak_reserved_bytes");
    t.memory.peakOpId = optionalInt("peak_op_id");
    if (const auto phase = m->find("peak_phase"); phase != m->end() && phase->is_string())
      t.memory.peakPhase = phaseFromString(phase->get<std::string>());
  }
  if (const auto w = doc.find("warnings"); w != doc.end() && w->is_array())
    for (const auto& warning : *w)
      t.warnings.push_back(traceWarningFromJson(warning, t.version));
  if (const auto d = doc.find("device"); d != doc.end() && d->is_string())
    t.device = d->get<std::string>();
  if (const auto p = doc.find("precision"); p != doc.end() && p->is_object()) {
    FloatPrecision precision;
    precision.matmulTf32 = p->value("matmul_tf32", precision.matmulTf32);
    precision.cudnnTf32 = p->value("cudnn_tf32", precision.cudnnTf32);
    if (const auto a = p->find("autocast"); a != p->end() && a->is_string())
      precision.autocast = scalarTypeFromString(a->get<std::string>());
    t.precision = precision;
  }
  if (const auto d = doc.find("distributed"); d != doc.end() && d->is_object()) {
    DistributedInfo info;
    const auto positive = [&](const char* key, int fallback) {
      const auto v = d->find(key);
      if (v == d->end())
        return fallback;
      if (!v->is_number_integer() || v->get<int64_t>() < 0)
        throw TraceFormatError(std::string("distributed.") + key +
                               " must be a non-negative integer, got " + v->dump());
      return static_cast<int>(v->get<int64_t>());
    };
    info.worldSize = std::max(1, positive("world_size", 1));
    info.rank = positive("rank", 0);
    info.localWorldSize = std::max(1, positive("local_world_size", info.worldSize));
    info.backend = d->value("backend", std::string());
    if (const auto g = d->find("groups"); g != d->end() && g->is_array())
      for (const auto& group : *g)
        if (group.is_object())
          info.groups.push_back(
              {group.value("name", std::string()), std::max(1, group.value("size", 1))});
    t.distributed = std::move(info);
  }
  return t;
}

json traceToJson(const Trace& t) {
  json doc{{"format", "wavecast-trace"},
           {"version", kTraceFormatVersion}, // what this build writes, whatever it read
           {"producer",
            {{"torch", t.torchVersion}, {"python", t.pythonVersion}, {"python_env", t.pythonEnv}}},
           {"entry_file", t.entryFile},
           {"project_root", t.projectRoot},
           {"batch_size", t.batchSize},
           {"samples_per_iteration", t.samples()},
           {"mode", toString(t.mode)},
           {"providers", json::object()},
           {"fallback_ops", t.fallbackOps},
           {"memory",
            {{"parameters_bytes", t.memory.parametersBytes},
             {"gradients_bytes", t.memory.gradientsBytes},
             {"optimizer_state_bytes", t.memory.optimizerStateBytes}}},
           {"warnings", json::array()}};
  for (const auto& warning : t.warnings)
    doc["warnings"].push_back(traceWarningToJson(warning));
  for (const auto& [provider, line] : t.providerLines)
    doc["providers"][toString(provider)] = line;
  if (t.device)
    doc["device"] = *t.device;
  if (!t.scriptArgs.empty())
    doc["script_args"] = t.scriptArgs;
  if (t.precision) {
    doc["precision"] = {
        {"matmul_tf32", t.precision->matmulTf32},
        {"cudnn_tf32", t.precision->cudnnTf32},
        {"autocast", t.precision->autocast ? json(toString(*t.precision->autocast)) : json()}};
  }
  if (t.distributed) {
    json groups = json::array();
    for (const auto& group : t.distributed->groups)
      groups.push_back({{"name", group.name}, {"size", group.size}});
    doc["distributed"] = {{"world_size", t.distributed->worldSize},
                          {"rank", t.distributed->rank},
                          {"local_world_size", t.distributed->localWorldSize},
                          {"backend", t.distributed->backend},
                          {"groups", std::move(groups)}};
  }
  json& memory = doc["memory"];
  if (t.memory.activationsSavedBytes)
    memory["activations_saved_bytes"] = *t.memory.activationsSavedBytes;
  if (t.memory.peakLiveBytes)
    memory["peak_live_bytes"] = *t.memory.peakLiveBytes;
  if (t.memory.gradientsAtPeakBytes)
    memory["gradients_at_peak_bytes"] = *t.memory.gradientsAtPeakBytes;
  if (t.memory.peakReservedBytes)
    memory["peak_reserved_bytes"] = *t.memory.peakReservedBytes;
  if (t.memory.peakPhase)
    memory["peak_phase"] = toString(*t.memory.peakPhase);
  if (t.memory.peakOpId)
    memory["peak_op_id"] = *t.memory.peakOpId;
  doc["ops"] = json::array();
  for (const auto& op : t.ops)
    doc["ops"].push_back(opToJson(op));
  return doc;
}

} // namespace wavecast
