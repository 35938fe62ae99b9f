// The TCP token: its strength and the file it is kept in.
#include "lsp/token.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace wavecast::lsp {
namespace {

namespace fs = std::filesystem;

class TokenFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/wavecast-token-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string write(const std::string& text, mode_t mode) {
    const std::string path = (dir / "serve.token").string();
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }

  fs::path dir;
};

std::string errorOf(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "";
}

TEST(TokenStrength, ShortAndEmptyTokensAreRefusedSayingHowToMakeOne) {
  EXPECT_EQ(errorOf([] { checkTokenStrength("", "--token"); }),
            "--token is empty; a token needs at least 16 characters: make one with "
            "'openssl rand -hex 16'");
  EXPECT_EQ(errorOf([] { checkTokenStrength("hunter2", "--token"); }),
            "--token has only 7 characters; a token needs at least 16 characters: make one "
            "with 'openssl rand -hex 16'");
  EXPECT_EQ(errorOf([] { checkTokenStrength(std::string(16, 'x'), "--token"); }), "");
  EXPECT_EQ(errorOf([] { checkTokenStrength(generateToken(), "--token"); }), "");
  EXPECT_EQ(generateToken().size(), 64u);
}

TEST_F(TokenFileTest, APrivateFileIsReadWithoutWarning) {
  const std::string token(32, 'a');
  const TokenFile file = readTokenFile(write(token + "\n", 0600));
  EXPECT_EQ(file.token, token);
  EXPECT_FALSE(file.tooOpenWarning.has_value()) << *file.tooOpenWarning;
}

TEST_F(TokenFileTest, AFileOthersCanReadIsWarnedAbout) {
  const std::string path = write(std::string(32, 'a') + "\n", 0644);
  const TokenFile file = readTokenFile(path);
  EXPECT_EQ(file.token, std::string(32, 'a'));
  ASSERT_TRUE(file.tooOpenWarning.has_value());
  EXPECT_EQ(*file.tooOpenWarning, "permissions 0644 for the token file " + path +
                                      " are too open: other users can read or change the "
                                      "token; chmod 600 " +
                                      path);
  EXPECT_TRUE(readTokenFile(write(std::string(32, 'a'), 0640)).tooOpenWarning.has_value());
}

TEST_F(TokenFileTest, AnEmptyOrShortTokenFileIsRefused) {
  const std::string empty = write("", 0600);
  EXPECT_EQ(errorOf([&] { readTokenFile(empty); }),
            "cannot read a token from " + empty + ": it must hold the token on its first line");
  const std::string shortToken = write("abc\n", 0600);
  EXPECT_EQ(errorOf([&] { readTokenFile(shortToken); }),
            "the token in " + shortToken +
                " has only 3 characters; a token needs at least 16 characters: make one with "
                "'openssl rand -hex 16'");
}

TEST_F(TokenFileTest, AWrittenTokenFileIsPrivate) {
  const std::string path = (dir / "sub" / "serve.token").string();
  writeTokenFile(path, generateToken());
  struct stat status {};
  ASSERT_EQ(::stat(path.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
  EXPECT_FALSE(readTokenFile(path).tooOpenWarning.has_value());
}

} // namespace
} // namespace wavecast::lsp
