#include "wavecast/learned/learned_models.h"
#include "wavecast/learned/learned_op_time_model.h"
#include "wavecast/predictor/gpu_database.h"

#include <cmath>
#include <gtest/gtest.h>
#include <iomanip>

namespace wavecast::learned {
namespace {

const std::string kWeights = WAVECAST_SOURCE_ROOT_DIR "/data/weights";

// Spec sheets from the GPU database, as predicting (and training) uses them.
GpuFeatures gpu(const std::string& name) {
  static const GpuDatabase database =
      GpuDatabase::fromFile(WAVECAST_SOURCE_ROOT_DIR "/data/gpus.json");
  const DeviceSpec* spec = database.find(name);
  if (!spec)
    throw std::runtime_error("no GPU " + name + " in data/gpus.json");
  return GpuFeatures::fromDeviceSpec(*spec);
}
GpuFeatures v100() {
  return gpu("V100-PCIE-32GB");
}
GpuFeatures t4() {
  return gpu("T4");
}
// Never trained on: predicted from its specs alone.
GpuFeatures h100() {
  return gpu("H100-SXM");
}

// Five GPU models, six cards: NeuSight measured the A100 as a 40 GB and an 80 GB PCIe card.
TEST(ShippedWeights, CoverEveryFamilyAndTrainedOnTheSixNeuSightCards) {
  const LearnedModels models = LearnedModels::open(kWeights);
  for (KernelFamily f : allKernelFamilies())
    EXPECT_TRUE(models.covers(f)) << toString(f);
  EXPECT_EQ(models.trainingGpus(),
            (std::vector<std::string>{"NVIDIA_A100-PCIE-40GB", "NVIDIA_A100_80GB_PCIe",
                                      "Tesla_P100-PCIE-16GB", "Tesla_P4", "Tesla_T4",
                                      "Tesla_V100-PCIE-32GB"}));
}

TEST(ShippedWeights, KnowWhichGpusTheyWereMeasuredOn) {
  const auto model = LearnedOpTimeModel::open(kWeights);
  const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_SOURCE_ROOT_DIR "/data/gpus.json");
  for (const char* id : {"T4", "P4", "V100-PCIE-32GB", "A100-PCIE-40GB", "A100-PCIE-80GB"})
    EXPECT_TRUE(model->measuredOn(*database.find(id))) << id;
  for (const char* id : {"H100-SXM", "L4", "V100-SXM2-16GB", "A100-SXM4-40GB"})
    EXPECT_FALSE(model->measuredOn(*database.find(id))) << id;
}

// NeuSight timed each op with CUDA events: no row is faster than a launch and the
// timer, tens of microseconds on every GPU it measured.
TEST(ShippedWeights, RecordTheirLabelsTimingFloor) {
  const LearnedModels models = LearnedModels::open(kWeights);
  for (KernelFamily family : allKernelFamilies()) {
    EXPECT_GT(models.timingFloorMs(family), 0.015) << toString(family);
    EXPECT_LT(models.timingFloorMs(family), 0.1) << toString(family);
  }
}

// The predictor wants kernel time: a kernel bounded below the floor goes to the
// analytic model, a large one to the networks.
TEST(ShippedWeights, OpTimeModelLeavesKernelsBelowTheTimingFloorToTheRoofline) {
  const auto model = LearnedOpTimeModel::open(kWeights);
  const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_SOURCE_ROOT_DIR "/data/gpus.json");
  const DeviceSpec& h100 = *database.find("H100-SXM");
  const auto add = [](int64_t rows, int64_t cols) {
    OpRecord op;
    op.name = "aten::add";
    TensorMeta t;
    t.shape = {rows, cols};
    op.inputs = {t, t};
    op.outputs = {t};
    return op;
  };
  const OpRecord small = add(64, 1024);   // 0.75 MB: well under a microsecond of DRAM time
  const OpRecord large = add(8192, 8192); // 805 MB: a quarter of a millisecond
  const auto answers = model->predictMs({{&small, &h100}, {&large, &h100}});
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_FALSE(answers[0].has_value());
  ASSERT_TRUE(answers[1].has_value());
  EXPECT_GT(*answers[1], 0.2);
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
  const std::vector<double> expectedMs = {2.85759,  1.35999,  0.639818,
                                          0.106518, 0.143314, 0.0515876};
  const auto predicted = models.predictMs(queries);
  ASSERT_EQ(predicted.size(), expectedMs.size());
  for (size_t i = 0; i < predicted.size(); ++i) {
    ASSERT_TRUE(predicted[i].has_value()) << queries[i].shape.describe();
    EXPECT_NEAR(*predicted[i], expectedMs[i], 1e-3 * expectedMs[i])
        << queries[i].shape.describe() << " predicted " << std::setprecision(6) << *predicted[i];
    // Never faster than the roofline allows by more than caching could explain.
    EXPECT_GT(*predicted[i], 0.5 * rooflineCost(queries[i].shape, queries[i].gpu).boundMs());
  }
}

TEST(ShippedWeights, ARepeatedKernelInABatchGetsTheAnswerItGetsAlone) {
  // Repeated layers ask for one kernel many times; each distinct one runs once.
  const LearnedModels models = LearnedModels::open(kWeights);
  const KernelQuery linear{KernelShape::linear(4096, 1024, 4096), h100()};
  const KernelQuery norm{KernelShape::layerNorm(4096, 1024), h100()};
  const KernelQuery otherGpu{KernelShape::linear(4096, 1024, 4096), t4()};
  const auto batch = models.predictMs({linear, norm, linear, otherGpu, linear, norm});
  const auto alone = models.predictMs({linear});
  const auto normAlone = models.predictMs({norm});
  const auto otherAlone = models.predictMs({otherGpu});
  ASSERT_EQ(batch.size(), 6u);
  for (size_t i : {0, 2, 4})
    EXPECT_EQ(*batch[i], *alone[0]);
  EXPECT_EQ(*batch[1], *normAlone[0]);
  EXPECT_EQ(*batch[5], *normAlone[0]);
  EXPECT_EQ(*batch[3], *otherAlone[0]);
  EXPECT_NE(*batch[3], *batch[0]);
}

TEST(ShippedWeights, BeyondTheTrainingRangeTheUtilisationStaysAtItsEdge) {
  // Far larger than any measured layer norm (rows a multiple of the SMs, so every
  // wave is full): the inputs are held at the training range, the utilisation no
  // longer changes, and the time grows exactly with the bytes.
  const LearnedModels models = LearnedModels::open(kWeights);
  const int64_t rows = int64_t(h100().smCount) << 22;
  const auto times = models.predictMs({{KernelShape::layerNorm(rows, 1024), h100()},
                                       {KernelShape::layerNorm(8 * rows, 1024), h100()}});
  EXPECT_NEAR(*times[1] / *times[0], 8.0, 1e-6);
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
