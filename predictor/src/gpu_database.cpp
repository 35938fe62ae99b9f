#include "wavecast/predictor/gpu_database.h"

#include "edit_distance.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace wavecast {
namespace {

using nlohmann::json;

// Where a field came from, for error messages: "data/gpus.json: GPU 'T4': field 'sms'".
struct Context {
  std::string file;
  std::string gpu;

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    std::string where = file;
    if (!gpu.empty())
      where += ": GPU '" + gpu + "'";
    if (!field.empty())
      where += ": field '" + field + "'";
    throw GpuDatabaseError(where + ": " + problem + " (the format is described in docs/gpus.md)");
  }
};

double numberField(const json& obj, const std::string& key, const Context& ctx, double minimum) {
  const auto it = obj.find(key);
  if (it == obj.end())
    ctx.fail(key, "missing");
  if (!it->is_number())
    ctx.fail(key, "must be a number, got " + it->dump());
  const double value = it->get<double>();
  if (!std::isfinite(value) || value < minimum) {
    std::ostringstream msg;
    msg << "must be a number >= " << minimum << ", got " << it->dump();
    ctx.fail(key, msg.str());
  }
  return value;
}

int intField(const json& obj, const std::string& key, const Context& ctx, int minimum) {
  const auto it = obj.find(key);
  if (it != obj.end() && it->is_number_float())
    ctx.fail(key, "must be an integer, got " + it->dump());
  return static_cast<int>(numberField(obj, key, ctx, minimum));
}

std::string stringField(const json& obj, const std::string& key, const Context& ctx) {
  const auto it = obj.find(key);
  if (it == obj.end())
    ctx.fail(key, "missing");
  if (!it->is_string() || it->get<std::string>().empty())
    ctx.fail(key, "must be a non-empty string, got " + it->dump());
  return it->get<std::string>();
}

// Applies the limit fields present in `obj` onto `limits`; with `requireAll`, every
// field must be present (a complete per-architecture table).
void applySmLimits(const json& obj, SmLimits& limits, const Context& ctx, bool requireAll) {
  if (!obj.is_object())
    ctx.fail("sm_limits", "must be an object");
  const std::pair<const char*, int SmLimits::*> intFields[] = {
      {"warp_size", &SmLimits::warpSize},
      {"max_threads_per_sm", &SmLimits::maxThreadsPerSm},
      {"max_warps_per_sm", &SmLimits::maxWarpsPerSm},
      {"max_blocks_per_sm", &SmLimits::maxBlocksPerSm},
      {"max_threads_per_block", &SmLimits::maxThreadsPerBlock},
      {"registers_per_sm", &SmLimits::registersPerSm},
      {"max_registers_per_thread", &SmLimits::maxRegistersPerThread},
      {"register_allocation_unit", &SmLimits::registerAllocationUnit},
      {"warp_allocation_granularity", &SmLimits::warpAllocationGranularity},
      {"shared_memory_per_sm_bytes", &SmLimits::sharedMemoryPerSmBytes},
      {"max_shared_memory_per_block_bytes", &SmLimits::maxSharedMemoryPerBlockBytes},
      {"reserved_shared_memory_per_block_bytes", &SmLimits::reservedSharedMemoryPerBlockBytes},
      {"shared_memory_allocation_unit_bytes", &SmLimits::sharedMemoryAllocationUnitBytes},
  };
  for (const auto& [key, member] : intFields) {
    if (!requireAll && !obj.contains(key))
      continue;
    const bool mayBeZero = std::string(key) == "reserved_shared_memory_per_block_bytes";
    limits.*member = intField(obj, key, ctx, mayBeZero ? 0 : 1);
  }
  if (requireAll || obj.contains("shared_memory_carveouts_kib")) {
    const auto it = obj.find("shared_memory_carveouts_kib");
    if (it == obj.end())
      ctx.fail("shared_memory_carveouts_kib", "missing");
    if (!it->is_array() || it->empty())
      ctx.fail("shared_memory_carveouts_kib", "must be a non-empty list of KiB sizes");
    limits.sharedMemoryCarveoutsBytes.clear();
    for (const auto& v : *it) {
      if (!v.is_number_integer() || v.get<int>() < 0)
        ctx.fail("shared_memory_carveouts_kib", "must hold non-negative integers, got " + v.dump());
      limits.sharedMemoryCarveoutsBytes.push_back(v.get<int>() * 1024);
    }
    std::sort(limits.sharedMemoryCarveoutsBytes.begin(), limits.sharedMemoryCarveoutsBytes.end());
  }
  if (obj.contains("source") && obj["source"].is_string())
    limits.source = obj["source"].get<std::string>();
}

std::vector<std::string> tokens(const std::string& name) {
  std::vector<std::string> out;
  std::string current;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      current += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!current.empty()) {
      out.push_back(current);
      current.clear();
    }
  }
  if (!current.empty())
    out.push_back(current);
  return out;
}

// "80gb" -> 80; nullopt for tokens that are not a memory size.
std::optional<double> memoryToken(const std::string& token) {
  if (token.size() < 3 || token.compare(token.size() - 2, 2, "gb") != 0)
    return std::nullopt;
  const std::string digits = token.substr(0, token.size() - 2);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return std::nullopt;
  return std::stod(digits);
}

std::vector<std::string> keysOf(const DeviceSpec& gpu) {
  std::vector<std::string> keys{normalizedGpuName(gpu.id), normalizedGpuName(gpu.name)};
  for (const auto& alias : gpu.aliases)
    keys.push_back(normalizedGpuName(alias));
  return keys;
}

// Runs of consecutive words of the GPU's names ("geforce", "rtx", "4090",
// "rtx4090", ...), each a string a query word can match.
std::vector<std::string> wordRunsOf(const DeviceSpec& gpu) {
  std::vector<std::string> runs;
  std::vector<std::string> names{gpu.id, gpu.name};
  names.insert(names.end(), gpu.aliases.begin(), gpu.aliases.end());
  for (const auto& name : names) {
    const auto words = tokens(name);
    for (size_t first = 0; first < words.size(); ++first) {
      std::string run;
      for (size_t last = first; last < words.size(); ++last)
        runs.push_back(run += words[last]);
    }
  }
  return runs;
}

// A query word matches a run it equals or begins, except that a number is never
// the start of a longer number: "sxm" finds "sxm4", but "h10" does not find "h100".
bool wordMatches(const std::string& word, const std::string& run) {
  if (run.compare(0, word.size(), word) != 0)
    return false;
  return run.size() == word.size() || !std::isdigit(static_cast<unsigned char>(word.back())) ||
         !std::isdigit(static_cast<unsigned char>(run[word.size()]));
}

json readJson(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw GpuDatabaseError(path + ": cannot open the GPU file; check the path");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw GpuDatabaseError(path + ": not valid JSON (" + std::string(e.what()) +
                           "); fix the syntax (docs/gpus.md)");
  }
}

using LimitsByCc = std::map<std::string, SmLimits>;

LimitsByCc readLimitTables(const json& doc, const std::string& path) {
  LimitsByCc tables;
  const auto it = doc.find("sm_limits_by_compute_capability");
  if (it == doc.end())
    return tables;
  if (!it->is_object())
    Context{path, ""}.fail("sm_limits_by_compute_capability", "must be an object keyed by \"M.m\"");
  for (const auto& [cc, limits] : it->items()) {
    SmLimits parsed;
    applySmLimits(limits, parsed, Context{path, "compute capability " + cc}, true);
    tables[cc] = parsed;
  }
  return tables;
}

using HostLinks = std::map<std::string, HostLink>;

HostLinks readHostLinks(const json& doc, const std::string& path) {
  HostLinks links;
  const auto it = doc.find("host_links");
  if (it == doc.end())
    return links;
  if (!it->is_object())
    Context{path, ""}.fail("host_links", "must be an object keyed by link id (\"pcie4\")");
  for (const auto& [id, entry] : it->items()) {
    const Context ctx{path, "host link " + id};
    if (!entry.is_object())
      ctx.fail("", "must be an object {\"name\", \"host_to_device_gbs\", \"device_to_host_gbs\", "
                   "\"source\"}");
    HostLink link;
    link.id = id;
    link.name = stringField(entry, "name", ctx);
    link.hostToDeviceGBs = numberField(entry, "host_to_device_gbs", ctx, 0.001);
    // A link measured one way only: PCIe's two directions run at about one rate.
    link.deviceToHostGBs = entry.contains("device_to_host_gbs")
                               ? numberField(entry, "device_to_host_gbs", ctx, 0.001)
                               : link.hostToDeviceGBs;
    if (entry.contains("source"))
      link.source = stringField(entry, "source", ctx);
    links[id] = std::move(link);
  }
  return links;
}

// A GPU that names no host link: PCIe 4.0 x16, the commonest in the GPUs listed.
constexpr const char* kAssumedHostLink = "pcie4";

void parseComputeCapability(const std::string& text, DeviceSpec& gpu, const Context& ctx) {
  const auto dot = text.find('.');
  try {
    if (dot == std::string::npos)
      throw std::invalid_argument(text);
    gpu.computeCapabilityMajor = std::stoi(text.substr(0, dot));
    gpu.computeCapabilityMinor = std::stoi(text.substr(dot + 1));
  } catch (const std::exception&) {
    ctx.fail("compute_capability", "must look like \"8.0\", got \"" + text + "\"");
  }
}

// Fills `gpu` from `entry`. With `partial`, absent fields keep their current values
// (a user override of a known GPU); otherwise every field is required.
void applyEntry(const json& entry, DeviceSpec& gpu, const LimitsByCc& tables,
                const HostLinks& links, const Context& ctx, bool partial) {
  const auto has = [&](const char* key) { return !partial || entry.contains(key); };
  if (has("name"))
    gpu.name = stringField(entry, "name", ctx);
  if (entry.contains("vendor")) {
    const std::string vendor = stringField(entry, "vendor", ctx);
    if (vendor == toString(GpuVendor::Nvidia))
      gpu.vendor = GpuVendor::Nvidia;
    else if (vendor == toString(GpuVendor::Amd))
      gpu.vendor = GpuVendor::Amd;
    else
      ctx.fail("vendor", "must be \"nvidia\" or \"amd\", got \"" + vendor + "\"");
  }
  if (entry.contains("architecture"))
    gpu.architecture = stringField(entry, "architecture", ctx);
  if (entry.contains("aliases")) {
    const auto& aliases = entry["aliases"];
    if (!aliases.is_array())
      ctx.fail("aliases", "must be a list of strings");
    if (!partial)
      gpu.aliases.clear();
    for (const auto& alias : aliases) {
      if (!alias.is_string())
        ctx.fail("aliases", "must be a list of strings, got " + alias.dump());
      gpu.aliases.push_back(alias.get<std::string>());
    }
  }
  const bool nvidia = gpu.vendor == GpuVendor::Nvidia;
  if (nvidia && has("compute_capability"))
    parseComputeCapability(stringField(entry, "compute_capability", ctx), gpu, ctx);
  if (has("sms"))
    gpu.smCount = intField(entry, "sms", ctx, 1);
  if (has("boost_clock_mhz"))
    gpu.boostClockMHz = numberField(entry, "boost_clock_mhz", ctx, 1);
  if (has("memory_gib"))
    gpu.memoryGiB = numberField(entry, "memory_gib", ctx, 0.001);
  if (has("memory_bandwidth_gbs"))
    gpu.memoryBandwidthGBs = numberField(entry, "memory_bandwidth_gbs", ctx, 0.001);
  if (has("l2_cache_mib"))
    gpu.l2CacheMiB = numberField(entry, "l2_cache_mib", ctx, 0);
  if (entry.contains("host_link") || (!partial && links.count(kAssumedHostLink))) {
    const std::string id =
        entry.contains("host_link") ? stringField(entry, "host_link", ctx) : kAssumedHostLink;
    const auto link = links.find(id);
    if (link == links.end())
      ctx.fail("host_link", "no host_links entry \"" + id + "\"");
    gpu.hostLink = link->second;
  }
  if (has("peak_tflops")) {
    const auto it = entry.find("peak_tflops");
    if (it == entry.end())
      ctx.fail("peak_tflops", "missing");
    if (!it->is_object())
      ctx.fail("peak_tflops", "must be an object {\"fp32\", \"tf32\", \"fp16\", \"bf16\"}");
    const Context peakCtx{ctx.file, ctx.gpu};
    const auto peak = [&](const char* key, double& member, bool required) {
      if (!it->contains(key)) {
        if (required && !partial)
          peakCtx.fail(std::string("peak_tflops.") + key, "missing");
        return;
      }
      if (!(*it)[key].is_number() || (*it)[key].get<double>() < 0)
        peakCtx.fail(std::string("peak_tflops.") + key,
                     "must be a number >= 0, got " + (*it)[key].dump());
      member = (*it)[key].get<double>();
    };
    peak("fp32", gpu.fp32Tflops, true);
    peak("tf32", gpu.tf32Tflops, true);
    peak("fp16", gpu.fp16Tflops, true);
    peak("bf16", gpu.bf16Tflops, true);
    peak("fp32_matrix", gpu.fp32MatrixTflops, false);
    if (gpu.fp32Tflops <= 0)
      peakCtx.fail("peak_tflops.fp32", "must be > 0 (every GPU has FP32 units)");
  }
  if (has("price_per_hour_usd"))
    gpu.pricePerHourUsd = numberField(entry, "price_per_hour_usd", ctx, 0);
  if (entry.contains("price_source"))
    gpu.priceSource = stringField(entry, "price_source", ctx);
  if (entry.contains("source"))
    gpu.source = stringField(entry, "source", ctx);

  // Per-SM limits: the table of the compute capability, then the entry's own fields.
  const bool ccChanged = entry.contains("compute_capability");
  if (nvidia && (ccChanged || !partial)) {
    const auto table = tables.find(gpu.computeCapability());
    if (table != tables.end())
      gpu.limits = table->second;
    else if (!entry.contains("sm_limits"))
      ctx.fail("compute_capability", "no sm_limits_by_compute_capability table for " + gpu.computeCapability() +
                                         "; give the entry a complete \"sm_limits\"");
  }
  if (entry.contains("sm_limits")) {
    const bool complete = !nvidia && !partial;
    applySmLimits(entry["sm_limits"], gpu.limits, ctx,
                  complete || (nvidia && !tables.count(gpu.computeCapability())));
  } else if (!nvidia && !partial) {
    ctx.fail("sm_limits", "missing (required for non-NVIDIA GPUs, which have no compute "
                          "capability table)");
  }
}

} // namespace

GpuDatabase GpuDatabase::fromFile(const std::string& path) {
  GpuDatabase db;
  db.mergeFile(path);
  return db;
}

void GpuDatabase::mergeFile(const std::string& path) {
  const json doc = readJson(path);
  const Context fileCtx{path, ""};
  if (!doc.is_object())
    fileCtx.fail("", "must be a JSON object with a \"gpus\" list");
  if (doc.contains("format") && doc["format"] != "wavecast-gpus")
    fileCtx.fail("format", "must be \"wavecast-gpus\"");
  if (doc.contains("version") && (!doc["version"].is_number_integer() || doc["version"] != 1))
    fileCtx.fail("version", "this wavecast reads version 1 GPU files; update wavecast");
  LimitsByCc tables = limitTables_;
  for (auto& [cc, limits] : readLimitTables(doc, path))
    tables[cc] = limits;
  HostLinks links = hostLinks_;
  for (auto& [id, link] : readHostLinks(doc, path))
    links[id] = link;
  const auto gpus = doc.find("gpus");
  if (gpus == doc.end() || !gpus->is_array())
    fileCtx.fail("gpus", "missing or not a list");

  std::vector<DeviceSpec> merged = devices_;
  std::set<std::string> seenInFile;
  for (size_t i = 0; i < gpus->size(); ++i) {
    const json& entry = (*gpus)[i];
    Context ctx{path, "#" + std::to_string(i + 1)};
    if (!entry.is_object())
      ctx.fail("", "must be an object");
    const std::string id = stringField(entry, "id", ctx);
    ctx.gpu = id;
    if (!seenInFile.insert(normalizedGpuName(id)).second)
      ctx.fail("id", "appears twice in this file");
    auto existing = std::find_if(merged.begin(), merged.end(), [&](const DeviceSpec& gpu) {
      return normalizedGpuName(gpu.id) == normalizedGpuName(id);
    });
    if (existing != merged.end()) {
      applyEntry(entry, *existing, tables, links, ctx, true);
    } else {
      DeviceSpec gpu;
      gpu.id = id;
      applyEntry(entry, gpu, tables, links, ctx, false);
      merged.push_back(std::move(gpu));
    }
  }
  devices_ = std::move(merged);
  limitTables_ = std::move(tables);
  hostLinks_ = std::move(links);
}

std::string normalizedGpuName(const std::string& name) {
  std::string out;
  for (const char c : name)
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const DeviceSpec* GpuDatabase::find(const std::string& name) const {
  const std::string wanted = normalizedGpuName(name);
  if (wanted.empty())
    return nullptr;
  // 1. Exact id, marketing name or alias.
  for (const auto& gpu : devices_)
    for (const auto& key : keysOf(gpu))
      if (key == wanted)
        return &gpu;
  // 2. Every word of the query begins a word (or run of words) of the GPU's
  // names; a "NNgb" word selects by memory size. Among several, file order wins:
  // each family lists its default variant first (docs/gpus.md).
  std::vector<std::string> words;
  std::optional<double> memory;
  for (const auto& token : tokens(name)) {
    if (auto gib = memoryToken(token))
      memory = gib;
    else
      words.push_back(token);
  }
  if (words.empty())
    return nullptr;
  for (const auto& gpu : devices_) {
    if (memory && std::abs(gpu.memoryGiB - *memory) > 0.5)
      continue;
    const auto runs = wordRunsOf(gpu);
    const bool allWords = std::all_of(words.begin(), words.end(), [&](const std::string& word) {
      return std::any_of(runs.begin(), runs.end(),
                         [&](const std::string& run) { return wordMatches(word, run); });
    });
    if (allWords)
      return &gpu;
  }
  return nullptr;
}

std::vector<std::string> GpuDatabase::suggestions(const std::string& name, size_t limit) const {
  return closestIds(normalizedGpuName(name), devices_, keysOf, limit);
}

std::vector<DeviceSpec> GpuDatabase::resolve(const std::vector<std::string>& names) const {
  std::vector<DeviceSpec> resolved;
  for (const auto& raw : names) {
    std::stringstream list(raw);
    std::string name;
    while (std::getline(list, name, ',')) {
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      if (name.empty())
        continue;
      const DeviceSpec* gpu = find(name);
      if (!gpu) {
        std::string message = "unknown GPU '" + name + "'";
        const auto close = suggestions(name);
        if (!close.empty()) {
          message += "; did you mean ";
          for (size_t i = 0; i < close.size(); ++i)
            message += (i ? ", " : "") + close[i];
          message += "?";
        }
        message += " (`wavecast gpus` lists them all; add your own in a GPU file, docs/gpus.md)";
        throw GpuDatabaseError(message);
      }
      const bool duplicate = std::any_of(resolved.begin(), resolved.end(),
                                         [&](const DeviceSpec& d) { return d.id == gpu->id; });
      if (!duplicate)
        resolved.push_back(*gpu);
    }
  }
  if (resolved.empty())
    throw GpuDatabaseError("no GPU named; give one or more, e.g. --gpu H100,A100,T4");
  return resolved;
}

} // namespace wavecast
