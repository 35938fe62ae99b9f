// Turns the end of a crashed worker into a ProfileError the user can act on.
#pragma once

#include "wavecast/profiler/trace_job.h"

#include <string>
#include <vector>

namespace wavecast {

struct CrashFrame {
  std::string file;
  int line = 0;
  std::string function;
};

// Frames of a Python faulthandler dump, most recent call first.
std::vector<CrashFrame> parseFaultHandlerFrames(const std::string& report);

// `waitStatus` is from waitpid; `crashReport` the faulthandler output (may be
// empty); `entryFile` the traced script, whose directory is the project.
ProfileError crashError(int waitStatus, const std::string& crashReport,
                        const std::string& entryFile);

} // namespace wavecast
