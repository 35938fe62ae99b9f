#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/system_database.h"
#include "temp_file.h"

#include <gtest/gtest.h>
#include <string>

namespace wavecast {
namespace {

SystemDatabase shipped() {
  return SystemDatabase::fromFile(WAVECAST_SYSTEMS_JSON);
}

std::string errorOf(const std::string& text) {
  const TempFile file("wavecast_systems_", text);
  try {
    SystemDatabase::fromFile(file.path());
  } catch (const SystemDatabaseError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(SystemDatabase, ShipsTheNodesTheIssueAsksFor) {
  const SystemDatabase db = shipped();
  for (const char* id : {"HGX-H100", "HGX-H200", "HGX-A100-40GB", "HGX-A100-80GB", "p4d.24xlarge",
                         "p4de.24xlarge", "p5.48xlarge", "a3-highgpu-8g", "a3-megagpu-8g",
                         "ND-H100-v5", "g6.48xlarge", "g5.48xlarge"}) {
    const SystemSpec* system = db.find(id);
    ASSERT_NE(system, nullptr) << id;
    EXPECT_EQ(system->id, id);
    EXPECT_FALSE(system->source.empty()) << id;
  }
}

TEST(SystemDatabase, EveryGpuIsInTheGpuDatabase) {
  const GpuDatabase gpus = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  const SystemDatabase systems = shipped();
  for (const SystemSpec& system : systems.all()) {
    const DeviceSpec* gpu = gpus.find(system.gpu);
    ASSERT_NE(gpu, nullptr) << system.id << ": " << system.gpu;
    EXPECT_EQ(gpu->id, system.gpu) << system.id;
  }
}

TEST(SystemDatabase, FiguresFromTheSpecSheets) {
  const SystemDatabase db = shipped();
  // DGX H100: 900 GB/s bidirectional NVLink per GPU, 8x 400 Gb/s ConnectX-7, NVLS.
  const SystemSpec& h100 = *db.find("DGX H100");
  EXPECT_EQ(h100.gpusPerNode, 8);
  EXPECT_EQ(h100.fabric, IntraNodeFabric::NvSwitch);
  EXPECT_DOUBLE_EQ(h100.intraNodeGBs, 450);
  EXPECT_TRUE(h100.nvls);
  EXPECT_EQ(h100.network, InterNodeNetwork::InfiniBand);
  EXPECT_DOUBLE_EQ(h100.interNodeGbpsPerGpu, 400);
  // p4d: 400 Gb/s of EFA for the node's 8 GPUs; NVSwitch 2 has no NVLS.
  const SystemSpec& p4d = *db.find("p4d");
  EXPECT_EQ(p4d.gpu, "A100-SXM4-40GB");
  EXPECT_DOUBLE_EQ(p4d.interNodeGbpsPerGpu, 400.0 / 8);
  EXPECT_FALSE(p4d.nvls);
  EXPECT_EQ(p4d.network, InterNodeNetwork::Efa);
  // p5: 3,200 Gb/s of EFA for 8 GPUs.
  EXPECT_DOUBLE_EQ(db.find("p5.48xlarge")->interNodeGbpsPerGpu, 3200.0 / 8);
  EXPECT_EQ(db.find("8x L4")->fabric, IntraNodeFabric::Pcie);
}

TEST(SystemDatabase, ForgivingFindAndSuggestions) {
  const SystemDatabase db = shipped();
  EXPECT_EQ(db.find("dgx_h100")->id, "HGX-H100");
  EXPECT_EQ(db.find("Standard_ND96isr_H100_v5")->id, "ND-H100-v5");
  EXPECT_EQ(db.find("p4de")->id, "p4de.24xlarge");
  EXPECT_EQ(db.find("nosuchbox"), nullptr);
  const auto close = db.suggestions("p5.48xl");
  ASSERT_FALSE(close.empty());
  EXPECT_EQ(close.front(), "p5.48xlarge");
}

TEST(SystemDatabase, DefaultForAGpuIsItsUsualNodeElseGenericPcie) {
  const SystemDatabase db = shipped();
  EXPECT_EQ(db.defaultFor("H100-SXM").id, "HGX-H100");
  EXPECT_EQ(db.defaultFor("A100-SXM4-80GB").id, "HGX-A100-80GB");
  EXPECT_EQ(db.defaultFor("L4").id, "g6.48xlarge");
  const SystemSpec t4 = db.defaultFor("T4");
  EXPECT_EQ(t4.gpu, "T4");
  EXPECT_EQ(t4.fabric, IntraNodeFabric::Pcie);
  EXPECT_EQ(t4.gpusPerNode, 8);
  EXPECT_DOUBLE_EQ(t4.intraNodeGBs, 32);
  EXPECT_FALSE(t4.nvls);
}

TEST(SystemDatabase, UserFileAddsAndOverrides) {
  SystemDatabase db = shipped();
  const TempFile user("wavecast_systems_", R"({"systems": [
    {"id": "p5.48xlarge", "price_per_hour_usd": 55.04},
    {"id": "lab-4x4090", "gpu": "RTX-4090", "gpus_per_node": 4, "fabric": "pcie",
     "intra_node_gbs": 32, "network": "none", "inter_node_gbps_per_gpu": 0,
     "source": "our lab"}]})");
  db.mergeFile(user.path());
  EXPECT_DOUBLE_EQ(db.find("p5")->pricePerHourUsd, 55.04);
  EXPECT_DOUBLE_EQ(db.find("p5")->interNodeGbpsPerGpu, 400); // untouched
  ASSERT_NE(db.find("lab-4x4090"), nullptr);
  EXPECT_EQ(db.find("lab-4x4090")->gpusPerNode, 4);
  EXPECT_EQ(db.defaultFor("RTX-4090").id, "lab-4x4090");
}

TEST(SystemDatabase, ErrorsNameFileEntryAndField) {
  const std::string missing =
      errorOf(R"({"systems": [{"id": "box", "gpu": "T4", "gpus_per_node": 8,
        "intra_node_gbs": 32, "network": "none", "inter_node_gbps_per_gpu": 0, "source": "x"}]})");
  EXPECT_NE(missing.find("system 'box'"), std::string::npos) << missing;
  EXPECT_NE(missing.find("field 'fabric'"), std::string::npos) << missing;
  EXPECT_NE(missing.find(".json"), std::string::npos) << missing;

  const std::string badFabric =
      errorOf(R"({"systems": [{"id": "box", "gpu": "T4", "gpus_per_node": 8, "fabric": "nvlink9",
        "intra_node_gbs": 32, "network": "none", "inter_node_gbps_per_gpu": 0, "source": "x"}]})");
  EXPECT_NE(badFabric.find("field 'fabric'"), std::string::npos) << badFabric;
  EXPECT_NE(badFabric.find("nvlink9"), std::string::npos) << badFabric;

  const std::string nvlsOnPcie =
      errorOf(R"({"systems": [{"id": "box", "gpu": "T4", "gpus_per_node": 8, "fabric": "pcie",
        "nvls": true, "intra_node_gbs": 32, "network": "none", "inter_node_gbps_per_gpu": 0,
        "source": "x"}]})");
  EXPECT_NE(nvlsOnPcie.find("field 'nvls'"), std::string::npos) << nvlsOnPcie;

  const std::string noNic =
      errorOf(R"({"systems": [{"id": "box", "gpu": "T4", "gpus_per_node": 8, "fabric": "pcie",
        "intra_node_gbs": 32, "network": "efa", "inter_node_gbps_per_gpu": 0, "source": "x"}]})");
  EXPECT_NE(noNic.find("field 'inter_node_gbps_per_gpu'"), std::string::npos) << noNic;
}

} // namespace
} // namespace wavecast
