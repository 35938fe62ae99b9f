// Which of NeuSight's measured GPUs a user's names pick, for `wavecast eval`.
#pragma once

#include "wavecast/predictor/gpu_database.h"

#include <string>
#include <utility>
#include <vector>

namespace wavecast::eval {

// NeuSight's GPUs: each device_configs stem and the GPU database's spec of it.
using MeasuredGpus = std::vector<std::pair<std::string, const DeviceSpec*>>;

// The NeuSight data's GPUs (device_configs stems) that `names` pick, forgivingly: a name
// equal to a folder or its GPU's id picks that GPU, else it picks every measured GPU whose
// folder, id, name or alias contains it ("a100": the three A100 cards). A name that picks
// none goes to the GPU database, whose error names an unknown GPU's closest matches; a
// GPU it knows but NeuSight never measured throws std::invalid_argument saying which were.
std::vector<std::string> resolveMeasuredGpus(const std::vector<std::string>& names,
                                             const MeasuredGpus& measured,
                                             const GpuDatabase& database);

} // namespace wavecast::eval
