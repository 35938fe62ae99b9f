#include "wavecast/compile_mode.h"

#include <iterator>

namespace wavecast {

const char* toString(CompileMode mode) {
  switch (mode) {
  case CompileMode::Default:
    return "default";
  case CompileMode::ReduceOverhead:
    return "reduce-overhead";
  case CompileMode::MaxAutotune:
    return "max-autotune";
  case CompileMode::MaxAutotuneNoCudagraphs:
    return "max-autotune-no-cudagraphs";
  }
  return "default";
}

std::optional<CompileMode> compileModeFromString(std::string_view text) {
  for (const CompileMode mode : kCompileModes)
    if (text == toString(mode))
      return mode;
  return std::nullopt;
}

std::string compileModeChoices() {
  std::string out;
  const size_t count = std::size(kCompileModes);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0)
      out += i + 1 == count ? " or " : ", ";
    out += toString(kCompileModes[i]);
  }
  return out;
}

bool usesCudaGraphs(CompileMode mode) {
  return mode == CompileMode::ReduceOverhead || mode == CompileMode::MaxAutotune;
}

} // namespace wavecast
