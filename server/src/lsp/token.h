// The secret a TCP client must present; kept in a file only the user can read.
#pragma once

#include <string>

namespace wavecast::lsp {

// 32 random bytes as 64 hex characters.
std::string generateToken();
// Creates missing parent directories (mode 0700) and writes the token with mode 0600.
void writeTokenFile(const std::string& path, const std::string& token);
// The file's first line; throws std::runtime_error saying what is wrong with it.
std::string readTokenFile(const std::string& path);
// $XDG_RUNTIME_DIR/wavecast/serve-PORT.token, else ~/.cache/wavecast/serve-PORT.token.
std::string defaultTokenPath(int port);

} // namespace wavecast::lsp
