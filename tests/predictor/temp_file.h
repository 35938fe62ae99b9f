// A temporary file holding some text, removed when the test ends; named after the test.
#pragma once

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <string>

namespace wavecast {

class TempFile {
public:
  // `prefix` keeps the files of different suites apart: "wavecast_gpus_".
  TempFile(const std::string& prefix, const std::string& text) {
    path_ = testing::TempDir() + prefix +
            testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

} // namespace wavecast
