// Terminal helpers: progress on stderr only when it is a terminal, and number formatting.
#pragma once

#include <string>

namespace wavecast::cli {

class ProgressLine {
public:
  ProgressLine(); // enabled when stderr is a terminal
  void update(const std::string& status);
  void clear();
  ~ProgressLine() { clear(); }

private:
  bool enabled_;
  bool shown_ = false;
};

// 0.0123 -> "12.3 µs", 4.5 -> "4.50 ms", 1234 -> "1.23 s".
std::string formatDuration(double ms);
// 1536 MiB in bytes -> "1.50 GiB".
std::string formatBytes(double bytes);
std::string formatFixed(double value, int decimals);
// Pads or truncates to `width` display columns (UTF-8 aware).
std::string padRight(const std::string& text, size_t width);
std::string padLeft(const std::string& text, size_t width);

} // namespace wavecast::cli
