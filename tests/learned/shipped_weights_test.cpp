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

// The figures docs/accuracy.md's shipped-weights section rests on; retraining
// data/weights changes them and must update these pins.
TEST(ShippedWeights, PinnedPredictions) {
  const LearnedModels models = LearnedModels::open(kWeights);
  const std::vector<KernelQuery> queries = {
      {KernelShape::linear(4096, 1024, 4096), v100()},
      {KernelShape::bmm(128, 512, 64, 512), t4()},
      {KernelShape::conv2d(32, 64, 64, 3, 56, 1, 1), v100()},
      {KernelShape::layerNorm(4096, 1024), v100()},
      {KernelShape::softmax(65536, 512), h100()},
      {KernelShape::elementwise(ElementwiseOp::Gelu, 4096, 4096), h100()},
  };
  const std::vector<double> expectedMs = {2.82273, 1.35524, 0.610959, 0.105749, 0.133865, 0.050156};
  const auto predicted = models.predictMs(queries);
  ASSERT_EQ(predicted.size(), expectedMs.size());
  for (size_t i = 0; i < predicted.size(); ++i) {
    ASSERT_TRUE(predicted[i].has_value()) << queries[i].shape.describe();
    EXPECT_NEAR(*predicted[i], expectedMs[i], 1e-3 * expectedMs[i])
        << queries[i].shape.describe() << " predicted " << *predicted[i];
    // Never faster than the roofline allows by more than caching could explain.
    EXPECT_GT(*predicted[i], 0.5 * rooflineCost(queries[i].shape, queries[i].gpu).boundMs());
  }
}

TEST(ShippedWeights, TinyTensorsAreTimedAtTheLaunchFloor) {
  const LearnedModels models = LearnedModels::open(kWeights);
  const auto times =
      models.predictMs({{KernelShape::elementwise(ElementwiseOp::MulScalar, 1, 1), v100()},
                        {KernelShape::elementwise(ElementwiseOp::MulScalar, 1, 4096), v100()},
                        {KernelShape::elementwise(ElementwiseOp::MulScalar, 64, 1024), v100()}});
  EXPECT_DOUBLE_EQ(*times[0], *times[1]);
  EXPECT_GT(*times[0], 0.005); // a launch costs microseconds, not nothing
  EXPECT_LE(*times[0], *times[2]);
}

} // namespace
} // namespace wavecast::learned
