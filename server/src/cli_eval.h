// `wavecast eval`: the accuracy harness (labels, single kernels, leave-one-GPU-out).
#pragma once

#include <string>
#include <vector>

namespace wavecast::cli {

// `args` are the words after `eval`. Returns the process exit code.
int runEval(const std::vector<std::string>& args);

} // namespace wavecast::cli
