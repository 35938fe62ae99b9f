// Paths and file reads as every part of the server does them: results, the
// cache and open documents are matched by canonical path.
#pragma once

#include <optional>
#include <string>

namespace wavecast::lsp {

// The canonical form of `path`; lexically normal when it cannot be resolved.
std::string canonicalPath(const std::string& path);
// The file's bytes; nullopt when it cannot be read.
std::optional<std::string> readFile(const std::string& path);

} // namespace wavecast::lsp
