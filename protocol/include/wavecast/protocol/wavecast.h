// wavecast's own protocol on top of LSP (docs/protocol.md): the protocol
// version, the settings, and the params/results of the wavecast/* methods.
#pragma once

#include "wavecast/compile_mode.h"
#include "wavecast/protocol/jsonrpc.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wavecast::protocol {

// Bumped when a wavecast/* method changes incompatibly. 2: snake_case field names.
inline constexpr int kProtocolVersion = 2;

namespace methods {
inline constexpr const char* kListGpus = "wavecast/listGpus";
inline constexpr const char* kSetTargets = "wavecast/setTargets";
inline constexpr const char* kSetBatchSize = "wavecast/setBatchSize";
inline constexpr const char* kAnalyze = "wavecast/analyze";
inline constexpr const char* kResults = "wavecast/results";
inline constexpr const char* kResultsChanged = "wavecast/resultsChanged";
inline constexpr const char* kStatus = "wavecast/status";
} // namespace methods

// Everything advertised in capabilities.experimental.wavecast.methods.
std::vector<std::string> customMethods();

// Null when the versions are compatible, else the error for the initialize
// request, saying which side to update.
std::optional<RpcError> checkProtocolVersion(int clientVersion);

enum class AnalysisTrigger { OnSave, Manual };

// How the daemon's worker traces a script: on shape-only tensors (no GPU needed), or
// measured on the daemon machine's GPU (CUPTI) and scaled to the other targets.
enum class AnalysisMode { Shape, Measured };
const char* toString(AnalysisMode mode);

// A multi-GPU target (docs/parallel.md): its GPU count, GPU and layout as words for the
// layout parser ("8x H100-SXM, FSDP"), and the node it runs on.
struct ParallelTargetSetting {
  std::string target; // "8x H100-SXM, FSDP"; the object form's count, gpu and layout joined
  std::string system; // data/systems.json's id; empty: the GPU's usual node
  bool operator==(const ParallelTargetSetting& other) const {
    return target == other.target && system == other.system;
  }
  bool operator!=(const ParallelTargetSetting& other) const { return !(*this == other); }
};

struct Settings {
  std::vector<std::string> targets;                   // GPU names; empty: the daemon's defaults
  std::vector<ParallelTargetSetting> parallelTargets; // predicted beside the GPUs
  std::optional<int64_t> batchSize;                   // nullopt: the input provider's default
  AnalysisTrigger trigger = AnalysisTrigger::OnSave;
  std::string pythonEnv;            // a venv whose site-packages the worker uses
  bool lineDiagnostics = false;     // per-line Information diagnostics
  std::optional<bool> lineCodeLens; // nullopt: only for clients without inlay hints
  int debounceMs = 0;               // a save is analysed at once unless a client asks to wait
  AnalysisMode mode = AnalysisMode::Shape;
  // The arguments of scripts run as written (no provider functions), by absolute path;
  // the key "" applies to every other script. JSON: an array (every script) or an object.
  std::map<std::string, std::vector<std::string>> scriptArgs;
  // The folder each script run as written runs from, by its absolute path (a launch
  // configuration's `cwd`); a script not named runs from its workspace folder.
  std::map<std::string, std::string> scriptWorkingDirectories;
  // The ranks a torch.distributed script is traced as rank 0 of; nullopt: the worker's 8.
  std::optional<int> worldSize;
  // Trace scripts as if the modules their iteration calls were passed through torch.compile
  // in this mode; nullopt: as each script says.
  std::optional<CompileMode> compile;
};

// A script's arguments in `settings.scriptArgs`: its own, else those for every script.
std::vector<std::string> scriptArgsFor(const Settings& settings, const std::string& path);

// Applies the keys present in `object` ("targets", "parallelTargets", "batchSize", "trigger",
// "pythonEnv", "lineDiagnostics", "lineCodeLens", "debounceMs", "mode", "scriptArgs",
// "scriptWorkingDirectories", "worldSize", "compile"); unknown keys
// are ignored. Throws InvalidParams naming a malformed key; `settings` is then unchanged.
void mergeSettings(Settings& settings, const Json& object, std::string_view where);
// The same, key by key, for settings an editor sends: every well-formed key applies
// and each malformed one leaves its setting as it was; returns their messages.
std::vector<std::string> mergeValidSettings(Settings& settings, const Json& object,
                                            std::string_view where);
Json toJson(const Settings& settings);

struct InitializationOptions {
  // "protocol_version"; a version-1 client's "protocolVersion" is read too, so that it
  // gets the mismatch error rather than a daemon that misunderstands it.
  std::optional<int64_t> protocolVersion;
  std::string token; // TCP connections authenticate with it
  Json settings;     // the settings keys, at the top level or under "settings"
};
InitializationOptions initializationOptionsFromJson(const Json& value);

// Sent with data/gpus.json's names (docs/gpus.md).
struct GpuInfo {
  std::string id;
  std::string name;
  std::string computeCapability; // "9.0"
  int smCount = 0;
  double memoryGiB = 0;
  double memoryBandwidthGBs = 0;
  double fp32Tflops = 0;
  double tf32Tflops = 0;
  double fp16Tflops = 0;
  double bf16Tflops = 0;
  double pricePerHourUsd = 0;
  // Its link to the host CPU: "PCIe 5.0 x16", and copies' measured rates each way (GB/s).
  std::string hostLink;
  double hostToDeviceGBs = 0;
  double deviceToHostGBs = 0;
};
Json toJson(const GpuInfo& gpu);

struct SetTargetsParams {
  std::vector<std::string> gpus;
};
SetTargetsParams setTargetsFromJson(const Json& params);

struct SetBatchSizeParams {
  std::string uri;
  std::optional<int64_t> batchSize; // nullopt: back to the settings / provider default
};
SetBatchSizeParams setBatchSizeFromJson(const Json& params);

struct AnalyzeParams {
  std::string uri;
  std::optional<int64_t> batchSize;
};
AnalyzeParams analyzeFromJson(const Json& params);

struct ResultsParams {
  std::string uri;
  // Whether the result carries the per-op detail (`ops`), by far its largest part for a
  // large model; a client that shows lines, modules and summaries leaves it out.
  bool ops = true;
};
ResultsParams resultsParamsFromJson(const Json& params);

enum class ResultsState { None, Analyzing, Ready, Error };
const char* toString(ResultsState state);

struct ErrorInfo {
  std::string kind;
  std::string message;
  std::string file;
  int line = 0;
  std::string hint;
};

struct Results {
  std::string uri;
  ResultsState state = ResultsState::None;
  std::optional<int64_t> contentVersion; // document version the results were computed for
  // The results JSON's text (docs/results-json.md), shared with the server's cache; null: none.
  std::shared_ptr<const std::string> prediction;
  std::optional<ErrorInfo> error;
};
// The wavecast/results (and wavecast/analyze) result as JSON text, the prediction spliced in.
std::string toJsonText(const Results& results);

// What the daemon is doing, for a status bar.
enum class ServerState { Idle, Analyzing, Error };
const char* toString(ServerState state);

struct Status {
  ServerState state = ServerState::Idle;
  std::string message;
  std::optional<int> percentage;
};
Json toJson(const Status& status);

} // namespace wavecast::protocol
