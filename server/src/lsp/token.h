// The secret a TCP client must present; kept in a file only the user can read.
#pragma once

#include <optional>
#include <string>

namespace wavecast::lsp {

// Shorter tokens are refused: guessable, and likely typed by hand.
inline constexpr size_t kMinTokenLength = 16;

// 32 random bytes as 64 hex characters.
std::string generateToken();
// Throws std::runtime_error naming `source` ("--token", "the first line of FILE") when
// `token` is empty or shorter than kMinTokenLength, saying how to make a good one.
void checkTokenStrength(const std::string& token, const std::string& source);
// Creates missing parent directories (mode 0700) and writes the token with mode 0600.
void writeTokenFile(const std::string& path, const std::string& token);

struct TokenFile {
  std::string token;
  // Set when the file's mode lets other users read or change it (as ssh warns of a key).
  std::optional<std::string> tooOpenWarning;
};
// The file's first line; throws std::runtime_error saying what is wrong with it.
TokenFile readTokenFile(const std::string& path);
// $XDG_RUNTIME_DIR/wavecast/serve-PORT.token, else ~/.cache/wavecast/serve-PORT.token.
std::string defaultTokenPath(int port);

} // namespace wavecast::lsp
