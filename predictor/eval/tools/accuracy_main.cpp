// wavecast-accuracy: the `train` and `eval` subcommands on their own, for
// scripts/accuracy.sh in trees whose `wavecast` binary does not link them.
#include "cli_eval.h"
#include "cli_train.h"

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || (args[0] != "train" && args[0] != "eval")) {
    std::cerr << "usage: wavecast-accuracy train|eval [options]  (see --help of each)\n";
    return 2;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  return command == "train" ? wavecast::cli::runTrain(args) : wavecast::cli::runEval(args);
}
