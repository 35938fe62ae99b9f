#include "wavecast/trace.h"

#include <array>
#include <utility>

namespace wavecast {
namespace {

// The worker's names (profiler/python/wavecast_tracer) and the wire format's.
constexpr std::array<std::pair<ProfileErrorKind, const char*>, 16> kNames{{
    {ProfileErrorKind::MissingProvider, "missing_provider"},
    {ProfileErrorKind::BadProviderSignature, "bad_provider_signature"},
    {ProfileErrorKind::SyntaxError, "syntax_error"},
    {ProfileErrorKind::ImportError, "import_error"},
    {ProfileErrorKind::UserException, "user_exception"},
    {ProfileErrorKind::UnsupportedOperation, "unsupported_operation"},
    {ProfileErrorKind::MissingFile, "missing_file"},
    {ProfileErrorKind::Timeout, "timeout"},
    {ProfileErrorKind::WorkerCrashed, "worker_crashed"},
    {ProfileErrorKind::OutOfMemory, "out_of_memory"},
    {ProfileErrorKind::Cancelled, "cancelled"},
    {ProfileErrorKind::EnvironmentError, "environment_error"},
    {ProfileErrorKind::BlockedCall, "blocked_call"},
    {ProfileErrorKind::NoTrainingStep, "no_training_step"},
    {ProfileErrorKind::BadRequest, "bad_request"},
    {ProfileErrorKind::Internal, "internal"},
}};

} // namespace

const char* toString(ProfileErrorKind kind) {
  for (const auto& [k, name] : kNames)
    if (k == kind)
      return name;
  return "internal";
}

std::optional<ProfileErrorKind> profileErrorKindFromString(std::string_view name) {
  for (const auto& [kind, text] : kNames)
    if (name == text)
      return kind;
  return std::nullopt;
}

} // namespace wavecast
