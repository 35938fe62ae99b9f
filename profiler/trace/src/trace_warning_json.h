// A trace warning's JSON (docs/trace-format.md "warnings"), for trace.cpp.
#pragma once

#include "wavecast/trace.h"

#include <nlohmann/json.hpp>

namespace wavecast {

// `version` 1 wrote sentences; they come back as Sentence warnings.
TraceWarning traceWarningFromJson(const nlohmann::json& value, int version);
nlohmann::json traceWarningToJson(const TraceWarning& warning);

} // namespace wavecast
