// A file's bytes and a short fingerprint of them: what caches compare to tell whether a
// file changed since a result was made from it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace wavecast {

// Hex FNV-1a (64-bit) of `bytes`.
inline std::string contentHash(std::string_view bytes) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

// The bytes of the file at `path`; nullopt when it cannot be read.
inline std::optional<std::string> readFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

// contentHash of the file at `path`; nullopt when it cannot be read.
inline std::optional<std::string> fileContentHash(const std::string& path) {
  const auto bytes = readFileBytes(path);
  return bytes ? std::optional<std::string>(contentHash(*bytes)) : std::nullopt;
}

} // namespace wavecast
