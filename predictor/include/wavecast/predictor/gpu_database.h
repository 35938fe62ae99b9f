// The GPUs wavecast knows: data/gpus.json plus an optional user file that adds
// or overrides entries without rebuilding.
#pragma once

#include "wavecast/predictor/device_spec.h"

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace wavecast {

// A GPU name as names are compared everywhere: lower case, letters and digits only
// ("Tesla_T4" and "tesla t4" are both "teslat4").
std::string normalizedGpuName(const std::string& name);

class GpuDatabaseError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class GpuDatabase {
public:
  // Loads `path` (data/gpus.json format, docs/gpus.md). Throws GpuDatabaseError
  // naming the file, the GPU and the field when an entry is malformed.
  static GpuDatabase fromFile(const std::string& path);
  // Adds or replaces entries from a user file (same format; entries may give
  // only the fields they change when `id` names an existing GPU).
  void mergeFile(const std::string& path);

  const std::vector<DeviceSpec>& all() const { return devices_; }
  // Forgiving lookup: "h100", "H100-SXM", "NVIDIA H100 80GB HBM3" all match (case, spaces,
  // dashes and underscores ignored; then every word of the name must begin a word of one
  // of a GPU's names, a number never the start of a longer one, "80GB" selects by memory,
  // and the first match in file order wins; docs/gpus.md).
  const DeviceSpec* find(const std::string& name) const;
  // Up to `limit` known ids closest to `name`, for "did you mean" messages.
  std::vector<std::string> suggestions(const std::string& name, size_t limit = 3) const;
  // Resolves a comma-separated list; throws GpuDatabaseError listing close names
  // for an unknown one.
  std::vector<DeviceSpec> resolve(const std::vector<std::string>& names) const;

private:
  std::vector<DeviceSpec> devices_;
  // Per-SM limit tables by compute capability ("8.0"), kept so a user file can add a
  // GPU of a known architecture without repeating them.
  std::map<std::string, SmLimits> limitTables_;
  // Host links by id ("pcie4"), likewise.
  std::map<std::string, HostLink> hostLinks_;
};

} // namespace wavecast
