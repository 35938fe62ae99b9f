#include "wavecast/protocol/jsonrpc.h"

namespace wavecast::protocol {

namespace {

bool validId(const Json& id) {
  return id.is_number_integer() || id.is_string();
}

DecodeError invalid(const std::string& message, Json id = nullptr) {
  return {{ErrorCode::InvalidRequest, message, nullptr}, std::move(id)};
}

Json errorToJson(const ResponseError& error) {
  Json out = {{"code", static_cast<int>(error.code)}, {"message", error.message}};
  if (!error.data.is_null())
    out["data"] = error.data;
  return out;
}

} // namespace

std::variant<Message, DecodeError> decodeMessage(std::string_view body) {
  Json doc = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    return DecodeError{{ErrorCode::ParseError, "message body is not valid JSON", nullptr}, nullptr};
  if (doc.is_array())
    return invalid("JSON-RPC batches are not supported by the Language Server Protocol");
  if (!doc.is_object())
    return invalid("a JSON-RPC message must be an object");

  Json id = nullptr;
  auto idIt = doc.find("id");
  if (idIt != doc.end() && validId(*idIt))
    id = *idIt;
  auto version = doc.find("jsonrpc");
  if (version == doc.end() || *version != "2.0")
    return invalid("\"jsonrpc\" must be \"2.0\"", id);

  auto methodIt = doc.find("method");
  auto paramsIt = doc.find("params");
  Json params = paramsIt == doc.end() ? Json() : *paramsIt;
  if (methodIt != doc.end()) {
    if (!methodIt->is_string())
      return invalid("\"method\" must be a string", id);
    if (!params.is_null() && !params.is_object() && !params.is_array())
      return invalid("\"params\" must be an object or an array", id);
    if (idIt == doc.end())
      return Message(Notification{methodIt->get<std::string>(), std::move(params)});
    if (!validId(*idIt))
      return invalid("\"id\" must be an integer or a string");
    return Message(Request{*idIt, methodIt->get<std::string>(), std::move(params)});
  }

  if (idIt == doc.end())
    return invalid("message has neither \"method\" nor \"id\"");
  auto result = doc.find("result");
  auto error = doc.find("error");
  if ((result == doc.end()) == (error == doc.end()))
    return invalid("a response must have exactly one of \"result\" and \"error\"", id);
  if (result != doc.end())
    return Message(Response{*idIt, *result});
  if (!error->is_object() || !error->contains("code") || !(*error)["code"].is_number_integer() ||
      !error->contains("message") || !(*error)["message"].is_string())
    return invalid("\"error\" must be an object with an integer code and a string message", id);
  ResponseError decoded{static_cast<ErrorCode>((*error)["code"].get<int>()),
                        (*error)["message"].get<std::string>(), error->value("data", Json())};
  return Message(Response{*idIt, std::move(decoded)});
}

std::string encodeResult(const Json& id, const Json& result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}.dump(
      -1, ' ', false, Json::error_handler_t::replace);
}

std::string encodeResultText(const Json& id, std::string_view resultText) {
  std::string out = R"({"id":)" + id.dump(-1, ' ', false, Json::error_handler_t::replace) +
                    R"(,"jsonrpc":"2.0","result":)";
  out.reserve(out.size() + resultText.size() + 1);
  out.append(resultText);
  out += '}';
  return out;
}

std::string encodeError(const Json& id, const ResponseError& error) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", errorToJson(error)}}.dump(
      -1, ' ', false, Json::error_handler_t::replace);
}

std::string encodeNotification(const std::string& method, const Json& params) {
  Json out = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null())
    out["params"] = params;
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string encodeRequest(const Json& id, const std::string& method, const Json& params) {
  Json out = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null())
    out["params"] = params;
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string encodeMessage(const Message& message) {
  if (auto* request = std::get_if<Request>(&message))
    return encodeRequest(request->id, request->method, request->params);
  if (auto* notification = std::get_if<Notification>(&message))
    return encodeNotification(notification->method, notification->params);
  const auto& response = std::get<Response>(message);
  if (auto* error = std::get_if<ResponseError>(&response.outcome))
    return encodeError(response.id, *error);
  return encodeResult(response.id, std::get<Json>(response.outcome));
}

} // namespace wavecast::protocol
