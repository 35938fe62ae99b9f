// `wavecast train` and `wavecast eval` run in the sibling executable
// wavecast-learn (they need LibTorch, which the CLI and daemon do not load).
// wavecast-learn parses their options with command_line.h like every other
// command (cli_train.cpp, cli_eval.cpp); this gives them
// the installation's data paths as defaults so they work from any directory.
#include "cli/commands.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace wavecast::cli {
namespace {

namespace fs = std::filesystem;

bool given(const std::vector<std::string>& words, const std::string& flag) {
  return std::any_of(words.begin(), words.end(), [&](const std::string& word) {
    return word == flag || word.rfind(flag + "=", 0) == 0;
  });
}

void addDefault(std::vector<std::string>& words, const std::string& flag, const fs::path& value,
                bool onlyIfExists) {
  std::error_code ec;
  if (!given(words, flag) && (!onlyIfExists || fs::exists(value, ec))) {
    words.push_back(flag);
    words.push_back(value.lexically_normal().string());
  }
}

// NeuSight's data sits beside the source tree in ../shared (docs/accuracy.md).
fs::path neusightData(const InstallLayout& layout) {
  return fs::path(layout.dataDir) / "../../shared/data/neusight";
}

// Replaces this process with wavecast-learn; returns only when that fails.
int runLearn(const InstallLayout& layout, const std::string& command,
             const std::vector<std::string>& words) {
  const std::string& learn = layout.learnPath;
  std::error_code ec;
  if (!fs::exists(learn, ec)) {
    // The Debian packages ship it apart (wavecast-learn), for its LibTorch's 1.2 GB.
    const std::string missing = layout.installed
                                    ? "is not installed: sudo apt install wavecast-learn"
                                    : "is missing: " + layout.repairAdvice();
    throw CommandError("'wavecast " + command + "' needs the helper " + learn + ", which " +
                       missing);
  }
  std::vector<std::string> all{learn, command};
  all.insert(all.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (auto& word : all)
    argv.push_back(word.data());
  argv.push_back(nullptr);
  execv(learn.c_str(), argv.data());
  throw CommandError("cannot run " + learn + " (" + std::strerror(errno) + "); " +
                     layout.repairAdvice());
}

} // namespace

Command trainCommand() {
  Command command;
  command.spec = {"train",
                  "[--data DIR] [--out DIR] [options]",
                  "Fit the learned per-op models on NeuSight's GPU measurements (see --help).",
                  {},
                  0,
                  0};
  command.runWords = [](std::vector<std::string> words, const InstallLayout& layout) {
    addDefault(words, "--data", neusightData(layout), true);
    addDefault(words, "--out", fs::path(layout.dataDir) / "weights", false);
    addDefault(words, "--gpus", layout.gpuDatabasePath(), false);
    return runLearn(layout, "train", words);
  };
  return command;
}

Command evalCommand() {
  Command command;
  command.spec = {"eval",
                  "LABEL_DIR [--gpu NAME...] [--json] [--markdown FILE]",
                  "Measure prediction accuracy on real GPU measurements (see --help).",
                  {},
                  0,
                  0};
  command.runWords = [](std::vector<std::string> words, const InstallLayout& layout) {
    addDefault(words, "--data", neusightData(layout), true);
    addDefault(words, "--weights", fs::path(layout.dataDir) / "weights", false);
    addDefault(words, "--gpus", layout.gpuDatabasePath(), false);
    addDefault(words, "--gemm-model", layout.tensorCoreGemmPath(), true);
    return runLearn(layout, "eval", words);
  };
  return command;
}

} // namespace wavecast::cli
