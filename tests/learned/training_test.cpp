#include "wavecast/learned/kernel_dataset.h"
#include "wavecast/learned/learned_models.h"
#include "wavecast/learned/trainer.h"

#include <cmath>
#include <filesystem>
#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace wavecast::learned {
namespace {

const std::string kData = WAVECAST_SOURCE_ROOT_DIR "/../shared/data/neusight";
const std::string kGpus = WAVECAST_SOURCE_ROOT_DIR "/data/gpus.json";

std::string scratchDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("wavecast-learned-test-" + name);
  fs::remove_all(dir);
  return dir.string();
}

double mape(const std::vector<double>& predicted, const std::vector<KernelSample>& samples) {
  double sum = 0;
  for (size_t i = 0; i < samples.size(); ++i)
    sum += std::abs(predicted[i] - samples[i].latencyMs) / samples[i].latencyMs;
  return 100.0 * sum / double(samples.size());
}

class Training : public ::testing::Test {
protected:
  void SetUp() override {
    if (!fs::is_directory(kData + "/kernels"))
      GTEST_SKIP() << "NeuSight data not found at " << kData;
  }
};

TEST_F(Training, ReducedRunLearnsAndBeatsAConstantUtilisation) {
  TrainOptions options;
  options.dataDir = kData;
  options.gpuDatabase = kGpus;
  options.outDir = scratchDir("reduced");
  options.families = {KernelFamily::Linear, KernelFamily::LayerNorm};
  options.epochs = 8;
  options.maxRowsPerFile = 400;
  options.excludeGpus = {"Tesla_T4"};
  const TrainReport report = trainLearnedModels(options);
  ASSERT_EQ(report.families.size(), 2u);
  for (const FamilyTrainReport& f : report.families) {
    EXPECT_EQ(f.samples, 4 * 400) << toString(f.family);
    EXPECT_LT(f.finalLoss, 0.5 * f.firstEpochLoss) << toString(f.family);
  }
  EXPECT_EQ(report.trainingGpus.size(), 4u);

  // The trivial baseline: one utilisation per family (the training rows' geometric mean).
  KernelDatasetOptions trainRows;
  trainRows.families = options.families;
  trainRows.excludeGpus = options.excludeGpus;
  trainRows.maxRowsPerFile = options.maxRowsPerFile;
  trainRows.seed = options.seed;
  trainRows.gpuDatabase = kGpus;
  const KernelDataset train = loadKernelDataset(kData, trainRows);
  std::map<KernelFamily, std::pair<double, int>> logRatio;
  for (const KernelSample& s : train.samples) {
    logRatio[s.shape.family].first +=
        std::log(s.latencyMs / rooflineCost(s.shape, train.gpus.at(s.gpu)).boundMs());
    logRatio[s.shape.family].second += 1;
  }

  // Judged on the GPU the run never saw.
  KernelDatasetOptions heldOut;
  heldOut.families = options.families;
  heldOut.gpuDatabase = kGpus;
  heldOut.onlyGpus = {"Tesla_T4"};
  heldOut.maxRowsPerFile = 500;
  const KernelDataset test = loadKernelDataset(kData, heldOut);
  const LearnedModels models = LearnedModels::open(options.outDir);
  std::vector<KernelQuery> queries;
  std::vector<double> baseline;
  for (const KernelSample& s : test.samples) {
    const GpuFeatures& gpu = test.gpus.at(s.gpu);
    queries.push_back({s.shape, gpu});
    const auto& [sum, count] = logRatio.at(s.shape.family);
    baseline.push_back(rooflineCost(s.shape, gpu).boundMs() * std::exp(sum / count));
  }
  std::vector<double> predicted;
  for (const auto& answer : models.predictMs(queries))
    predicted.push_back(answer.value());
  EXPECT_LT(mape(predicted, test.samples), 0.8 * mape(baseline, test.samples));

  // The timing floor is the fastest row the family trained on.
  for (KernelFamily family : options.families) {
    double fastest = 0;
    for (const KernelSample& s : train.samples)
      if (s.shape.family == family)
        fastest = fastest == 0 ? s.latencyMs : std::min(fastest, s.latencyMs);
    EXPECT_GT(fastest, 0) << toString(family);
    EXPECT_DOUBLE_EQ(models.timingFloorMs(family), fastest) << toString(family);
  }
}

TEST_F(Training, SameSeedGivesTheSameModel) {
  TrainOptions options;
  options.dataDir = kData;
  options.gpuDatabase = kGpus;
  options.families = {KernelFamily::Softmax};
  options.epochs = 2;
  options.maxRowsPerFile = 200;
  const std::string first = scratchDir("seed-a");
  const std::string second = scratchDir("seed-b");
  options.outDir = first;
  trainLearnedModels(options);
  options.outDir = second;
  trainLearnedModels(options);
  GpuFeatures gpu;
  gpu.smCount = 80;
  gpu.clockMHz = 1380;
  gpu.fp32Gflops = 14130;
  gpu.memoryBandwidthGBs = 900;
  gpu.l2CacheMiB = 6;
  const std::vector<KernelQuery> queries = {{KernelShape::softmax(4096, 512), gpu},
                                            {KernelShape::softmax(64, 30000), gpu}};
  const auto a = LearnedModels::open(first).predictMs(queries);
  const auto b = LearnedModels::open(second).predictMs(queries);
  ASSERT_TRUE(a[0] && b[0]);
  EXPECT_EQ(*a[0], *b[0]);
  EXPECT_EQ(*a[1], *b[1]);
}

// An ensemble's answer is the geometric mean of its members' answers, and its
// first member is the network a one-network run with the same seed trains.
TEST_F(Training, EnsembleAveragesItsMembersInLogSpace) {
  TrainOptions options;
  options.dataDir = kData;
  options.gpuDatabase = kGpus;
  options.families = {KernelFamily::Softmax};
  options.epochs = 2;
  options.maxRowsPerFile = 200;
  const std::string ensemble = scratchDir("ensemble");
  options.outDir = ensemble;
  options.ensembleSize = 2;
  trainLearnedModels(options);
  EXPECT_TRUE(fs::exists(fs::path(ensemble) / "softmax.0.json"));
  ASSERT_TRUE(fs::exists(fs::path(ensemble) / "softmax.1.json"));

  const std::string single = scratchDir("ensemble-single");
  options.outDir = single;
  options.ensembleSize = 1;
  trainLearnedModels(options);
  // The second member on its own: a one-network folder holding its file.
  const std::string second = scratchDir("ensemble-second");
  fs::create_directories(second);
  fs::copy_file(fs::path(ensemble) / "softmax.1.json", fs::path(second) / "softmax.0.json");
  fs::copy_file(fs::path(single) / "manifest.json", fs::path(second) / "manifest.json");

  const GpuFeatures gpu{80, 1380, 14130, 900, 6};
  const std::vector<KernelQuery> queries = {{KernelShape::softmax(4096, 512), gpu}};
  const double both = *LearnedModels::open(ensemble).predictMs(queries)[0];
  const double first = *LearnedModels::open(single).predictMs(queries)[0];
  const double other = *LearnedModels::open(second).predictMs(queries)[0];
  EXPECT_NE(first, other);
  EXPECT_NEAR(both, std::sqrt(first * other), 1e-5 * both);
}

TEST(TrainingErrors, MissingDataIsNamed) {
  TrainOptions options;
  options.dataDir = "/nonexistent/neusight";
  options.outDir = scratchDir("missing");
  try {
    trainLearnedModels(options);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/neusight"), std::string::npos);
  }
}

} // namespace
} // namespace wavecast::learned
