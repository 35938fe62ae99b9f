#include "lsp/token.h"

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace wavecast::lsp {

namespace fs = std::filesystem;

std::string generateToken() {
  std::random_device device; // /dev/urandom on Linux
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 32; ++i) {
    unsigned byte = device() & 0xFF;
    token += hex[byte >> 4];
    token += hex[byte & 0xF];
  }
  return token;
}

void writeTokenFile(const std::string& path, const std::string& token) {
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::exists(parent)) {
    fs::create_directories(parent);
    fs::permissions(parent, fs::perms::owner_all);
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::runtime_error("cannot write the token file " + path +
                             ": choose another path "
                             "with --token-file");
  ::fchmod(fd, 0600); // an existing file keeps its mode through O_CREAT
  std::string line = token + "\n";
  bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written)
    throw std::runtime_error("cannot write the token file " + path);
}

void checkTokenStrength(const std::string& token, const std::string& source) {
  if (token.size() >= kMinTokenLength)
    return;
  throw std::runtime_error(
      source +
      (token.empty() ? " is empty" : " has only " + std::to_string(token.size()) + " characters") +
      "; a token needs at least " + std::to_string(kMinTokenLength) +
      " characters: make one with 'openssl rand -hex 16'");
}

TokenFile readTokenFile(const std::string& path) {
  std::ifstream in(path);
  TokenFile file;
  if (!in || !std::getline(in, file.token) || file.token.empty())
    throw std::runtime_error("cannot read a token from " + path +
                             ": it must hold the token on its first line");
  checkTokenStrength(file.token, "the token in " + path);
  struct stat status {};
  if (::stat(path.c_str(), &status) == 0 && (status.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(status.st_mode & 07777));
    file.tooOpenWarning = "permissions " + std::string(mode) + " for the token file " + path +
                          " are too open: other users can read or change the token; chmod 600 " +
                          path;
  }
  return file;
}

std::string defaultTokenPath(int port) {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const char* home = std::getenv("HOME");
  fs::path dir = runtime && *runtime ? fs::path(runtime) / "wavecast"
                 : home && *home
                     ? fs::path(home) / ".cache/wavecast"
                     : fs::temp_directory_path() / ("wavecast-" + std::to_string(::getuid()));
  return (dir / ("serve-" + std::to_string(port) + ".token")).string();
}

} // namespace wavecast::lsp
