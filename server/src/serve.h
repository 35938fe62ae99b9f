// `wavecast serve`: the language server daemon editors talk to
// (docs/protocol.md). LSP over stdio by default, or TCP with --listen.
#pragma once

#include "cli/commands.h"

namespace wavecast::cli {

Command serveCommand();

} // namespace wavecast::cli
