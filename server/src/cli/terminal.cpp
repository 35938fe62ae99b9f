#include "cli/terminal.h"

#include <iostream>
#include <unistd.h>

namespace wavecast::cli {
namespace {

size_t displayWidth(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text)
    if ((c & 0xC0) != 0x80)
      ++width;
  return width;
}

std::string truncateToWidth(const std::string& text, size_t width) {
  if (displayWidth(text) <= width)
    return text;
  std::string out;
  size_t used = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) {
      if (used + 1 == width)
        break;
      ++used;
    }
    out += text[i];
  }
  return out + "…";
}

} // namespace

ProgressLine::ProgressLine() : enabled_(isatty(STDERR_FILENO) == 1) {}

void ProgressLine::update(const std::string& status) {
  if (!enabled_)
    return;
  std::cerr << "\r\033[K"
            << "wavecast: " << status << std::flush;
  shown_ = true;
}

void ProgressLine::clear() {
  if (enabled_ && shown_)
    std::cerr << "\r\033[K" << std::flush;
  shown_ = false;
}

std::string padRight(const std::string& text, size_t width) {
  std::string out = truncateToWidth(text, width);
  return out + std::string(width - displayWidth(out), ' ');
}

std::string padLeft(const std::string& text, size_t width) {
  std::string out = truncateToWidth(text, width);
  return std::string(width - displayWidth(out), ' ') + out;
}

} // namespace wavecast::cli
