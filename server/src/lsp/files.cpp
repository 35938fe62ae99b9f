#include "lsp/files.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace wavecast::lsp {

namespace fs = std::filesystem;

std::string canonicalPath(const std::string& path) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? fs::path(path).lexically_normal().string() : canonical.string();
}

std::optional<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

} // namespace wavecast::lsp
