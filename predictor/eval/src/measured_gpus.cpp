#include "wavecast/eval/measured_gpus.h"

#include <algorithm>
#include <stdexcept>

namespace wavecast::eval {

std::vector<std::string> resolveMeasuredGpus(const std::vector<std::string>& names,
                                             const MeasuredGpus& measured,
                                             const GpuDatabase& database) {
  const auto picked = [&](const std::string& wanted, bool exact) {
    std::vector<std::string> found;
    for (const auto& [stem, spec] : measured) {
      std::vector<std::string> known{stem, spec->id};
      if (!exact) {
        known.push_back(spec->name);
        known.insert(known.end(), spec->aliases.begin(), spec->aliases.end());
      }
      if (std::any_of(known.begin(), known.end(), [&](const std::string& k) {
            const std::string key = normalizedGpuName(k);
            return exact ? key == wanted : key.find(wanted) != std::string::npos;
          }))
        found.push_back(stem);
    }
    return found;
  };
  std::vector<std::string> resolved;
  for (const std::string& name : names) {
    const std::string wanted = normalizedGpuName(name);
    if (wanted.empty())
      continue;
    std::vector<std::string> found = picked(wanted, true);
    if (found.empty())
      found = picked(wanted, false);
    if (found.empty()) {
      const DeviceSpec gpu = database.resolve({name}).front();
      std::string ids;
      for (const auto& [stem, spec] : measured)
        ids += " " + spec->id;
      throw std::invalid_argument("the NeuSight data has no measurements of " + gpu.id +
                                  "; it has:" + ids);
    }
    for (const std::string& stem : found)
      if (std::find(resolved.begin(), resolved.end(), stem) == resolved.end())
        resolved.push_back(stem);
  }
  return resolved;
}

} // namespace wavecast::eval
