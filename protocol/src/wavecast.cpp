#include "wavecast/protocol/wavecast.h"

#include "wavecast/protocol/json_read.h"

namespace wavecast::protocol {

namespace {

// `key`: the settings' "batchSize" or the wavecast/* params' "batch_size".
std::optional<int64_t> positiveBatchSize(const Json& object, const char* key,
                                         std::string_view where) {
  auto batchSize = optionalInt(object, key, where);
  if (batchSize && *batchSize <= 0)
    throwInvalidParams(std::string(where) + "." + key + " must be a positive integer");
  return batchSize;
}

// Command-line words: no splitting at commas, unlike stringList.
std::vector<std::string> argumentList(const Json& value, const std::string& where) {
  if (!value.is_array())
    throwInvalidParams(where + " must be an array of strings");
  std::vector<std::string> out;
  for (const auto& word : value) {
    if (!word.is_string())
      throwInvalidParams(where + " must be an array of strings");
    out.push_back(word.get<std::string>());
  }
  return out;
}

std::vector<std::string> stringList(const Json& value, const std::string& where) {
  std::vector<std::string> out;
  if (value.is_string()) { // "H100,A100" is accepted too
    std::string text = value.get<std::string>();
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      std::string item =
          text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      if (!item.empty())
        out.push_back(item);
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    return out;
  }
  if (!value.is_array())
    throwInvalidParams(where + " must be an array of GPU names");
  for (const Json& item : value) {
    if (!item.is_string())
      throwInvalidParams(where + " must be an array of GPU names");
    out.push_back(item.get<std::string>());
  }
  return out;
}

// "parallelTargets": each a string of words ("8x H100-SXM, FSDP") or an object with `gpu`,
// `count`, `layout` ("fsdp tp2") and `system`, or `target` (the words) and `system`.
std::vector<ParallelTargetSetting> parallelTargetList(const Json& value, const std::string& where) {
  const std::string form = where + " must be an array of targets: \"8x H100-SXM, FSDP\", or "
                                   "{\"gpu\": \"H100-SXM\", \"count\": 8, \"layout\": "
                                   "\"fsdp\", \"system\": \"HGX-H100\"}";
  if (!value.is_array())
    throwInvalidParams(form);
  std::vector<ParallelTargetSetting> out;
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& item = value[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    ParallelTargetSetting target;
    if (item.is_string()) {
      target.target = item.get<std::string>();
    } else if (item.is_object()) {
      if (auto words = optionalString(item, "target", at)) {
        target.target = *words;
      } else {
        const std::string gpu = requireString(item, "gpu", at);
        const auto count = optionalInt(item, "count", at).value_or(1);
        if (count < 1)
          throwInvalidParams(at + ".count must be a positive integer");
        target.target = std::to_string(count) + "x" + gpu;
      }
      if (auto layout = optionalString(item, "layout", at))
        target.target += ", " + *layout;
      target.system = optionalString(item, "system", at).value_or("");
    } else {
      throwInvalidParams(form);
    }
    if (target.target.find_first_not_of(" ,") == std::string::npos)
      throwInvalidParams(at + " names no GPU count and GPU, e.g. \"8x H100-SXM, FSDP\"");
    out.push_back(std::move(target));
  }
  return out;
}

} // namespace

std::vector<std::string> customMethods() {
  return {methods::kListGpus, methods::kSetTargets,     methods::kSetBatchSize, methods::kAnalyze,
          methods::kResults,  methods::kResultsChanged, methods::kStatus};
}

const char* toString(AnalysisMode mode) {
  switch (mode) {
  case AnalysisMode::Shape:
    return "shape";
  case AnalysisMode::Measured:
    return "measured";
  }
  return "shape";
}

std::optional<RpcError> checkProtocolVersion(int clientVersion) {
  if (clientVersion == kProtocolVersion)
    return std::nullopt;
  std::string update = clientVersion > kProtocolVersion ? "the wavecast daemon (`wavecast serve`)"
                                                        : "the editor extension/client";
  return RpcError(ErrorCode::InvalidRequest,
                  "wavecast protocol mismatch: the client speaks version " +
                      std::to_string(clientVersion) + ", the daemon speaks version " +
                      std::to_string(kProtocolVersion) + "; update " + update + ".",
                  Json{{"retry", false},
                       {"client_protocol_version", clientVersion},
                       {"server_protocol_version", kProtocolVersion},
                       {"update", clientVersion > kProtocolVersion ? "server" : "client"}});
}

void mergeSettings(Settings& settings, const Json& object, std::string_view where) {
  if (object.is_null())
    return;
  requireObject(object, where);
  std::string at(where);
  Settings merged = settings;
  if (object.contains("targets") && !object["targets"].is_null())
    merged.targets = stringList(object["targets"], at + ".targets");
  if (object.contains("parallelTargets"))
    merged.parallelTargets =
        object["parallelTargets"].is_null()
            ? std::vector<ParallelTargetSetting>{}
            : parallelTargetList(object["parallelTargets"], at + ".parallelTargets");
  if (object.contains("batchSize"))
    merged.batchSize = positiveBatchSize(object, "batchSize", where);
  if (auto trigger = optionalString(object, "trigger", where)) {
    if (*trigger == "onSave")
      merged.trigger = AnalysisTrigger::OnSave;
    else if (*trigger == "manual")
      merged.trigger = AnalysisTrigger::Manual;
    else
      throwInvalidParams(at + ".trigger must be \"onSave\" or \"manual\"");
  }
  if (auto env = optionalString(object, "pythonEnv", where))
    merged.pythonEnv = *env;
  if (object.contains("scriptArgs")) {
    const Json& args = object["scriptArgs"];
    merged.scriptArgs.clear();
    if (args.is_array()) {
      merged.scriptArgs[""] = argumentList(args, at + ".scriptArgs");
    } else if (args.is_object()) {
      for (const auto& [file, list] : args.items())
        merged.scriptArgs[file] = argumentList(list, at + ".scriptArgs[\"" + file + "\"]");
    } else if (!args.is_null()) {
      throwInvalidParams(at +
                         ".scriptArgs must be an array of strings or an object of them by file");
    }
  }
  if (object.contains("scriptWorkingDirectories")) {
    const Json& folders = object["scriptWorkingDirectories"];
    merged.scriptWorkingDirectories.clear();
    if (folders.is_object()) {
      for (const auto& [file, folder] : folders.items()) {
        if (!folder.is_string() || folder.get<std::string>().empty())
          throwInvalidParams(at + ".scriptWorkingDirectories[\"" + file +
                             "\"] must be a folder's path");
        merged.scriptWorkingDirectories[file] = folder.get<std::string>();
      }
    } else if (!folders.is_null()) {
      throwInvalidParams(at + ".scriptWorkingDirectories must be an object of folders by file");
    }
  }
  if (auto lineDiagnostics = optionalBool(object, "lineDiagnostics", where))
    merged.lineDiagnostics = *lineDiagnostics;
  if (object.contains("lineCodeLens"))
    merged.lineCodeLens = optionalBool(object, "lineCodeLens", where);
  if (auto debounce = optionalInt(object, "debounceMs", where)) {
    if (*debounce < 0 || *debounce > 60000)
      throwInvalidParams(at + ".debounceMs must be between 0 and 60000");
    merged.debounceMs = static_cast<int>(*debounce);
  }
  if (object.contains("worldSize")) {
    merged.worldSize.reset();
    if (auto ranks = optionalInt(object, "worldSize", where)) {
      if (*ranks < 1 || *ranks > 1 << 20)
        throwInvalidParams(at + ".worldSize must be a number of ranks, 1 or more");
      merged.worldSize = static_cast<int>(*ranks);
    }
  }
  if (object.contains("compile")) {
    merged.compile.reset();
    if (auto mode = optionalString(object, "compile", where)) {
      merged.compile = compileModeFromString(*mode);
      if (!merged.compile)
        throwInvalidParams(at +
                           ".compile must be null (as the script says) or a torch.compile "
                           "mode: " +
                           compileModeChoices());
    }
  }
  if (auto mode = optionalString(object, "mode", where)) {
    if (*mode == "shape")
      merged.mode = AnalysisMode::Shape;
    else if (*mode == "measured")
      merged.mode = AnalysisMode::Measured;
    else
      throwInvalidParams(at + ".mode must be \"shape\" (no GPU needed) or \"measured\" (on "
                              "this machine's GPU)");
  }
  settings = std::move(merged);
}

std::vector<std::string> mergeValidSettings(Settings& settings, const Json& object,
                                            std::string_view where) {
  if (object.is_null())
    return {};
  try {
    requireObject(object, where);
  } catch (const RpcError& error) {
    return {error.what()};
  }
  std::vector<std::string> problems;
  for (const auto& [key, value] : object.items()) {
    try {
      mergeSettings(settings, Json{{key, value}}, where);
    } catch (const RpcError& error) {
      problems.push_back(error.what());
    }
  }
  return problems;
}

Json toJson(const Settings& settings) {
  Json parallelTargets = Json::array();
  for (const auto& target : settings.parallelTargets)
    parallelTargets.push_back(target.system.empty()
                                  ? Json(target.target)
                                  : Json{{"target", target.target}, {"system", target.system}});
  return {{"targets", settings.targets},
          {"parallelTargets", std::move(parallelTargets)},
          {"batchSize", settings.batchSize ? Json(*settings.batchSize) : Json()},
          {"trigger", settings.trigger == AnalysisTrigger::OnSave ? "onSave" : "manual"},
          {"pythonEnv", settings.pythonEnv},
          {"lineDiagnostics", settings.lineDiagnostics},
          {"lineCodeLens", settings.lineCodeLens ? Json(*settings.lineCodeLens) : Json()},
          {"debounceMs", settings.debounceMs},
          {"mode", toString(settings.mode)},
          {"scriptArgs", settings.scriptArgs},
          {"scriptWorkingDirectories", settings.scriptWorkingDirectories},
          {"worldSize", settings.worldSize ? Json(*settings.worldSize) : Json()},
          {"compile", settings.compile ? Json(toString(*settings.compile)) : Json()}};
}

std::vector<std::string> scriptArgsFor(const Settings& settings, const std::string& path) {
  if (auto own = settings.scriptArgs.find(path); own != settings.scriptArgs.end())
    return own->second;
  if (auto every = settings.scriptArgs.find(""); every != settings.scriptArgs.end())
    return every->second;
  return {};
}

InitializationOptions initializationOptionsFromJson(const Json& value) {
  InitializationOptions out;
  if (value.is_null())
    return out;
  const char* where = "params.initializationOptions";
  requireObject(value, where);
  out.protocolVersion = optionalInt(value, "protocol_version", where);
  if (!out.protocolVersion)
    out.protocolVersion = optionalInt(value, "protocolVersion", where);
  out.token = optionalString(value, "token", where).value_or("");
  if (value.contains("settings") && value["settings"].is_object())
    out.settings = value["settings"];
  else if (value.contains("wavecast") && value["wavecast"].is_object())
    out.settings = value["wavecast"];
  else
    out.settings = value;
  return out;
}

Json toJson(const GpuInfo& gpu) {
  return {{"id", gpu.id},
          {"name", gpu.name},
          {"compute_capability", gpu.computeCapability},
          {"sms", gpu.smCount},
          {"memory_gib", gpu.memoryGiB},
          {"memory_bandwidth_gbs", gpu.memoryBandwidthGBs},
          {"peak_tflops",
           {{"fp32", gpu.fp32Tflops},
            {"tf32", gpu.tf32Tflops},
            {"fp16", gpu.fp16Tflops},
            {"bf16", gpu.bf16Tflops}}},
          {"host_link",
           {{"name", gpu.hostLink},
            {"host_to_device_gbs", gpu.hostToDeviceGBs},
            {"device_to_host_gbs", gpu.deviceToHostGBs}}},
          {"price_per_hour_usd", gpu.pricePerHourUsd}};
}

SetTargetsParams setTargetsFromJson(const Json& params) {
  requireObject(params, "params");
  SetTargetsParams out{stringList(requireMember(params, "gpus", "params"), "params.gpus")};
  if (out.gpus.empty())
    throwInvalidParams("params.gpus must name at least one GPU (see wavecast/listGpus)");
  return out;
}

SetBatchSizeParams setBatchSizeFromJson(const Json& params) {
  requireObject(params, "params");
  if (!params.contains("batch_size"))
    throwInvalidParams("params.batch_size is required (an integer, or null for the default)");
  return {requireString(params, "uri", "params"),
          positiveBatchSize(params, "batch_size", "params")};
}

AnalyzeParams analyzeFromJson(const Json& params) {
  requireObject(params, "params");
  return {requireString(params, "uri", "params"),
          positiveBatchSize(params, "batch_size", "params")};
}

ResultsParams resultsParamsFromJson(const Json& params) {
  requireObject(params, "params");
  return {requireString(params, "uri", "params"),
          optionalBool(params, "ops", "params").value_or(true)};
}

const char* toString(ResultsState state) {
  switch (state) {
  case ResultsState::None:
    return "none";
  case ResultsState::Analyzing:
    return "analyzing";
  case ResultsState::Ready:
    return "ready";
  case ResultsState::Error:
    return "error";
  }
  return "none";
}

std::string toJsonText(const Results& results) {
  Json error = nullptr;
  if (results.error)
    error = {{"kind", results.error->kind},
             {"message", results.error->message},
             {"file", results.error->file},
             {"line", results.error->line},
             {"hint", results.error->hint}};
  const Json head = {
      {"uri", results.uri},
      {"state", toString(results.state)},
      {"content_version", results.contentVersion ? Json(*results.contentVersion) : Json()},
      {"error", error}};
  std::string out = head.dump(-1, ' ', false, Json::error_handler_t::replace);
  out.pop_back(); // the closing brace: the prediction goes last
  out += R"(,"prediction":)";
  if (results.prediction)
    out += *results.prediction;
  else
    out += "null";
  out += '}';
  return out;
}

const char* toString(ServerState state) {
  switch (state) {
  case ServerState::Idle:
    return "idle";
  case ServerState::Analyzing:
    return "analyzing";
  case ServerState::Error:
    return "error";
  }
  return "idle";
}

Json toJson(const Status& status) {
  Json out = {{"state", toString(status.state)}, {"message", status.message}};
  if (status.percentage)
    out["percentage"] = *status.percentage;
  return out;
}

} // namespace wavecast::protocol
