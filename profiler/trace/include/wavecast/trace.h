// Value types of the wavecast trace (docs/trace-format.md): what the profiler
// records of one training iteration and the predictor consumes.
#pragma once

#include "wavecast/compile_mode.h"

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace wavecast {

// 2: warnings are records (TraceWarning), not sentences.
inline constexpr int kTraceFormatVersion = 2;

enum class Phase { Forward, Backward, Optimizer };
const char* toString(Phase phase);
std::optional<Phase> phaseFromString(const std::string& text);

// How the iteration was run: on shape-only (fake) tensors, for real on the CPU, or on a
// GPU with every op measured.
enum class TraceMode { Shape, Cpu, Cuda };
const char* toString(TraceMode mode);
std::optional<TraceMode> traceModeFromString(const std::string& text);

// The provider functions a script defines: wavecast_model(), wavecast_input(batch_size)
// and wavecast_iteration(model) (or DeepView's and Skyline's names).
enum class Provider { Model, Input, Iteration };
const char* toString(Provider provider);
std::optional<Provider> providerFromString(std::string_view text);

// Why the worker could not trace a script (docs/trace-format.md "Errors"); text
// only in the worker's reply and the editor's diagnostic code.
enum class ProfileErrorKind {
  MissingProvider,
  BadProviderSignature,
  SyntaxError,
  ImportError,
  UserException,
  UnsupportedOperation,
  MissingFile,
  Timeout,
  WorkerCrashed,
  OutOfMemory,
  Cancelled,
  EnvironmentError,
  BlockedCall,    // a script run as written called what tracing refuses (exit, input, a download)
  NoTrainingStep, // a script run as written ended before its second optimizer step
  BadRequest,
  Internal,
};

const char* toString(ProfileErrorKind kind);
// nullopt for a name no version of the worker sends.
std::optional<ProfileErrorKind> profileErrorKindFromString(std::string_view name);

// A tensor's element type; the trace carries torch's names ("float32", "bfloat16").
enum class ScalarType {
  Float64,
  Float32,
  Float16,
  BFloat16,
  Float8E4M3,
  Float8E5M2,
  Complex64,
  Complex128,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt8,
  Bool,
  Other, // quantized, bit and unsigned-wide types: 4 bytes, never floating point
};

const char* toString(ScalarType type);
// Other for a name not listed above ("quint8", "uint32", ...).
ScalarType scalarTypeFromString(std::string_view name);
int elementSize(ScalarType type);
// Real floating point, the types arithmetic is priced in.
bool isFloatingPoint(ScalarType type);

struct TensorMeta {
  std::vector<int64_t> shape;
  ScalarType dtype = ScalarType::Float32;
  bool contiguous = true;
  // A non-contiguous tensor's strides, in elements; empty: contiguous, or not recorded.
  std::vector<int64_t> strides{};
  // An op input that is the very tensor of an earlier input of the same op (x * x,
  // Adam's addcmul_(v, grad, grad)): that input's index; memory reads it once. -1: none.
  int sameAs = -1;
  // An input's writer: the op (id) and its output (index) that made or last modified its
  // storage. Traced once a compiled region ran; absent: unknown, or made before the
  // iteration (a parameter, the batch).
  struct Source {
    int64_t op = 0;
    int output = 0;
  };
  std::optional<Source> source{};

  int64_t numel() const;
  int elementSize() const { return wavecast::elementSize(dtype); }
  int64_t bytes() const { return numel() * elementSize(); }
};

struct SourceLocation {
  std::string file;
  int line = 0;
  std::string function;

  bool valid() const { return !file.empty() && line > 0; }
};

// A cost-relevant scalar argument: bool, integer, float, string or a list of integers.
using ArgValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;

// What GPU work a measured record is: a kernel, or a copy or fill the copy engines or
// the driver run without a grid (cudaMemcpyAsync, cudaMemsetAsync).
enum class GpuActivityKind { Kernel, Memcpy, Memset };
const char* toString(GpuActivityKind kind);
std::optional<GpuActivityKind> gpuActivityKindFromString(const std::string& text);

struct KernelRecord {
  GpuActivityKind kind = GpuActivityKind::Kernel;
  std::string name;
  std::vector<int64_t> grid;  // x, y, z
  std::vector<int64_t> block; // x, y, z
  int registersPerThread = 0;
  int64_t staticSharedBytes = 0;
  int64_t dynamicSharedBytes = 0;
  double durationMs = 0.0;
  int64_t bytes = 0; // memcpy and memset records: bytes moved or written
};

struct OpRecord {
  int64_t id = 0;
  std::string name; // "aten::convolution"
  Phase phase = Phase::Forward;
  std::vector<std::optional<TensorMeta>> inputs;
  std::vector<std::optional<TensorMeta>> outputs;
  std::map<std::string, ArgValue> args;
  SourceLocation loc;
  std::vector<SourceLocation> stack;
  std::string module;
  std::optional<int64_t> forwardId;
  bool fallback = false;
  std::optional<double> measuredMs;
  std::vector<KernelRecord> kernels;
  // Bytes of the storages this op allocated that autograd kept for backward (shape and
  // cpu traces; absent: none or unknown).
  std::optional<int64_t> savedBytes;
  // Bytes of tensor storages live once this op's outputs were allocated, as the trace's
  // peak counts them (shape and cpu traces; absent: the op allocated nothing, or unknown).
  // What a GPU holds while the op runs, besides the op's own workspace.
  std::optional<int64_t> liveBytes;
  // Runs on the host even on a GPU machine (Adam's step counters, tensors the
  // script builds on the CPU): no GPU kernel.
  bool onHost = false;
  // Work on the gradients before the optimizer's step (clipping, a GradScaler's unscale):
  // phase Optimizer, though no part of the step call.
  bool gradientWork = false;
  // Ran inside a torch.compile region (forward, or the backward of a compiled forward).
  std::optional<CompileMode> compiled;
  // The part of the traced batch the op runs on: a pipeline microbatch's copy of a traced
  // op does 1/m of its kernels' work, while the host still issues all of it. Set by the
  // layout transforms; not in trace files.
  double batchShare = 1.0;

  // Typed argument access; nullopt when absent or of another type.
  std::optional<int64_t> intArg(const std::string& key) const;
  std::optional<double> floatArg(const std::string& key) const;
  std::optional<bool> boolArg(const std::string& key) const;
  std::optional<std::vector<int64_t>> intListArg(const std::string& key) const;
  // The input tensor at `index` if present.
  const TensorMeta* input(size_t index) const;
  const TensorMeta* output(size_t index) const;
  // Whether an input of more than one element has fewer than the op's largest tensor: an
  // elementwise op broadcasts it (a bias, a mask, a per-channel scale).
  bool broadcastsAnInput() const;
};

// How much a warning or advisory matters: Warning changes what the user should do or
// trust, Info explains how the figures were obtained.
enum class Severity { Warning, Info };
const char* toString(Severity severity);
std::optional<Severity> severityFromString(std::string_view text);

// What a trace warning is about (docs/trace-format.md "warnings"); the tracer's
// trace_warnings.SEVERITY lists the same kinds and their severities.
enum class TraceWarningKind {
  OldTorch,        // traced with torch `version`, older than the 2.x figures are checked on
  CudaTracedOnCpu, // shape and cpu mode ran the script's CUDA tensors on the CPU
  TorchCompile,    // compiled code: eager ops traced, priced as Inductor runs them
  AutocastCpuOnly, // autocast("cpu") around GPU work: entered disabled
  AutocastUnsupportedDtype, // CUDA autocast to a dtype torch refuses: `dtype`
  AutocastOtherDevice,      // autocast on another device casts no CUDA tensor: `device`
  HostTensorWithGpu,        // a tensor made on the CPU meets GPU tensors: `origin`
  CuptiDropped,             // measured mode lost `count` activity records
  KernelsOutsideOps,        // `count` kernels, `ms` per iteration, outside any recorded op
  RepeatSkipped,            // measured repeat `repeat` ran other ops than the recorded one
  UnsupportedDistributed,   // torch.distributed `call` cannot run as one rank: skipped
  CallStubbed,              // a script run as written: `call` (torch.save, a logger) did nothing
  HostTimeMeasured,         // a script run as written: `ms` of data loading, timed on this CPU
  CpuOnlyScript,            // a script run as written never asked for CUDA: it trains on the CPU
  PartialBatch,    // a script run as written: the recorded step's batch is short of the loader's
                   // `count`
  UnrepeatedWork,  // a script run as written: `count` lines worked before the recorded
                   // iteration, not in it (an evaluation every N steps); at the busiest
  EvenRouting,     // shapes from indices picked among `count` choices, taken as spread evenly
  TracedInCpuMode, // shape mode met `call` needing tensor values (asked at `origin`): cpu mode
  Sentence,        // a version-1 trace's warning: only its `text`
};
const char* toString(TraceWarningKind kind);
std::optional<TraceWarningKind> traceWarningKindFromString(std::string_view text);

// One trace warning: a kind and the facts it involves; wavecast writes its sentence.
struct TraceWarning {
  TraceWarningKind kind = TraceWarningKind::Sentence;
  Severity severity = Severity::Warning;
  SourceLocation loc; // the line it is about; invalid: the whole script
  // HostTensorWithGpu: made on another line; EvenRouting: the line that picked the indices;
  // TracedInCpuMode: the library's line that needed the values
  std::optional<SourceLocation> origin;
  int64_t count = 0;
  double ms = 0;
  int repeat = 0;      // 1-based
  std::string dtype;   // "float64"
  std::string device;  // "xpu"
  std::string version; // OldTorch: "1.13.1"
  // UnsupportedDistributed: "all_gather_object"; CallStubbed: "torch.save";
  // TracedInCpuMode: "aten::nonzero"
  std::string call;
  std::string text; // Sentence only
};

struct TraceMemory {
  int64_t parametersBytes = 0;
  int64_t gradientsBytes = 0;
  int64_t optimizerStateBytes = 0;
  // Measured by the tracer (shape and cpu traces); absent in older traces.
  std::optional<int64_t> activationsSavedBytes; // kept by autograd for backward
  std::optional<int64_t> peakLiveBytes;         // all tensors live at the iteration's peak
  // The gradients among them: fewer than all when zero_grad(set_to_none=True) freed the
  // previous iteration's before the forward and the peak comes before backward made them all.
  std::optional<int64_t> gradientsAtPeakBytes;
  // What PyTorch's caching allocator reserves for these tensors at most, its rounding and
  // fragmentation included: the tracer replays their allocations through it.
  std::optional<int64_t> peakReservedBytes;
  std::optional<Phase> peakPhase;
  std::optional<int64_t> peakOpId;
};

// How CUDA would run the script's float math, as the script left torch's
// settings; the defaults are torch's own (>= 1.12): TF32 for cuDNN only.
struct FloatPrecision {
  bool matmulTf32 = false; // torch.backends.cuda.matmul.allow_tf32 / set_float32_matmul_precision
  bool cudnnTf32 = true;   // torch.backends.cudnn.allow_tf32: convolutions and cuDNN RNNs
  std::optional<ScalarType> autocast; // the CUDA autocast dtype, if any
};

// One process group of a torch.distributed script, as the tracer saw it.
struct ProcessGroupInfo {
  std::string name; // "default", "dp", "tp", "pp", or the name torch gave it
  int size = 1;
};

// The rank a torch.distributed script was traced as (docs/trace-format.md, `distributed`).
struct DistributedInfo {
  int worldSize = 1;
  int rank = 0;
  int localWorldSize = 1; // ranks on one node
  std::string backend;    // "fake" when traced under a fake process group
  std::vector<ProcessGroupInfo> groups;
};

struct Trace {
  int version = kTraceFormatVersion;
  std::string torchVersion;
  std::string pythonVersion;
  std::string pythonEnv; // the venv whose torch traced it, or "system"; empty: not recorded
  std::string entryFile;
  std::string projectRoot;
  int64_t batchSize = 0;
  // Samples one iteration (one optimizer step) trains on: a script run as written that
  // accumulates gradients over k batches trains on k x batchSize; 0: batchSize.
  int64_t samplesPerIteration = 0;
  int64_t samples() const { return samplesPerIteration > 0 ? samplesPerIteration : batchSize; }
  // A script run as written: the arguments it ran with (empty for a provider script).
  std::vector<std::string> scriptArgs;
  TraceMode mode = TraceMode::Shape;
  std::map<Provider, int> providerLines; // 1-based line of each provider's def
  std::vector<OpRecord> ops;
  std::vector<std::string> fallbackOps;
  TraceMemory memory;
  std::vector<TraceWarning> warnings;
  // cuda mode: the GPU the ops were measured on (torch.cuda.get_device_name()).
  std::optional<std::string> device;
  // Absent in traces from before the field: torch's defaults apply.
  std::optional<FloatPrecision> precision;
  // Absent for a single-process script.
  std::optional<DistributedInfo> distributed;
};

// Thrown when a document is not a trace this build can read; the message says what to do.
class TraceFormatError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

Trace traceFromJson(const nlohmann::json& doc);
// One op record (docs/trace-format.md "Operation record"), as traces and calibration files
// hold them. A TraceFormatError names the bad field from `where` ("ops[3].inputs[0].shape").
OpRecord opRecordFromJson(const nlohmann::json& j, const std::string& where);
nlohmann::json traceToJson(const Trace& trace);

} // namespace wavecast
