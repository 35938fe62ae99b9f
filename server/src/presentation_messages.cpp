// The sentences of advisories, trace warnings and errors (docs/presentation.md): what the
// CLI prints as notes and the daemon sends as diagnostics.
#include "presentation.h"

#include <algorithm>
#include <string>
#include <variant>

namespace wavecast {

namespace {

std::string location(const SourceLocation& loc) {
  return loc.file + ":" + std::to_string(loc.line);
}

std::string times(int count) {
  return count > 1 ? " (" + std::to_string(count) + " times)" : "";
}

std::string launchProblemText(const LaunchProblem& problem) {
  const std::string requested = std::to_string(problem.requested);
  const std::string allowed = std::to_string(problem.allowed);
  switch (problem.limit) {
  case LaunchLimit::NoThreads:
    return "a block needs at least one thread";
  case LaunchLimit::ThreadsPerBlock:
    return "block of " + requested + " threads exceeds the limit of " + allowed;
  case LaunchLimit::RegistersPerThread:
    return requested + " registers per thread exceed the limit of " + allowed;
  case LaunchLimit::SharedMemoryPerBlock:
    return requested + " bytes of shared memory per block exceed the limit of " + allowed;
  case LaunchLimit::RegistersPerSm:
    return "one block needs " + requested + " registers, more than the " + allowed + " an SM has";
  }
  return "it exceeds a limit of the SM";
}

struct AdvisorySentence {
  std::string operator()(const advisory::MeasuredWithoutKernels&) const {
    return "the trace was measured on a GPU but carries no kernels (an older wavecast recorded "
           "none); re-record it with `wavecast trace FILE.py --mode cuda` to use the "
           "measurements (analytic model used instead)";
  }
  std::string operator()(const advisory::UnknownMeasuredGpu& facts) const {
    return "the trace was measured on '" +
           (facts.device.empty() ? std::string("an unnamed GPU") : facts.device) +
           "', which the GPU database does not know; add it to your GPU file (docs/gpus.md) to "
           "use its measurements (analytic model used instead)";
  }
  std::string operator()(const advisory::UntrainedGpus& facts) const {
    return joinedWith(facts.gpus, ", ") +
           ": not among the GPUs whose measurements trained the learned models; the ops they "
           "price there (those no calibration of the GPU measured) are predicted from its spec "
           "sheet (docs/accuracy.md gives the error on a GPU left out of training)";
  }
  std::string operator()(const advisory::WaveScalingAssumption& facts) const {
    return "kernel " + facts.kernel + " cannot launch on " + facts.gpu + " as recorded (" +
           launchProblemText(facts.problem) + "); assumed one block per SM" + times(facts.count);
  }
  std::string operator()(const advisory::AttentionSubstituted& facts) const {
    return facts.gpu + " (compute capability " + facts.computeCapability + ") has no " +
           attentionBackendName(facts.traced) + ": " + std::to_string(facts.count) +
           " attention ops predicted as " + attentionBackendName(facts.runs) +
           ", which torch runs there instead";
  }
  std::string operator()(const advisory::ApproximateOp& facts) const {
    if (facts.note != CostNote::NoFormula && facts.note != CostNote::None)
      return facts.op + " x" + std::to_string(facts.count) + ": " +
             costNoteText(facts.note, facts.op, facts.family);
    return facts.op + " x" + std::to_string(facts.count) +
           " has no formula of its own and was predicted approximately, as its closest family (" +
           toString(facts.family) + ")";
  }
  std::string operator()(const advisory::HostBound& facts) const {
    return facts.gpu + ": host-bound: the GPU waits for the CPU to issue work for " +
           formatMs(facts.gpuIdleMs) + " of the " + formatMs(facts.iterationMs) +
           " of an iteration (its kernels take " + formatMs(facts.gpuMs) + "); " +
           hostBoundAdvice(facts.compiled);
  }
  std::string operator()(const advisory::InputBound& facts) const {
    if (facts.workers == 0)
      return facts.gpu + ": input-bound: the loop makes its batches itself, " +
             formatMs(facts.waitMs) + " of the " + formatMs(facts.iterationMs) +
             " of an iteration (as fast as this CPU made them), while the GPU waits; DataLoader "
             "workers (num_workers) would make them beside the loop";
    return facts.gpu + ": input-bound: the loop waits " + formatMs(facts.waitMs) + " of the " +
           formatMs(facts.iterationMs) + " of an iteration for its " +
           std::to_string(facts.workers) + " DataLoader worker" +
           (facts.workers == 1 ? ", which takes " : "s, which take ") + formatMs(facts.loaderMs) +
           " to make its batches (as fast as this CPU made them); more workers, lighter "
           "transforms or preprocessed data would feed the GPU faster";
  }
  std::string operator()(const advisory::HeldByCopies& facts) const {
    return facts.gpu + ": " + std::to_string(facts.count) + " cop" +
           (facts.count == 1 ? "y" : "ies") + " of host tensors to the GPU (" +
           formatBytes(static_cast<double>(facts.bytes)) + ") hold the CPU for " +
           formatMs(facts.copyMs) + " of the " + formatMs(facts.iterationMs) +
           " of an iteration (" +
           (facts.pageable ? "pageable memory is staged on the CPU first"
                           : "non_blocking=False waits for the GPU") +
           "); DataLoader(pin_memory=True) and .to(device, non_blocking=True) would let the CPU "
           "issue the next work while they run";
  }
  std::string operator()(const advisory::OutOfMemory& facts) const {
    return "out of memory on " + facts.gpu + ": the iteration needs about " +
           formatBytes(static_cast<double>(facts.peakBytes)) + ", the GPU has " +
           formatBytes(static_cast<double>(facts.capacityBytes)) +
           "; lower the batch size or choose a larger GPU" +
           (facts.activationsUpperBound ? " (activations are an upper bound for this older "
                                          "trace; trace it again for the measured figure)"
                                        : "");
  }
  std::string operator()(const advisory::ReplicatedExperts& facts) const {
    return "tp " + std::to_string(facts.tensorParallel) + " splits the Linear layers, not the " +
           std::to_string(facts.count) +
           " grouped GEMMs of the mixture of experts: the ranks of a tp group hold the same "
           "experts and run all of their tokens through them, as a tensor-parallel plan that "
           "leaves the experts out does (--ep N spreads the experts over N data-parallel "
           "ranks)";
  }
  std::string operator()(const advisory::CompiledAgainstEager& facts) const {
    const bool faster = facts.eagerMs >= facts.compiledMs;
    const double ratio = faster ? facts.eagerMs / std::max(facts.compiledMs, 1e-9)
                                : facts.compiledMs / std::max(facts.eagerMs, 1e-9);
    return facts.gpu + ": with torch.compile, " + formatMs(facts.compiledMs) +
           " an iteration and " + formatBytes(static_cast<double>(facts.compiledPeakBytes)) +
           " allocated at the peak; the same ops eagerly, " + formatMs(facts.eagerMs) + " and " +
           formatBytes(static_cast<double>(facts.eagerPeakBytes)) +
           " (compiled: " + formatFixed(ratio, 2) + (faster ? "x as fast)" : "x as slow)");
  }
};

} // namespace

std::string advisoryMessage(const Advisory& advisory) {
  return std::visit(AdvisorySentence{}, advisory.facts);
}

std::string traceWarningMessage(const TraceWarning& warning) {
  switch (warning.kind) {
  case TraceWarningKind::OldTorch:
    return "traced with torch " + warning.version +
           ", older than the torch 2.x wavecast's figures are checked against "
           "(docs/accuracy.md); it runs other ops and kernels, so the prediction can be "
           "far off: trace with a torch 2.x environment (--python-env VENV, or the "
           "editor's Python interpreter)";
  case TraceWarningKind::CudaTracedOnCpu:
    return "the script's CUDA tensors were traced on the CPU (no GPU is used in shape or cpu "
           "mode; shapes are the same)";
  case TraceWarningKind::TorchCompile:
    return "torch.compile: the eager ops were traced (TorchDynamo and Inductor do not run in "
           "the tracer) and are priced as Inductor fuses them: generated kernels by their "
           "fused memory traffic, unaligned GEMMs padded, convolutions in channels_last, "
           "and what backward keeps as AOTAutograd's partitioner picks it; less certain "
           "than eager figures (docs/accuracy.md)";
  case TraceWarningKind::AutocastCpuOnly:
    return "autocast(\"cpu\") casts only CPU tensors; on the GPU its ops keep their dtypes, "
           "which is what is predicted";
  case TraceWarningKind::AutocastUnsupportedDtype:
    return "CUDA autocast does not support " + warning.dtype +
           " (only float16, bfloat16 and float32) and torch disables the region: its ops are "
           "predicted in their own dtypes";
  case TraceWarningKind::AutocastOtherDevice:
    return "autocast(\"" + warning.device +
           "\") casts no CUDA tensor: its ops are predicted in their own dtypes (float32 unless "
           "the script casts)";
  case TraceWarningKind::HostTensorWithGpu:
    return "a tensor created on the CPU inside the iteration" +
           (warning.origin ? " (created at " + location(*warning.origin) + ")" : std::string()) +
           " is used with tensors on the GPU; on a real GPU this fails (or copies it to the GPU "
           "every iteration): create it on the GPU, with device=<a GPU tensor>.device (e.g. the "
           "input's)";
  case TraceWarningKind::CuptiDropped:
    return "CUPTI dropped " + std::to_string(warning.count) +
           " activity records; some ops lack kernels";
  case TraceWarningKind::KernelsOutsideOps:
    return std::to_string(warning.count) + " GPU kernels, copies or fills (about " +
           formatMs(warning.ms) +
           " per iteration) ran outside any recorded op and are not in the measurements";
  case TraceWarningKind::RepeatSkipped:
    return "measured repeat " + std::to_string(warning.repeat) +
           " ran other ops than the recorded iteration; its timings were not used";
  case TraceWarningKind::UnsupportedDistributed:
    return "torch.distributed." + warning.call +
           " cannot run as one rank of the traced launch: it was skipped and its communication "
           "is not predicted";
  case TraceWarningKind::CpuOnlyScript:
    return "the script never asked for CUDA with the arguments given: run as written on a GPU "
           "machine it would train on the CPU. The figures are its ops on each GPU; move the "
           "model and its batches to the GPU (`.to(\"cuda\")`), or pass the argument that makes "
           "the script use it";
  case TraceWarningKind::CallStubbed:
    return warning.call +
           ": not run while tracing (writes, checkpoints and loggers are stubbed so the script "
           "leaves your files as they were)";
  case TraceWarningKind::HostTimeMeasured:
    return "data loading took " + formatMs(warning.ms) +
           " per iteration, measured on this CPU in one process (DataLoader workers are off "
           "while tracing); " +
           (warning.count == 1 ? std::string("the script's worker makes it beside the loop, which "
                                             "waits here only for what it takes beyond the "
                                             "rest of the iteration")
            : warning.count > 1
                ? "the script's " + std::to_string(warning.count) +
                      " workers share it and load beside the loop, which waits here only for "
                      "what they take beyond the rest of the iteration"
                : std::string("it is predicted as host time on this line"));
  case TraceWarningKind::PartialBatch:
    return "the recorded step trained on its DataLoader's last, partial batch, short of the " +
           std::to_string(warning.count) +
           " samples its other batches hold: the figures are for that batch. Give the script at "
           "least two full batches of data (more samples, or a smaller batch size) to predict "
           "a full one";
  case TraceWarningKind::UnrepeatedWork:
    return std::string("this line worked on tensors before the recorded iteration and not in "
                       "it") +
           (warning.count > 1 ? " (the busiest of " + std::to_string(warning.count) + " such lines)"
                              : std::string()) +
           ": work the loop does on some steps only (an evaluation, a checkpoint, a logged "
           "value) or once before training is not in the iteration time";
  case TraceWarningKind::EvenRouting:
    return "the shapes or values here depend on indices picked from computed values" +
           (warning.origin ? " (at " + location(*warning.origin) + ")" : std::string()) +
           ", which shape-only tracing does not compute: they are taken as spread evenly over "
           "the " +
           std::to_string(warning.count) +
           " choices, as a mixture of experts' load-balancing loss aims for (each expert gets "
           "the same number of tokens); a value only printed or logged (a top-k accuracy) "
           "changes nothing predicted; --mode cpu computes them for real";
  case TraceWarningKind::TracedInCpuMode: {
    std::string where = warning.call;
    if (warning.origin)
      where += (where.empty() ? "at " : ", at ") + location(*warning.origin);
    return "this line needs tensor values, which shape-only tracing does not compute" +
           (where.empty() ? std::string() : " (" + where + ")") +
           ": the script was traced in cpu mode instead, its arithmetic run on this CPU (the "
           "same ops; the trace takes longer)";
  }
  case TraceWarningKind::Sentence:
    return warning.text;
  }
  return warning.text;
}

std::string traceWarningLine(const TraceWarning& warning) {
  return warning.loc.valid() ? location(warning.loc) + ": " + traceWarningMessage(warning)
                             : traceWarningMessage(warning);
}

namespace {

// What a script that exited or stopped early last printed, which usually says why
// (argparse's "error: the following arguments are required: ..."); "" for other errors.
std::string lastWords(const ProfileError& error) {
  if (error.kind != ProfileErrorKind::BlockedCall && error.kind != ProfileErrorKind::NoTrainingStep)
    return "";
  const std::string& text = error.output;
  const size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos)
    return "";
  const size_t newline = text.find_last_of('\n', end);
  const size_t start =
      text.find_first_not_of(" \t", newline == std::string::npos ? 0 : newline + 1);
  return text.substr(start, end + 1 - start);
}

} // namespace

std::string errorLine(const ProfileError& error) {
  std::string where;
  if (!error.file.empty())
    where = error.file + (error.line > 0 ? ":" + std::to_string(error.line) : "") + ": ";
  std::string text = where + error.message;
  if (!error.hint.empty())
    text += " (" + error.hint + ")";
  if (const std::string said = lastWords(error); !said.empty())
    text += "; it printed: " + said;
  // Newlines and the indentation after them become one space.
  std::string out;
  bool space = false;
  for (const char c : text) {
    if (c == '\n' || ((c == ' ' || c == '\t') && space)) {
      space = true;
      continue;
    }
    if (space && !out.empty())
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string errorMessage(const ProfileError& error) {
  std::string message = error.message;
  if (const std::string said = lastWords(error); !said.empty())
    message += "; it printed: " + said;
  if (!error.hint.empty())
    message += "\n" + error.hint;
  return message;
}

} // namespace wavecast
