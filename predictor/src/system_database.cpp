#include "wavecast/predictor/system_database.h"

#include "edit_distance.h"
#include "wavecast/predictor/gpu_database.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace wavecast {
namespace {

using nlohmann::json;

// Where a field came from: "data/systems.json: system 'p5.48xlarge': field 'gpu'".
struct Context {
  std::string file;
  std::string system;

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    std::string where = file;
    if (!system.empty())
      where += ": system '" + system + "'";
    if (!field.empty())
      where += ": field '" + field + "'";
    throw SystemDatabaseError(where + ": " + problem +
                              " (the format is described in docs/systems.md)");
  }
};

double numberField(const json& obj, const char* key, const Context& ctx, double minimum) {
  const json& value = obj.at(key);
  if (!value.is_number())
    ctx.fail(key, "must be a number, got " + value.dump());
  const double number = value.get<double>();
  if (!std::isfinite(number) || number < minimum)
    ctx.fail(key, "must be a number >= " + std::to_string(static_cast<int>(minimum)) + ", got " +
                      value.dump());
  return number;
}

std::string stringField(const json& obj, const char* key, const Context& ctx) {
  const json& value = obj.at(key);
  if (!value.is_string() || value.get<std::string>().empty())
    ctx.fail(key, "must be a non-empty string, got " + value.dump());
  return value.get<std::string>();
}

// Applies the fields present in `entry` onto `system`; with `complete`, every field a
// new entry needs must be there.
void applyFields(const json& entry, SystemSpec& system, const Context& ctx, bool complete,
                 bool needsGpu) {
  static const char* required[] = {"gpus_per_node", "fabric", "intra_node_gbs", "network",
                                   "inter_node_gbps_per_gpu", "source"};
  if (complete) {
    for (const char* key : required)
      if (!entry.contains(key))
        ctx.fail(key, "missing");
    if (needsGpu && !entry.contains("gpu"))
      ctx.fail("gpu", "missing");
  }
  if (entry.contains("name"))
    system.name = stringField(entry, "name", ctx);
  if (entry.contains("aliases")) {
    const json& aliases = entry["aliases"];
    if (!aliases.is_array())
      ctx.fail("aliases", "must be a list of strings");
    system.aliases.clear();
    for (const json& alias : aliases) {
      if (!alias.is_string())
        ctx.fail("aliases", "must be a list of strings, got " + alias.dump());
      system.aliases.push_back(alias.get<std::string>());
    }
  }
  if (entry.contains("gpu"))
    system.gpu = stringField(entry, "gpu", ctx);
  if (entry.contains("gpus_per_node")) {
    if (!entry["gpus_per_node"].is_number_integer())
      ctx.fail("gpus_per_node", "must be an integer, got " + entry["gpus_per_node"].dump());
    system.gpusPerNode = static_cast<int>(numberField(entry, "gpus_per_node", ctx, 1));
  }
  if (entry.contains("fabric")) {
    const auto fabric = intraNodeFabricFromString(stringField(entry, "fabric", ctx));
    if (!fabric)
      ctx.fail("fabric", "must be \"nvswitch\", \"nvlink_bridge\" or \"pcie\", got " +
                             entry["fabric"].dump());
    system.fabric = *fabric;
  }
  if (entry.contains("fabric_name"))
    system.fabricName = stringField(entry, "fabric_name", ctx);
  if (entry.contains("intra_node_gbs")) {
    system.intraNodeGBs = numberField(entry, "intra_node_gbs", ctx, 0);
    if (system.intraNodeGBs <= 0)
      ctx.fail("intra_node_gbs", "must be > 0");
  }
  if (entry.contains("nvls")) {
    if (!entry["nvls"].is_boolean())
      ctx.fail("nvls", "must be true or false, got " + entry["nvls"].dump());
    system.nvls = entry["nvls"].get<bool>();
  }
  if (entry.contains("network")) {
    const auto network = interNodeNetworkFromString(stringField(entry, "network", ctx));
    if (!network)
      ctx.fail("network", "must be \"none\", \"infiniband\", \"roce\", \"efa\" or "
                          "\"ethernet\", got " +
                              entry["network"].dump());
    system.network = *network;
  }
  if (entry.contains("network_name"))
    system.networkName = stringField(entry, "network_name", ctx);
  if (entry.contains("inter_node_gbps_per_gpu"))
    system.interNodeGbpsPerGpu = numberField(entry, "inter_node_gbps_per_gpu", ctx, 0);
  if (system.network != InterNodeNetwork::None && system.interNodeGbpsPerGpu <= 0)
    ctx.fail("inter_node_gbps_per_gpu", "must be > 0 for a node with a network");
  if (entry.contains("price_per_hour_usd"))
    system.pricePerHourUsd = numberField(entry, "price_per_hour_usd", ctx, 0);
  if (entry.contains("source"))
    system.source = stringField(entry, "source", ctx);
  if (system.nvls && system.fabric != IntraNodeFabric::NvSwitch)
    ctx.fail("nvls", "needs \"fabric\": \"nvswitch\" (NVLink SHARP lives in the switches)");
}

json readJson(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw SystemDatabaseError(path + ": cannot open the systems file; check the path");
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    throw SystemDatabaseError(path + ": not valid JSON");
  return doc;
}

std::vector<std::string> keysOf(const SystemSpec& system) {
  std::vector<std::string> keys{normalizedGpuName(system.id)};
  for (const auto& alias : system.aliases)
    keys.push_back(normalizedGpuName(alias));
  if (!system.name.empty())
    keys.push_back(normalizedGpuName(system.name));
  return keys;
}

} // namespace

SystemDatabase SystemDatabase::fromFile(const std::string& path) {
  SystemDatabase db;
  db.mergeFile(path);
  return db;
}

void SystemDatabase::mergeFile(const std::string& path) {
  const json doc = readJson(path);
  const Context fileCtx{path, ""};
  if (!doc.is_object())
    fileCtx.fail("", "must be a JSON object with a \"systems\" list");
  if (doc.contains("format") && doc["format"] != "wavecast-systems")
    fileCtx.fail("format", "must be \"wavecast-systems\"");
  if (doc.contains("version") && (!doc["version"].is_number_integer() || doc["version"] != 1))
    fileCtx.fail("version", "this wavecast reads version 1 systems files; update wavecast");

  SystemSpec generic = genericPcie_;
  if (doc.contains("generic_pcie")) {
    const Context ctx{path, "generic_pcie"};
    if (!doc["generic_pcie"].is_object())
      ctx.fail("", "must be an object");
    applyFields(doc["generic_pcie"], generic, ctx, genericPcie_.source.empty(),
                /*needsGpu=*/false);
  }
  const auto systems = doc.find("systems");
  if (systems == doc.end() || !systems->is_array())
    fileCtx.fail("systems", "missing or not a list");

  std::vector<SystemSpec> merged = systems_;
  std::set<std::string> seenInFile;
  for (size_t i = 0; i < systems->size(); ++i) {
    const json& entry = (*systems)[i];
    Context ctx{path, "#" + std::to_string(i + 1)};
    if (!entry.is_object())
      ctx.fail("", "must be an object");
    const std::string id = stringField(entry, "id", ctx);
    ctx.system = id;
    if (!seenInFile.insert(normalizedGpuName(id)).second)
      ctx.fail("id", "appears twice in this file");
    auto existing = std::find_if(merged.begin(), merged.end(), [&](const SystemSpec& s) {
      return normalizedGpuName(s.id) == normalizedGpuName(id);
    });
    if (existing != merged.end()) {
      applyFields(entry, *existing, ctx, /*complete=*/false, /*needsGpu=*/true);
    } else {
      SystemSpec system;
      system.id = id;
      applyFields(entry, system, ctx, /*complete=*/true, /*needsGpu=*/true);
      if (system.name.empty())
        system.name = id;
      merged.push_back(std::move(system));
    }
  }
  systems_ = std::move(merged);
  genericPcie_ = std::move(generic);
}

const SystemSpec* SystemDatabase::find(const std::string& name) const {
  const std::string wanted = normalizedGpuName(name);
  if (wanted.empty())
    return nullptr;
  for (const auto& system : systems_)
    for (const auto& key : keysOf(system))
      if (key == wanted)
        return &system;
  for (const auto& system : systems_)
    for (const auto& key : keysOf(system))
      if (key.compare(0, wanted.size(), wanted) == 0)
        return &system;
  return nullptr;
}

std::vector<std::string> SystemDatabase::suggestions(const std::string& name,
                                                     size_t limit) const {
  return closestIds(normalizedGpuName(name), systems_, keysOf, limit);
}

SystemSpec SystemDatabase::defaultFor(const std::string& gpuId) const {
  for (const auto& system : systems_)
    if (normalizedGpuName(system.gpu) == normalizedGpuName(gpuId))
      return system;
  SystemSpec generic = genericPcie_;
  generic.gpu = gpuId;
  generic.id = "PCIe-" + std::to_string(generic.gpusPerNode) + "x-" + gpuId;
  generic.name = std::to_string(generic.gpusPerNode) + "x " + gpuId + " on " +
                 (generic.fabricName.empty() ? "PCIe" : generic.fabricName);
  return generic;
}

} // namespace wavecast
