#include "lsp/files.h"

#include "wavecast/profiler/content_hash.h"

#include <filesystem>

namespace wavecast::lsp {

namespace fs = std::filesystem;

std::string canonicalPath(const std::string& path) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? fs::path(path).lexically_normal().string() : canonical.string();
}

std::optional<std::string> readFile(const std::string& path) {
  return readFileBytes(path);
}

} // namespace wavecast::lsp
