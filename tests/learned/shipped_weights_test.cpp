#include "wavecast/learned/learned_models.h"

#include <cmath>
#include <gtest/gtest.h>

namespace wavecast::learned {
namespace {

const std::string kWeights = WAVECAST_SOURCE_ROOT_DIR "/data/weights";

// Spec sheets as in NeuSight's device_configs (the training GPUs' source).
GpuFeatures v100() {
  return {80, 1380, 14130, 900, 6};
}
GpuFeatures t4() {
  return {40, 1590, 8141, 320, 4};
}
// Never trained on: predicted from its specs alone.
GpuFeatures h100() {
  return {132, 1980, 66908, 3430, 50};
}

TEST(ShippedWeights, CoverEveryFamilyAndTrainedOnTheFiveGpus) {
  const LearnedModels models = LearnedModels::open(kWeights);
  for (KernelFamily f : allKernelFamilies())
    EXPECT_TRUE(models.covers(f)) << toString(f);
  EXPECT_EQ(models.trainingGpus(),
            (std::vector<std::string>{"NVIDIA_A100-PCIE-40GB", "NVIDIA_A100_80GB_PCIe",
                                      "Tesla_P100-PCIE-16GB", "Tesla_P4", "Tesla_T4",
                                      "Tesla_V100-PCIE-32GB"}));
}

TEST(ShippedWeights, MissingFolderSaysHowToTrain) {
  try {
    LearnedModels::open("/nonexistent/weights");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("wavecast train"), std::string::npos);
  }
}

} // namespace
} // namespace wavecast::learned
