// JSON-RPC 2.0 messages as LSP uses them: decoding a message body into a
// request, notification or response, and encoding them back.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

namespace wavecast::protocol {

using Json = nlohmann::json;

// JSON-RPC and LSP error codes.
enum class ErrorCode : int {
  ParseError = -32700,
  InvalidRequest = -32600,
  MethodNotFound = -32601,
  InvalidParams = -32602,
  InternalError = -32603,
  ServerNotInitialized = -32002,
  UnknownErrorCode = -32001,
  RequestFailed = -32803,
  ServerCancelled = -32802,
  ContentModified = -32801,
  RequestCancelled = -32800,
};

struct ResponseError {
  ErrorCode code = ErrorCode::InternalError;
  std::string message;
  Json data; // null when absent
};

// Thrown by handlers and parameter decoders; the dispatcher turns it into an error response.
class RpcError : public std::runtime_error {
public:
  RpcError(ErrorCode code, const std::string& message, Json data = nullptr)
      : std::runtime_error(message), code_(code), data_(std::move(data)) {}
  ErrorCode code() const { return code_; }
  const Json& data() const { return data_; }
  ResponseError toResponseError() const { return {code_, what(), data_}; }

private:
  ErrorCode code_;
  Json data_;
};

// An id is an integer or a string; null only in error responses to undecodable requests.
struct Request {
  Json id;
  std::string method;
  Json params; // null when absent
};

struct Notification {
  std::string method;
  Json params;
};

struct Response {
  Json id;
  std::variant<Json, ResponseError> outcome; // result or error
};

using Message = std::variant<Request, Notification, Response>;

// A body that is not a valid message. `id` is set when the body named one, so
// the error can be answered to that request.
struct DecodeError {
  ResponseError error;
  Json id;
};

std::variant<Message, DecodeError> decodeMessage(std::string_view body);

std::string encodeMessage(const Message& message);
std::string encodeResult(const Json& id, const Json& result);
// A response whose result is JSON text already written (a large document is not parsed
// into a tree only to be written out again).
std::string encodeResultText(const Json& id, std::string_view resultText);
std::string encodeError(const Json& id, const ResponseError& error);
std::string encodeNotification(const std::string& method, const Json& params);
std::string encodeRequest(const Json& id, const std::string& method, const Json& params);

} // namespace wavecast::protocol
