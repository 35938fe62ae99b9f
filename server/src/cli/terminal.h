// Terminal helpers: progress on stderr only when it is a terminal, and table columns.
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

// Pads or truncates to `width` display columns (UTF-8 aware).
std::string padRight(const std::string& text, size_t width);
std::string padLeft(const std::string& text, size_t width);

} // namespace wavecast::cli
