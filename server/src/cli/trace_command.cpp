#include "cli/commands.h"
#include "cli/shared.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

namespace wavecast::cli {
namespace {

int runTrace(const CommandLine& args, const InstallLayout& layout) {
  const Trace trace =
      obtainTrace(layout, args.positional().front(), args.positiveInt("batch-size"), args);
  const std::string text = traceToJson(trace).dump(args.has("compact") ? -1 : 1);
  if (const auto out = args.value("out")) {
    std::ofstream file(*out);
    if (!file)
      throw CommandError("cannot write '" + *out + "'");
    file << text << "\n";
    std::cerr << "wavecast: wrote " << trace.ops.size() << " ops to " << *out << "\n";
  } else {
    std::cout << text << "\n";
  }
  return 0;
}

} // namespace

Command traceCommand() {
  return {{"trace",
           "FILE.py [--batch-size N] [--out FILE.json] [-- ARGS]",
           "Trace one training iteration of FILE.py and print the trace (docs/trace-format.md); "
           "'wavecast predict FILE.json' predicts from a saved trace. The words after '--' are "
           "the arguments of a script run as written.",
           {{"batch-size", "N", "batch size passed to wavecast_input"},
            {"out", "FILE", "write the trace to FILE instead of standard output"},
            {"compact", "", "no indentation"},
            {"mode", "MODE", "shape (default), cpu or cuda"},
            pythonEnvOption(),
            worldSizeOption(),
            compileOption(),
            verboseOption(),
            {"timeout", "SECONDS", "give up tracing after this long (default 120)"}},
           1,
           1,
           true},
          runTrace,
          {}};
}

} // namespace wavecast::cli
