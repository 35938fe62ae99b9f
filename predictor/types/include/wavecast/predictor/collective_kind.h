// The kinds of NCCL collective a trace names (docs/trace-format.md, "Collective ops"): a
// value type the predictor's results carry per line, so it lives with them.
#pragma once

#include <optional>
#include <string_view>

namespace wavecast {

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, Broadcast, AllToAll, SendRecv };

// "all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv": the
// trace's args.collective (docs/trace-format.md); fromString also takes "send" and "recv".
constexpr const char* toString(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::SendRecv:
    return "send_recv";
  }
  return "unknown";
}
inline std::optional<CollectiveKind> collectiveKindFromString(std::string_view text) {
  if (text == "send" || text == "recv")
    return CollectiveKind::SendRecv;
  for (CollectiveKind kind :
       {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
        CollectiveKind::Broadcast, CollectiveKind::AllToAll, CollectiveKind::SendRecv})
    if (text == toString(kind))
      return kind;
  return std::nullopt;
}

} // namespace wavecast
