// `wavecast train`: fits the learned per-op models on NeuSight's kernel data.
#pragma once

#include <string>
#include <vector>

namespace wavecast::cli {

// `args` are the words after `train`. Returns the process exit code.
int runTrain(const std::vector<std::string>& args);

} // namespace wavecast::cli
