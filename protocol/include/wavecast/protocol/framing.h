// LSP base protocol framing: "Content-Length: N\r\n\r\n" followed by N bytes of
// JSON. Pure byte handling, no I/O: the transport feeds what it read and sends
// what encodeFrame returns.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace wavecast::protocol {

struct FramingLimits {
  size_t maxHeaderBytes = 8 * 1024;
  size_t maxContentLength = 64 * 1024 * 1024;
};

// A frame the decoder had to drop; the decoder stays usable afterwards.
struct FramingError {
  std::string message;
};

using FrameOrError = std::variant<std::string, FramingError>;

class FrameDecoder {
public:
  explicit FrameDecoder(FramingLimits limits = {}) : limits_(limits) {}
  // Takes effect from the next message header on.
  void setLimits(FramingLimits limits) { limits_ = limits; }

  void feed(std::string_view bytes);
  // The next complete message body or framing error; nullopt until more bytes arrive.
  std::optional<FrameOrError> next();
  // Called at end of input: an error when a message was cut short.
  std::optional<FramingError> finish() const;
  size_t bufferedBytes() const { return buffer_.size(); }

private:
  std::optional<FrameOrError> parseHeader();

  FramingLimits limits_;
  std::string buffer_;
  std::optional<size_t> bodyLength_; // set while waiting for a body
  size_t bytesToSkip_ = 0;           // body of a refused oversized message
};

std::string encodeFrame(std::string_view body);

} // namespace wavecast::protocol
