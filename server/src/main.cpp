// wavecast: predicts per-line GPU time of PyTorch training scripts.
#include "cli/commands.h"
#include "install_layout.h"
#include "serve.h"

#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

using wavecast::cli::Command;

std::vector<Command> allCommands() {
  return {wavecast::cli::predictCommand(), wavecast::cli::gpusCommand(),
          wavecast::cli::traceCommand(),   wavecast::cli::serveCommand(),
          wavecast::cli::trainCommand(),   wavecast::cli::evalCommand(),
          wavecast::cli::calibrateCommand()};
}

void printUsage(const std::vector<Command>& commands, std::ostream& out) {
  out << "usage: wavecast <command> [options]\n\n"
         "wavecast "
      << WAVECAST_VERSION
      << " predicts how long each line of a PyTorch training script takes on\n"
         "the GPUs you are choosing between, without needing a GPU.\n\ncommands:\n";
  constexpr size_t kSummaryColumn = 12;
  for (const auto& command : commands) {
    out << "  " << command.spec.name
        << std::string(kSummaryColumn - 2 - command.spec.name.size(), ' ')
        << wavecast::cli::wrapText(wavecast::cli::firstSentence(command.spec.summary),
                                   wavecast::cli::kHelpWidth, kSummaryColumn)
        << "\n";
  }
  out << "\nRun 'wavecast <command> --help' for a command's options, 'wavecast --version'\n"
         "for the version alone.\n";
}

} // namespace

int main(int argc, char** argv) {
  const auto commands = allCommands();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    printUsage(commands, args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::cout << "wavecast " << WAVECAST_VERSION << "\n";
    return 0;
  }
  const std::string name = args[0];
  args.erase(args.begin());
  for (const auto& command : commands) {
    if (command.spec.name != name)
      continue;
    try {
      if (command.runWords)
        return command.runWords(args, wavecast::InstallLayout::discover(argv[0]));
      const auto parsed = wavecast::cli::CommandLine::parse(command.spec, args);
      if (parsed.helpRequested()) {
        std::cout << wavecast::cli::formatHelp(command.spec);
        return 0;
      }
      return command.run(parsed, wavecast::InstallLayout::discover(argv[0]));
    } catch (const wavecast::cli::UsageError& e) {
      std::cerr << "wavecast: " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      std::cerr << "wavecast: error: " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "wavecast: unknown command '" << name << "'; run 'wavecast --help' for the list\n";
  return 2;
}
