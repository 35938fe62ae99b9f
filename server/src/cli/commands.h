// The CLI subcommands of `wavecast`.
#pragma once

#include "cli/command_line.h"
#include "install_layout.h"

#include <functional>
#include <string>
#include <vector>

namespace wavecast::cli {

struct Command {
  CommandSpec spec;
  std::function<int(const CommandLine&, const InstallLayout&)> run;
  // For commands that parse their own words (train, eval): set instead of `run`.
  std::function<int(const std::vector<std::string>&, const InstallLayout&)> runWords;
};

Command predictCommand();
Command traceCommand();
Command gpusCommand();
Command trainCommand();
Command evalCommand();
Command calibrateCommand();

// A failure the user can fix; main() prints "wavecast: error: <message>" and exits 1.
class CommandError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace wavecast::cli
