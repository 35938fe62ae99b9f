#include "wavecast/protocol/framing.h"

#include <gtest/gtest.h>

namespace wavecast::protocol {
namespace {

std::vector<FrameOrError> drain(FrameDecoder& decoder) {
  std::vector<FrameOrError> out;
  while (auto frame = decoder.next())
    out.push_back(*frame);
  return out;
}

std::string body(const FrameOrError& frame) {
  EXPECT_TRUE(std::holds_alternative<std::string>(frame));
  return std::holds_alternative<std::string>(frame) ? std::get<std::string>(frame) : "";
}

std::string errorOf(const FrameOrError& frame) {
  EXPECT_TRUE(std::holds_alternative<FramingError>(frame));
  return std::holds_alternative<FramingError>(frame) ? std::get<FramingError>(frame).message : "";
}

TEST(Framing, EncodesContentLengthInBytes) {
  EXPECT_EQ(encodeFrame("{\"a\":\"\xc3\xa9\"}"), "Content-Length: 10\r\n\r\n{\"a\":\"\xc3\xa9\"}");
}

TEST(Framing, DecodesTwoMessagesFedTogether) {
  FrameDecoder decoder;
  decoder.feed(encodeFrame("{\"id\":1}") + encodeFrame("[]"));
  auto frames = drain(decoder);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(body(frames[0]), "{\"id\":1}");
  EXPECT_EQ(body(frames[1]), "[]");
  EXPECT_FALSE(decoder.finish());
}

TEST(Framing, DecodesAMessageFedByteByByte) {
  FrameDecoder decoder;
  std::string frame = "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
                      "content-length:  7\r\n\r\n{\"x\":1}";
  std::vector<FrameOrError> frames;
  for (char c : frame) {
    decoder.feed(std::string_view(&c, 1));
    for (auto& decoded : drain(decoder))
      frames.push_back(decoded);
  }
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(body(frames[0]), "{\"x\":1}");
}

TEST(Framing, HeaderWithoutContentLengthIsDroppedAndDecodingContinues) {
  FrameDecoder decoder;
  decoder.feed("Content-Type: text/plain\r\n\r\n" + encodeFrame("{}"));
  auto frames = drain(decoder);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(errorOf(frames[0]), "message header has no Content-Length");
  EXPECT_EQ(body(frames[1]), "{}");
}

TEST(Framing, NonNumericContentLengthIsAnError) {
  FrameDecoder decoder;
  decoder.feed("Content-Length: -5\r\n\r\n");
  auto frames = drain(decoder);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(errorOf(frames[0]), "Content-Length is not a non-negative integer");
}

TEST(Framing, OversizedMessageIsSkippedWithoutBufferingIt) {
  FrameDecoder decoder(FramingLimits{64, 16});
  decoder.feed("Content-Length: 40\r\n\r\n0123456789");
  auto frames = drain(decoder);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(errorOf(frames[0]), "Content-Length 40 exceeds the limit of 16 bytes");
  decoder.feed(std::string(30, 'x')); // the rest of the refused body
  EXPECT_EQ(decoder.bufferedBytes(), 0u);
  decoder.feed(encodeFrame("{}"));
  frames = drain(decoder);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(body(frames[0]), "{}");
}

TEST(Framing, EndlessHeaderIsRefused) {
  FrameDecoder decoder(FramingLimits{32, 1024});
  decoder.feed(std::string(40, 'a'));
  auto frames = drain(decoder);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(errorOf(frames[0]).find("longer than 32 bytes"), std::string::npos);
  EXPECT_EQ(decoder.bufferedBytes(), 0u);
}

TEST(Framing, TruncatedBodyIsReportedAtEndOfInput) {
  FrameDecoder decoder;
  decoder.feed("Content-Length: 10\r\n\r\n{\"a\"");
  EXPECT_TRUE(drain(decoder).empty());
  auto error = decoder.finish();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message, "input ended inside a message body (4 of 10 bytes)");
}

} // namespace
} // namespace wavecast::protocol
