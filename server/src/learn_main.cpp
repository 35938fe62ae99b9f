// wavecast-learn: `wavecast train` and `wavecast eval`, run by `wavecast` as a
// separate executable so that only they load LibTorch.
#include "cli/command_line.h"
#include "cli_eval.h"
#include "cli_train.h"

#include <exception>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || (args[0] != "train" && args[0] != "eval")) {
    std::cerr << "usage: wavecast train|eval [options] (run through `wavecast`)\n";
    return 2;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    return command == "train" ? wavecast::cli::runTrain(args) : wavecast::cli::runEval(args);
  } catch (const wavecast::cli::UsageError& e) {
    std::cerr << "wavecast: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "wavecast: error: " << e.what() << "\n";
    return 1;
  }
}
