#include "script_device.h"

#include <gtest/gtest.h>

namespace wavecast {
namespace {

TEST(ScriptDevice, IsTheFirstTargetAsTorchCudaDescribesIt) {
  DeviceSpec t4;
  t4.name = "Tesla T4";
  t4.memoryGiB = 16;
  t4.computeCapabilityMajor = 7;
  t4.computeCapabilityMinor = 5;
  t4.smCount = 40;
  t4.l2CacheMiB = 4;
  const ScriptDevice device = scriptDevice(t4);
  EXPECT_EQ(device.name, "Tesla T4");
  EXPECT_EQ(device.memoryBytes, int64_t{16} << 30);
  EXPECT_EQ(device.capabilityMajor, 7);
  EXPECT_EQ(device.capabilityMinor, 5);
  EXPECT_EQ(device.multiprocessors, 40);
  EXPECT_EQ(device.l2CacheBytes, int64_t{4} << 20) << "torch.cuda's L2_cache_size";
}

} // namespace
} // namespace wavecast
