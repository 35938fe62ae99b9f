#include "wavecast/predictor/gpu_database.h"
#include "temp_file.h"

#include <gtest/gtest.h>
#include <string>

namespace wavecast {
namespace {

GpuDatabase shipped() {
  return GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
}

std::string idOf(const GpuDatabase& db, const std::string& name) {
  const DeviceSpec* gpu = db.find(name);
  return gpu ? gpu->id : "<none>";
}

TEST(GpuDatabase, ShipsTheGpusTheIssueAsksFor) {
  const GpuDatabase db = shipped();
  for (const char* id : {"P4",
                         "P100-PCIE-16GB",
                         "V100-SXM2-16GB",
                         "V100-SXM2-32GB",
                         "V100-PCIE-16GB",
                         "V100-PCIE-32GB",
                         "T4",
                         "RTX-2070",
                         "RTX-2080-Ti",
                         "RTX-3090",
                         "RTX-4090",
                         "A10",
                         "A40",
                         "L4",
                         "L40S",
                         "A100-SXM4-40GB",
                         "A100-SXM4-80GB",
                         "A100-PCIE-40GB",
                         "A100-PCIE-80GB",
                         "H100-SXM",
                         "H100-PCIE",
                         "H200",
                         "MI100",
                         "MI210",
                         "MI250"})
    EXPECT_EQ(idOf(db, id), id);
  EXPECT_EQ(db.all().size(), 25u);
}

TEST(GpuDatabase, EveryEntryIsComplete) {
  const GpuDatabase db = shipped();
  for (const DeviceSpec& gpu : db.all()) {
    SCOPED_TRACE(gpu.id);
    EXPECT_GT(gpu.smCount, 0);
    EXPECT_GT(gpu.boostClockMHz, 500);
    EXPECT_GT(gpu.memoryGiB, 4);
    EXPECT_GT(gpu.memoryBandwidthGBs, 100);
    EXPECT_GT(gpu.l2CacheMiB, 1);
    EXPECT_GT(gpu.fp32Tflops, 1);
    EXPECT_GT(gpu.pricePerHourUsd, 0);
    EXPECT_FALSE(gpu.source.empty());
    EXPECT_FALSE(gpu.priceSource.empty());
    EXPECT_GE(gpu.limits.maxThreadsPerSm, 1024);
    EXPECT_FALSE(gpu.limits.sharedMemoryCarveoutsBytes.empty());
    if (gpu.vendor == GpuVendor::Nvidia) {
      EXPECT_GE(gpu.computeCapabilityMajor, 6);
    }
  }
}

TEST(GpuDatabase, ComputeCapabilityTablesFillTheLimits) {
  const GpuDatabase db = shipped();
  const DeviceSpec* a100 = db.find("A100-SXM4-40GB");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->computeCapabilityMajor, 8);
  EXPECT_EQ(a100->computeCapabilityMinor, 0);
  EXPECT_EQ(a100->limits.sharedMemoryPerSmBytes, 167936);
  EXPECT_EQ(a100->limits.reservedSharedMemoryPerBlockBytes, 1024);
  EXPECT_EQ(a100->limits.sharedMemoryCarveoutsBytes.back(), 164 * 1024);
  const DeviceSpec* t4 = db.find("T4");
  EXPECT_EQ(t4->limits.maxWarpsPerSm, 32);
  EXPECT_EQ(t4->limits.maxBlocksPerSm, 16);
  const DeviceSpec* mi210 = db.find("MI210");
  EXPECT_EQ(mi210->vendor, GpuVendor::Amd);
  EXPECT_EQ(mi210->limits.warpSize, 64);
  EXPECT_DOUBLE_EQ(mi210->fp32MatrixTflops, 45.3);
}

TEST(GpuDatabase, ForgivingNames) {
  const GpuDatabase db = shipped();
  EXPECT_EQ(idOf(db, "h100"), "H100-SXM");
  EXPECT_EQ(idOf(db, "H100-SXM"), "H100-SXM");
  EXPECT_EQ(idOf(db, "NVIDIA H100 80GB HBM3"), "H100-SXM");
  EXPECT_EQ(idOf(db, "h100 pcie"), "H100-PCIE");
  EXPECT_EQ(idOf(db, "A100"), "A100-SXM4-40GB");
  EXPECT_EQ(idOf(db, "a100 80gb"), "A100-SXM4-80GB");
  EXPECT_EQ(idOf(db, "NVIDIA A100 80GB PCIe"), "A100-PCIE-80GB");
  EXPECT_EQ(idOf(db, "a100-pcie"), "A100-PCIE-40GB");
  EXPECT_EQ(idOf(db, "v100"), "V100-SXM2-16GB");
  EXPECT_EQ(idOf(db, "V100 32GB"), "V100-SXM2-32GB");
  EXPECT_EQ(idOf(db, "Tesla V100-PCIE-32GB"), "V100-PCIE-32GB");
  EXPECT_EQ(idOf(db, "rtx4090"), "RTX-4090");
  EXPECT_EQ(idOf(db, "NVIDIA GeForce RTX 3090"), "RTX-3090");
  EXPECT_EQ(idOf(db, "2080ti"), "RTX-2080-Ti");
  EXPECT_EQ(idOf(db, "Tesla T4"), "T4");
  EXPECT_EQ(idOf(db, "l4"), "L4");
  EXPECT_EQ(idOf(db, "a10"), "A10");
  EXPECT_EQ(idOf(db, "AMD Instinct MI250X / MI250"), "MI250");
  EXPECT_EQ(idOf(db, "a100 sxm"), "A100-SXM4-40GB");
  EXPECT_EQ(idOf(db, "geforce 4090"), "RTX-4090");
  // A number is not the start of a longer one: near-misses get "did you mean".
  EXPECT_EQ(idOf(db, "h10"), "<none>");
  EXPECT_EQ(idOf(db, "v10"), "<none>");
  EXPECT_EQ(idOf(db, "mi25"), "<none>");
  EXPECT_EQ(idOf(db, "rtx 409"), "<none>");
  EXPECT_EQ(idOf(db, "gtx 480"), "<none>");
  EXPECT_EQ(idOf(db, ""), "<none>");
}

TEST(GpuDatabase, EveryNeuSightDeviceConfigStemMaps) {
  const GpuDatabase db = shipped();
  const std::pair<const char*, const char*> stems[] = {{"AMD_Instinct_MI100", "MI100"},
                                                       {"AMD_Instinct_MI210", "MI210"},
                                                       {"AMD_Instinct_MI250", "MI250"},
                                                       {"NVIDIA_A100-PCIE-40GB", "A100-PCIE-40GB"},
                                                       {"NVIDIA_A100-SXM4-40GB", "A100-SXM4-40GB"},
                                                       {"NVIDIA_A100_80GB_PCIe", "A100-PCIE-80GB"},
                                                       {"NVIDIA_H100_80GB_HBM3", "H100-SXM"},
                                                       {"NVIDIA_L4", "L4"},
                                                       {"Tesla_P100-PCIE-16GB", "P100-PCIE-16GB"},
                                                       {"Tesla_P4", "P4"},
                                                       {"Tesla_T4", "T4"},
                                                       {"Tesla_V100-PCIE-32GB", "V100-PCIE-32GB"}};
  for (const auto& [stem, id] : stems)
    EXPECT_EQ(idOf(db, stem), id) << stem;
}

TEST(GpuDatabase, UnknownNameSuggestsCloseOnes) {
  const GpuDatabase db = shipped();
  const auto close = db.suggestions("H10", 3);
  ASSERT_EQ(close.size(), 3u);
  EXPECT_TRUE(close[0] == "H100-SXM" || close[0] == "H100-PCIE") << close[0];
  try {
    db.resolve({"T4,H1000"});
    FAIL() << "H1000 resolved";
  } catch (const GpuDatabaseError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown GPU 'H1000'"), std::string::npos) << message;
    EXPECT_NE(message.find("did you mean H100"), std::string::npos) << message;
  }
  const auto resolved = db.resolve({"h100, a100", "T4", "tesla t4"});
  ASSERT_EQ(resolved.size(), 3u);
  EXPECT_EQ(resolved[0].id, "H100-SXM");
  EXPECT_EQ(resolved[1].id, "A100-SXM4-40GB");
  EXPECT_EQ(resolved[2].id, "T4");
}

TEST(GpuDatabase, MissingFieldNamesFileGpuAndField) {
  TempFile file("wavecast_gpus_", R"({"gpus": [{"id": "X1", "name": "X One", "compute_capability": "8.0",
    "boost_clock_mhz": 1000, "memory_gib": 16, "memory_bandwidth_gbs": 500, "l2_cache_mib": 4,
    "peak_tflops": {"fp32": 10, "tf32": 0, "fp16": 0, "bf16": 0}, "price_per_hour_usd": 1}]})");
  try {
    GpuDatabase::fromFile(file.path());
    FAIL() << "accepted an entry without sms";
  } catch (const GpuDatabaseError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(file.path()), std::string::npos) << message;
    EXPECT_NE(message.find("GPU 'X1'"), std::string::npos) << message;
    EXPECT_NE(message.find("field 'sms': missing"), std::string::npos) << message;
  }
}

TEST(GpuDatabase, WrongTypeAndBadJsonAreReported) {
  TempFile wrongType("wavecast_gpus_", R"({"gpus": [{"id": "T4", "sms": "forty"}]})");
  GpuDatabase db = shipped();
  try {
    db.mergeFile(wrongType.path());
    FAIL() << "accepted sms as a string";
  } catch (const GpuDatabaseError& e) {
    EXPECT_NE(std::string(e.what()).find("field 'sms': must be a number"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(db.find("T4")->smCount, 40) << "a failed merge must leave the database unchanged";
  TempFile badJson("wavecast_gpus_", "{\"gpus\": [");
  EXPECT_THROW(db.mergeFile(badJson.path()), GpuDatabaseError);
  EXPECT_THROW(GpuDatabase::fromFile("/nonexistent/gpus.json"), GpuDatabaseError);
}

TEST(GpuDatabase, UserFileOverridesAndAdds) {
  TempFile user("wavecast_gpus_", R"({"gpus": [
    {"id": "T4", "price_per_hour_usd": 0.11},
    {"id": "MyCard", "name": "Lab A100 clone", "aliases": ["labcard"], "compute_capability": "8.0",
     "sms": 100, "boost_clock_mhz": 1400, "memory_gib": 48, "memory_bandwidth_gbs": 1800,
     "l2_cache_mib": 40, "peak_tflops": {"fp32": 18, "tf32": 140, "fp16": 280, "bf16": 280},
     "price_per_hour_usd": 0.9}]})");
  GpuDatabase db = shipped();
  db.mergeFile(user.path());
  const DeviceSpec* t4 = db.find("t4");
  ASSERT_NE(t4, nullptr);
  EXPECT_DOUBLE_EQ(t4->pricePerHourUsd, 0.11);
  EXPECT_EQ(t4->smCount, 40);
  EXPECT_DOUBLE_EQ(t4->fp16Tflops, 65);
  const DeviceSpec* mine = db.find("labcard");
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->id, "MyCard");
  EXPECT_EQ(mine->limits.sharedMemoryPerSmBytes, 167936) << "limits come from the CC 8.0 table";
  EXPECT_EQ(db.all().size(), 26u);
}

TEST(GpuDatabase, NewGpuOfUnknownArchitectureNeedsLimits) {
  TempFile user("wavecast_gpus_", R"({"gpus": [{"id": "B200", "name": "NVIDIA B200", "compute_capability": "10.0",
     "sms": 148, "boost_clock_mhz": 1965, "memory_gib": 180, "memory_bandwidth_gbs": 8000,
     "l2_cache_mib": 126, "peak_tflops": {"fp32": 80, "tf32": 1100, "fp16": 2250, "bf16": 2250},
     "price_per_hour_usd": 6}]})");
  GpuDatabase db = shipped();
  try {
    db.mergeFile(user.path());
    FAIL() << "accepted a GPU without per-SM limits";
  } catch (const GpuDatabaseError& e) {
    EXPECT_NE(std::string(e.what()).find("no sm_limits_by_compute_capability table for 10.0"),
              std::string::npos)
        << e.what();
  }
}

TEST(GpuDatabase, EachGpuCrossesItsHostLink) {
  const GpuDatabase db = shipped();
  EXPECT_EQ(db.find("H100-SXM")->hostLink.name, "PCIe 5.0 x16");
  EXPECT_DOUBLE_EQ(db.find("H200")->hostLink.hostToDeviceGBs, 57.1);
  EXPECT_DOUBLE_EQ(db.find("H200")->hostLink.deviceToHostGBs, 52.8);
  EXPECT_EQ(db.find("A100-SXM4-80GB")->hostLink.id, "pcie4");
  EXPECT_EQ(db.find("T4")->hostLink.id, "pcie3");
  for (const auto& gpu : db.all()) {
    EXPECT_GT(gpu.hostLink.hostToDeviceGBs, 0) << gpu.id;
    EXPECT_GT(gpu.hostLink.deviceToHostGBs, 0) << gpu.id;
    EXPECT_FALSE(gpu.hostLink.source.empty()) << gpu.id;
  }
  // A user's GPU that names none gets PCIe 4.0; one that names an unknown link is refused.
  TempFile user("wavecast_gpus_", R"({"gpus": [
    {"id": "MyCard", "name": "Lab card", "compute_capability": "8.0",
     "sms": 100, "boost_clock_mhz": 1400, "memory_gib": 48, "memory_bandwidth_gbs": 1800,
     "l2_cache_mib": 40, "peak_tflops": {"fp32": 18, "tf32": 140, "fp16": 280, "bf16": 280},
     "price_per_hour_usd": 0.9}]})");
  GpuDatabase mine = shipped();
  mine.mergeFile(user.path());
  EXPECT_EQ(mine.find("MyCard")->hostLink.id, "pcie4");
  // A user's link measured one way only is taken as that fast both ways.
  TempFile oneWay("wavecast_gpus_", R"({"host_links": {"lab": {"name": "PCIe 4.0 x8",
    "host_to_device_gbs": 12.5}}, "gpus": [{"id": "MyCard", "host_link": "lab"}]})");
  mine.mergeFile(oneWay.path());
  EXPECT_DOUBLE_EQ(mine.find("MyCard")->hostLink.deviceToHostGBs, 12.5);
  TempFile unknown("wavecast_gpus_", R"({"gpus": [{"id": "T4", "host_link": "pcie9"}]})");
  try {
    mine.mergeFile(unknown.path());
    FAIL() << "accepted an unknown host link";
  } catch (const GpuDatabaseError& e) {
    EXPECT_NE(
        std::string(e.what()).find("GPU 'T4': field 'host_link': no host_links entry \"pcie9\""),
        std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace wavecast
