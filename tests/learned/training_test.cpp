#include "wavecast/learned/kernel_dataset.h"
#include "wavecast/learned/learned_models.h"
#include "wavecast/learned/trainer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
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

// A calibration file's entries as `wavecast calibrate` writes them (docs/calibration.md).
std::string calibrationFile(const std::string& name, const std::string& gpu) {
  const auto tensor = [](const std::string& shape, const std::string& dtype) {
    return "{\"shape\": " + shape + ", \"dtype\": \"" + dtype + "\", \"contiguous\": true}";
  };
  const auto mm = [&](const std::string& dtype, bool tf32, double ms) {
    return "{\"name\": \"aten::mm\", \"phase\": \"forward\", \"inputs\": [" +
           tensor("[1024, 768]", dtype) + ", " + tensor("[768, 3072]", dtype) +
           "], \"outputs\": [" + tensor("[1024, 3072]", dtype) +
           "], \"args\": {}, \"precision\": \"" +
           (dtype == "float32" ? tf32 ? "tf32" : "fp32" : "bf16") +
           "\", \"tf32\": " + (tf32 ? "true" : "false") + ", \"median_ms\": " + std::to_string(ms) +
           ", \"repeats\": 10}";
  };
  const std::string add = "{\"name\": \"aten::add\", \"phase\": \"forward\", \"inputs\": [" +
                          tensor("[8192, 768]", "float32") + ", " +
                          tensor("[8192, 768]", "float32") + "], \"outputs\": [" +
                          tensor("[8192, 768]", "float32") +
                          "], \"args\": {\"alpha\": 1}, \"precision\": \"fp32\", \"median_ms\": "
                          "0.08, \"repeats\": 10}";
  const std::string cat = "{\"name\": \"aten::cat\", \"phase\": \"forward\", \"inputs\": [" +
                          tensor("[64, 768]", "float32") + "], \"outputs\": [" +
                          tensor("[64, 768]", "float32") +
                          "], \"args\": {}, \"precision\": \"fp32\", \"median_ms\": 0.01, "
                          "\"repeats\": 10}";
  const fs::path path = fs::path(scratchDir(name)) / "calibration.json";
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "{\"format\": \"wavecast-calibration\", \"version\": 1, \"complete\": "
                         "true, \"date\": \"2026-11-25T12:00:00Z\", \"gpu\": {\"name\": \"" +
                             gpu +
                             "\", \"compute_capability\": \"9.0\", \"sm_count\": 132, "
                             "\"memory_bytes\": 85520809984}, \"driver\": \"550\", \"torch\": "
                             "\"2.11.0\", \"cuda\": \"13.0\", \"timer\": \"cuda_events\", "
                             "\"entries\": [" +
                             mm("float32", false, 0.21) + ", " + mm("float32", true, 0.05) + ", " +
                             mm("bfloat16", false, 0.03) + ", " + add + ", " + cat + "]}";
  return path.string();
}

TEST(CalibrationSamples, Fp32OpsTrainAsTheirGpusMeasurements) {
  const GpuDatabase database = GpuDatabase::fromFile(kGpus);
  KernelDataset data;
  const CalibrationSamples added = addCalibrationSamples(
      data, calibrationFile("calibration", "NVIDIA H100 80GB HBM3"), database, allKernelFamilies());
  // The FP32 mm and the add; TF32, bf16 and the cat (no learned model) are left out.
  EXPECT_EQ(added.gpu, "H100-SXM");
  EXPECT_EQ(added.samples, 2);
  EXPECT_EQ(added.skipped, 3);
  ASSERT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.samples[0].shape.family, KernelFamily::Linear);
  EXPECT_EQ(data.samples[0].shape.m, 1024);
  EXPECT_EQ(data.samples[0].gpu, "H100-SXM");
  EXPECT_DOUBLE_EQ(data.samples[0].latencyMs, 0.21);
  EXPECT_EQ(data.samples[1].shape.family, KernelFamily::Elementwise);
  EXPECT_EQ(data.samples[1].shape.op, ElementwiseOp::Add);
  EXPECT_DOUBLE_EQ(data.samples[1].latencyMs, 0.08);
  // The GPU's spec sheet comes from the database, as for NeuSight's GPUs.
  ASSERT_EQ(data.gpus.count("H100-SXM"), 1u);
  EXPECT_EQ(data.gpus.at("H100-SXM").smCount, 132);

  // Only the families being trained take entries.
  KernelDataset linearOnly;
  EXPECT_EQ(addCalibrationSamples(linearOnly,
                                  calibrationFile("calibration-linear", "NVIDIA H100 80GB HBM3"),
                                  database, {KernelFamily::Linear})
                .samples,
            1);
}

TEST(CalibrationSamples, AGpuTheDatabaseDoesNotKnowIsNamed) {
  const GpuDatabase database = GpuDatabase::fromFile(kGpus);
  KernelDataset data;
  const std::string file = calibrationFile("calibration-unknown", "NVIDIA Imaginary 9000");
  try {
    addCalibrationSamples(data, file, database, allKernelFamilies());
    FAIL() << "an unknown GPU's calibration was added";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("NVIDIA Imaginary 9000"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(data.samples.empty());
}

} // namespace
} // namespace wavecast::learned
