#include "trace_warning_json.h"

#include <array>
#include <utility>

namespace wavecast {
namespace {

using nlohmann::json;

// The tracer's names (wavecast_tracer/trace_warnings.py) and the wire format's.
constexpr std::array<std::pair<TraceWarningKind, const char*>, 19> kKindNames{{
    {TraceWarningKind::OldTorch, "old_torch"},
    {TraceWarningKind::CudaTracedOnCpu, "cuda_traced_on_cpu"},
    {TraceWarningKind::TorchCompile, "torch_compile"},
    {TraceWarningKind::AutocastCpuOnly, "autocast_cpu_only"},
    {TraceWarningKind::AutocastUnsupportedDtype, "autocast_unsupported_dtype"},
    {TraceWarningKind::AutocastOtherDevice, "autocast_other_device"},
    {TraceWarningKind::HostTensorWithGpu, "host_tensor_with_gpu"},
    {TraceWarningKind::CuptiDropped, "cupti_dropped"},
    {TraceWarningKind::KernelsOutsideOps, "kernels_outside_ops"},
    {TraceWarningKind::RepeatSkipped, "repeat_skipped"},
    {TraceWarningKind::UnsupportedDistributed, "unsupported_distributed"},
    {TraceWarningKind::CallStubbed, "call_stubbed"},
    {TraceWarningKind::HostTimeMeasured, "host_time_measured"},
    {TraceWarningKind::CpuOnlyScript, "cpu_only_script"},
    {TraceWarningKind::PartialBatch, "partial_batch"},
    {TraceWarningKind::UnrepeatedWork, "unrepeated_work"},
    {TraceWarningKind::EvenRouting, "even_routing"},
    {TraceWarningKind::TracedInCpuMode, "traced_in_cpu_mode"},
    {TraceWarningKind::Sentence, "sentence"},
}};

[[noreturn]] void fail(const std::string& what) {
  throw TraceFormatError("invalid trace: warnings: " + what);
}

SourceLocation locationFromJson(const json& value) {
  SourceLocation loc;
  loc.file = value.value("file", std::string());
  loc.line = value.value("line", 0);
  return loc;
}

} // namespace

const char* toString(Severity severity) {
  return severity == Severity::Info ? "info" : "warning";
}

std::optional<Severity> severityFromString(std::string_view text) {
  if (text == "warning")
    return Severity::Warning;
  if (text == "info")
    return Severity::Info;
  return std::nullopt;
}

const char* toString(TraceWarningKind kind) {
  for (const auto& [k, name] : kKindNames)
    if (k == kind)
      return name;
  return "sentence";
}

std::optional<TraceWarningKind> traceWarningKindFromString(std::string_view text) {
  for (const auto& [kind, name] : kKindNames)
    if (text == name)
      return kind;
  return std::nullopt;
}

TraceWarning traceWarningFromJson(const json& value, int version) {
  TraceWarning warning;
  if (version < 2) {
    if (!value.is_string())
      fail("a version-1 trace's warnings are strings");
    warning.text = value.get<std::string>();
    return warning;
  }
  if (!value.is_object())
    fail("each warning must be an object with a \"kind\"");
  const auto kind = traceWarningKindFromString(value.value("kind", std::string()));
  if (!kind)
    fail("unknown kind \"" + value.value("kind", std::string()) + "\"");
  const auto severity = severityFromString(value.value("severity", std::string("warning")));
  if (!severity)
    fail("severity must be \"warning\" or \"info\"");
  warning.kind = *kind;
  warning.severity = *severity;
  warning.loc = locationFromJson(value);
  if (const auto origin = value.find("origin"); origin != value.end() && origin->is_object())
    warning.origin = locationFromJson(*origin);
  warning.count = value.value("count", int64_t{0});
  warning.ms = value.value("ms", 0.0);
  warning.repeat = value.value("repeat", 0);
  warning.dtype = value.value("dtype", std::string());
  warning.device = value.value("device", std::string());
  warning.version = value.value("version", std::string());
  warning.call = value.value("call", std::string());
  warning.text = value.value("text", std::string());
  return warning;
}

json traceWarningToJson(const TraceWarning& warning) {
  json out{{"kind", toString(warning.kind)}, {"severity", toString(warning.severity)}};
  if (warning.loc.valid()) {
    out["file"] = warning.loc.file;
    out["line"] = warning.loc.line;
  }
  if (warning.origin)
    out["origin"] = {{"file", warning.origin->file}, {"line", warning.origin->line}};
  if (warning.count)
    out["count"] = warning.count;
  if (warning.ms)
    out["ms"] = warning.ms;
  if (warning.repeat)
    out["repeat"] = warning.repeat;
  if (!warning.dtype.empty())
    out["dtype"] = warning.dtype;
  if (!warning.device.empty())
    out["device"] = warning.device;
  if (!warning.version.empty())
    out["version"] = warning.version;
  if (!warning.call.empty())
    out["call"] = warning.call;
  if (!warning.text.empty())
    out["text"] = warning.text;
  return out;
}

} // namespace wavecast
