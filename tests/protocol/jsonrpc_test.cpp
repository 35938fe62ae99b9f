#include "wavecast/protocol/jsonrpc.h"

#include <gtest/gtest.h>

namespace wavecast::protocol {
namespace {

DecodeError decodeError(std::string_view body) {
  auto decoded = decodeMessage(body);
  EXPECT_TRUE(std::holds_alternative<DecodeError>(decoded)) << body;
  return std::holds_alternative<DecodeError>(decoded) ? std::get<DecodeError>(decoded)
                                                      : DecodeError{};
}

TEST(JsonRpc, DecodesARequest) {
  auto decoded = decodeMessage(
      R"({"jsonrpc":"2.0","id":"a1","method":"textDocument/hover","params":{"x":1}})");
  auto& request = std::get<Request>(std::get<Message>(decoded));
  EXPECT_EQ(request.id, "a1");
  EXPECT_EQ(request.method, "textDocument/hover");
  EXPECT_EQ(request.params["x"], 1);
}

TEST(JsonRpc, DecodesANotificationWithoutParams) {
  auto decoded = decodeMessage(R"({"jsonrpc":"2.0","method":"exit"})");
  auto& notification = std::get<Notification>(std::get<Message>(decoded));
  EXPECT_EQ(notification.method, "exit");
  EXPECT_TRUE(notification.params.is_null());
}

TEST(JsonRpc, DecodesResultAndErrorResponses) {
  auto ok = decodeMessage(R"({"jsonrpc":"2.0","id":3,"result":null})");
  auto& result = std::get<Response>(std::get<Message>(ok));
  EXPECT_EQ(result.id, 3);
  EXPECT_TRUE(std::get<Json>(result.outcome).is_null());

  auto failed =
      decodeMessage(R"({"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"nope"}})");
  auto& error = std::get<ResponseError>(std::get<Response>(std::get<Message>(failed)).outcome);
  EXPECT_EQ(error.code, ErrorCode::MethodNotFound);
  EXPECT_EQ(error.message, "nope");
}

TEST(JsonRpc, MalformedJsonIsAParseErrorWithNullId) {
  DecodeError error = decodeError(R"({"jsonrpc":"2.0","id":1,)");
  EXPECT_EQ(error.error.code, ErrorCode::ParseError);
  EXPECT_TRUE(error.id.is_null());
}

TEST(JsonRpc, WrongVersionIsAnInvalidRequestThatKeepsTheId) {
  DecodeError error = decodeError(R"({"jsonrpc":"1.0","id":7,"method":"initialize"})");
  EXPECT_EQ(error.error.code, ErrorCode::InvalidRequest);
  EXPECT_EQ(error.id, 7);
}

TEST(JsonRpc, RejectsBatchesScalarsAndBadFields) {
  EXPECT_EQ(decodeError("[]").error.code, ErrorCode::InvalidRequest);
  EXPECT_EQ(decodeError("42").error.code, ErrorCode::InvalidRequest);
  EXPECT_EQ(decodeError(R"({"jsonrpc":"2.0","id":1,"method":5})").error.code,
            ErrorCode::InvalidRequest);
  EXPECT_EQ(decodeError(R"({"jsonrpc":"2.0","id":1.5,"method":"x"})").error.code,
            ErrorCode::InvalidRequest);
  EXPECT_EQ(decodeError(R"({"jsonrpc":"2.0","id":1,"method":"x","params":3})").error.code,
            ErrorCode::InvalidRequest);
  EXPECT_EQ(decodeError(R"({"jsonrpc":"2.0","id":1,"result":1,"error":{}})").error.code,
            ErrorCode::InvalidRequest);
}

TEST(JsonRpc, EncodesMessages) {
  EXPECT_EQ(encodeResult(1, Json{{"a", 1}}), R"({"id":1,"jsonrpc":"2.0","result":{"a":1}})");
  EXPECT_EQ(encodeError(nullptr, {ErrorCode::ParseError, "bad", nullptr}),
            R"({"error":{"code":-32700,"message":"bad"},"id":null,"jsonrpc":"2.0"})");
  EXPECT_EQ(encodeNotification("exit", nullptr), R"({"jsonrpc":"2.0","method":"exit"})");
  EXPECT_EQ(encodeRequest("s1", "m", Json{{"k", true}}),
            R"({"id":"s1","jsonrpc":"2.0","method":"m","params":{"k":true}})");
}

TEST(JsonRpc, EncodingReplacesInvalidUtf8InsteadOfThrowing) {
  std::string encoded = encodeNotification("m", Json{{"text", std::string("a\xff")}});
  EXPECT_EQ(encoded,
            "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"text\":\"a\xef\xbf\xbd\"}}");
}

} // namespace
} // namespace wavecast::protocol
