#include "wavecast/protocol/framing.h"

#include <algorithm>
#include <cctype>

namespace wavecast::protocol {

namespace {

constexpr std::string_view kHeaderEnd = "\r\n\r\n";

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  return text;
}

// The Content-Length value of a header block, or an error message.
std::variant<size_t, std::string> contentLength(std::string_view header) {
  std::optional<size_t> length;
  while (!header.empty()) {
    size_t eol = header.find("\r\n");
    std::string_view line = header.substr(0, eol);
    header = eol == std::string_view::npos ? std::string_view() : header.substr(eol + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      return "header line without ':' (expected 'Content-Length: N')";
    if (lowercase(trim(line.substr(0, colon))) != "content-length")
      continue; // Content-Type and unknown headers are allowed and ignored
    std::string_view value = trim(line.substr(colon + 1));
    if (value.empty() || value.size() > 19 ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return "Content-Length is not a non-negative integer";
    length = std::stoull(std::string(value));
  }
  if (!length)
    return "message header has no Content-Length";
  return *length;
}

} // namespace

void FrameDecoder::feed(std::string_view bytes) {
  if (bytesToSkip_ > 0) {
    size_t skipped = std::min(bytesToSkip_, bytes.size());
    bytesToSkip_ -= skipped;
    bytes.remove_prefix(skipped);
  }
  buffer_.append(bytes);
}

std::optional<FrameOrError> FrameDecoder::parseHeader() {
  size_t end = buffer_.find(kHeaderEnd);
  if (end == std::string::npos) {
    if (buffer_.size() > limits_.maxHeaderBytes) {
      buffer_.clear();
      return FrameOrError(FramingError{"message header longer than " +
                                       std::to_string(limits_.maxHeaderBytes) +
                                       " bytes without a blank line; input dropped"});
    }
    return std::nullopt;
  }
  std::string header = buffer_.substr(0, end);
  buffer_.erase(0, end + kHeaderEnd.size());
  auto length = contentLength(header);
  if (auto* message = std::get_if<std::string>(&length))
    return FrameOrError(FramingError{*message});
  size_t size = std::get<size_t>(length);
  if (size > limits_.maxContentLength) {
    size_t skipped = std::min(size, buffer_.size());
    buffer_.erase(0, skipped);
    bytesToSkip_ = size - skipped;
    return FrameOrError(FramingError{"Content-Length " + std::to_string(size) +
                                     " exceeds the limit of " +
                                     std::to_string(limits_.maxContentLength) + " bytes"});
  }
  bodyLength_ = size;
  return std::nullopt;
}

std::optional<FrameOrError> FrameDecoder::next() {
  if (bytesToSkip_ > 0)
    return std::nullopt;
  if (!bodyLength_) {
    if (auto error = parseHeader())
      return error;
    if (!bodyLength_)
      return std::nullopt;
  }
  if (buffer_.size() < *bodyLength_)
    return std::nullopt;
  std::string body = buffer_.substr(0, *bodyLength_);
  buffer_.erase(0, *bodyLength_);
  bodyLength_.reset();
  return FrameOrError(std::move(body));
}

std::optional<FramingError> FrameDecoder::finish() const {
  if (bodyLength_)
    return FramingError{"input ended inside a message body (" + std::to_string(buffer_.size()) +
                        " of " + std::to_string(*bodyLength_) + " bytes)"};
  if (bytesToSkip_ > 0 || !trim(buffer_).empty())
    return FramingError{"input ended inside a message"};
  return std::nullopt;
}

std::string encodeFrame(std::string_view body) {
  std::string frame = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  frame.append(body);
  return frame;
}

} // namespace wavecast::protocol
