// `wavecast train` and `wavecast eval` parse their own options (cli_train.cpp,
// cli_eval.cpp); this gives them the installation's data paths as defaults so
// they work from any directory.
#include "cli/commands.h"
#include "cli_eval.h"
#include "cli_train.h"

#include <algorithm>
#include <filesystem>

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
    return runTrain(words);
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
    return runEval(words);
  };
  return command;
}

} // namespace wavecast::cli
