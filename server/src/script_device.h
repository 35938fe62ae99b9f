// The GPU a script run as written sees through torch.cuda, from the GPU database's
// record of the first target GPU (the CLI's --gpu, the editor's targets).
#pragma once

#include "wavecast/predictor/device_spec.h"
#include "wavecast/profiler/trace_job.h"

namespace wavecast {

inline ScriptDevice scriptDevice(const DeviceSpec& spec) {
  return {spec.name,
          spec.memoryBytes(),
          spec.computeCapabilityMajor,
          spec.computeCapabilityMinor,
          spec.smCount,
          static_cast<int64_t>(spec.l2CacheMiB * 1024 * 1024)};
}

} // namespace wavecast
