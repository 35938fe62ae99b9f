// torch.compile's modes, as one enum and one set of words: the trace format, the CLI and
// the daemon's settings all read and write them through here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace wavecast {

// How torch.compile compiles a region (its `mode`): Inductor's kernels either way;
// reduce-overhead also replays them as CUDA graphs, the max-autotune modes pick GEMMs and
// Triton configurations by benchmarking them (max-autotune with CUDA graphs too).
enum class CompileMode { Default, ReduceOverhead, MaxAutotune, MaxAutotuneNoCudagraphs };
inline constexpr CompileMode kCompileModes[] = {CompileMode::Default, CompileMode::ReduceOverhead,
                                                CompileMode::MaxAutotune,
                                                CompileMode::MaxAutotuneNoCudagraphs};
const char* toString(CompileMode mode);
std::optional<CompileMode> compileModeFromString(std::string_view text);
// "default, reduce-overhead, max-autotune or max-autotune-no-cudagraphs", for messages.
std::string compileModeChoices();
// Whether the mode replays the compiled kernels as CUDA graphs.
bool usesCudaGraphs(CompileMode mode);

} // namespace wavecast
