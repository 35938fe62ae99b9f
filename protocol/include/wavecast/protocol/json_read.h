// Reading typed fields out of JSON params; every failure is an InvalidParams
// RpcError whose message names the field, so the client knows what to fix.
#pragma once

#include "wavecast/protocol/jsonrpc.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace wavecast::protocol {

// `where` is the dotted path of `object` for messages ("params.textDocument").
const Json& requireObject(const Json& value, std::string_view where);
const Json& requireMember(const Json& object, std::string_view key, std::string_view where);
std::string requireString(const Json& object, std::string_view key, std::string_view where);
int64_t requireInt(const Json& object, std::string_view key, std::string_view where);
// Absent or null -> nullopt; present with another type -> InvalidParams.
std::optional<std::string> optionalString(const Json& object, std::string_view key,
                                          std::string_view where);
std::optional<int64_t> optionalInt(const Json& object, std::string_view key,
                                   std::string_view where);
std::optional<bool> optionalBool(const Json& object, std::string_view key, std::string_view where);

[[noreturn]] void throwInvalidParams(const std::string& message);

} // namespace wavecast::protocol
