// The nodes wavecast knows: data/systems.json plus an optional user file that adds or
// overrides entries without rebuilding (docs/systems.md).
#pragma once

#include "wavecast/predictor/system_spec.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace wavecast {

class SystemDatabaseError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class SystemDatabase {
public:
  // Loads `path` (data/systems.json format). Throws SystemDatabaseError naming the file,
  // the system and the field when an entry is malformed.
  static SystemDatabase fromFile(const std::string& path);
  // Adds or replaces entries from a user file (same format; an entry whose `id` names a
  // known system may give only the fields it changes).
  void mergeFile(const std::string& path);

  const std::vector<SystemSpec>& all() const { return systems_; }
  // Forgiving lookup by id, alias or name: case, spaces and punctuation ignored; then the
  // first system in file order one of whose names begins with `name` ("p5" finds
  // p5.48xlarge).
  const SystemSpec* find(const std::string& name) const;
  // Up to `limit` known ids closest to `name`, for "did you mean" messages.
  std::vector<std::string> suggestions(const std::string& name, size_t limit = 3) const;
  // The usual node of `gpuId` (a data/gpus.json id): the first system listing it, else a
  // generic PCIe node of that GPU (the file's `generic_pcie`).
  SystemSpec defaultFor(const std::string& gpuId) const;

private:
  std::vector<SystemSpec> systems_;
  SystemSpec genericPcie_;
};

} // namespace wavecast
