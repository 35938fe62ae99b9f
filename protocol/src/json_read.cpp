#include "wavecast/protocol/json_read.h"

namespace wavecast::protocol {

namespace {

std::string path(std::string_view where, std::string_view key) {
  return std::string(where) + "." + std::string(key);
}

const Json* member(const Json& object, std::string_view key, std::string_view where) {
  requireObject(object, where);
  auto it = object.find(key);
  if (it == object.end() || it->is_null())
    return nullptr;
  return &*it;
}

} // namespace

void throwInvalidParams(const std::string& message) {
  throw RpcError(ErrorCode::InvalidParams, message);
}

const Json& requireObject(const Json& value, std::string_view where) {
  if (!value.is_object())
    throwInvalidParams(std::string(where) + " must be an object");
  return value;
}

const Json& requireMember(const Json& object, std::string_view key, std::string_view where) {
  const Json* value = member(object, key, where);
  if (!value)
    throwInvalidParams(path(where, key) + " is required");
  return *value;
}

std::string requireString(const Json& object, std::string_view key, std::string_view where) {
  const Json& value = requireMember(object, key, where);
  if (!value.is_string())
    throwInvalidParams(path(where, key) + " must be a string");
  return value.get<std::string>();
}

int64_t requireInt(const Json& object, std::string_view key, std::string_view where) {
  const Json& value = requireMember(object, key, where);
  if (!value.is_number_integer())
    throwInvalidParams(path(where, key) + " must be an integer");
  return value.get<int64_t>();
}

std::optional<std::string> optionalString(const Json& object, std::string_view key,
                                          std::string_view where) {
  const Json* value = member(object, key, where);
  if (!value)
    return std::nullopt;
  if (!value->is_string())
    throwInvalidParams(path(where, key) + " must be a string");
  return value->get<std::string>();
}

std::optional<int64_t> optionalInt(const Json& object, std::string_view key,
                                   std::string_view where) {
  const Json* value = member(object, key, where);
  if (!value)
    return std::nullopt;
  if (!value->is_number_integer())
    throwInvalidParams(path(where, key) + " must be an integer");
  return value->get<int64_t>();
}

std::optional<bool> optionalBool(const Json& object, std::string_view key, std::string_view where) {
  const Json* value = member(object, key, where);
  if (!value)
    return std::nullopt;
  if (!value->is_boolean())
    throwInvalidParams(path(where, key) + " must be true or false");
  return value->get<bool>();
}

} // namespace wavecast::protocol
