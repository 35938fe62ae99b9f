// What the CLI tests share beside running the binary (cli_run.h): where the samples and
// fixtures are, and what an error must look like.
#pragma once

#include "cli_run.h"

#include <gtest/gtest.h>
#include <string>

inline std::string sample(const std::string& name) {
  return std::string(WAVECAST_SOURCE_ROOT) + "/samples/" + name;
}
inline std::string fixture(const std::string& name) {
  return std::string(CLI_FIXTURES) + "/" + name;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Errors are one line on stderr, with nothing that looks like a stack dump.
inline void expectOneLineError(const CliRun& run, const std::string& part) {
  EXPECT_NE(run.status, 0);
  EXPECT_TRUE(run.out.empty()) << run.out;
  ASSERT_FALSE(run.err.empty());
  EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << "not one line:\n" << run.err;
  EXPECT_TRUE(contains(run.err, part)) << run.err;
  EXPECT_FALSE(contains(run.err, "Traceback")) << run.err;
  EXPECT_FALSE(contains(run.err, "terminate called")) << run.err;
}
