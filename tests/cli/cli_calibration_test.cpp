// Calibrations in the CLI: predictions that take a calibration file's measured times,
// and `wavecast calibrate` on a machine without a GPU.
#include "cli_expectations.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

namespace {

// No GPU here: calibrate runs the suite in the python environment wavecast was built
// with, whose torch sees none, and says so in one line without writing a file.
TEST(CliTest, CalibrateWithoutAGpuIsOneClearMessage) {
  const std::string out = testing::TempDir() + "/calibration_without_gpu.json";
  std::remove(out.c_str());
  const CliRun run = wavecast("calibrate --quick --out " + out);
  if (run.status == 0)
    GTEST_SKIP() << "this machine has a GPU: the no-GPU message cannot be checked";
  expectOneLineError(run, "wavecast: error: no CUDA GPU visible to torch");
  EXPECT_TRUE(contains(run.err, "NVIDIA GPU")) << "the hint says what is needed: " << run.err;
  EXPECT_EQ(run.status, 1);
  EXPECT_FALSE(std::filesystem::exists(out));
}

// A one-op trace whose op is the fixture's F.linear forward (written by the suite's fake
// timer): on the H100 it takes the file's time, 2 us + 1 ns per element of its tensors.
TEST(CliTest, PredictTakesACalibratedGpusMeasuredTimes) {
  const std::string calibration =
      std::string(WAVECAST_SOURCE_ROOT) + "/tests/predictor/fixtures/calibration_fake.json";
  const auto tensor = [](std::vector<int64_t> shape, bool contiguous = true) {
    return nlohmann::json{{"shape", shape}, {"dtype", "float32"}, {"contiguous", contiguous}};
  };
  nlohmann::json trace = {
      {"format", "wavecast-trace"},
      {"version", 2},
      {"mode", "shape"},
      {"batch_size", 8},
      {"ops",
       {{{"id", 0},
         {"name", "aten::addmm"},
         {"phase", "forward"},
         {"inputs", {tensor({768}), tensor({8192, 768}), tensor({768, 768}, false)}},
         {"outputs", {tensor({8192, 768})}},
         {"args", {{"beta", 1}, {"alpha", 1}}},
         {"loc", {{"file", "/p/model.py"}, {"line", 3}, {"function", "forward"}}}}}}};
  const std::string tracePath = testing::TempDir() + "/calibrated_linear_trace.json";
  std::ofstream(tracePath) << trace.dump();
  const std::string noUserFiles = "WAVECAST_CALIBRATION_DIR=/nonexistent";
  const CliRun run = wavecast("predict " + tracePath + " --gpu H100,T4 --roofline --json " +
                                  "--calibration " + calibration,
                              noUserFiles);
  ASSERT_EQ(run.status, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  EXPECT_EQ(doc["summaries"][0]["method"], "calibrated on NVIDIA H100 80GB HBM3");
  EXPECT_EQ(doc["summaries"][1]["method"], "analytic roofline");
  const double expected = 0.002 + (768 + 2 * 6291456 + 589824) * 1e-6;
  EXPECT_NEAR(doc["summaries"][0]["gpu_ms"].get<double>(), expected, 1e-9);

  const CliRun table = wavecast("predict " + tracePath + " --gpu H100,T4 --roofline " +
                                    "--calibration " + calibration,
                                noUserFiles);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_TRUE(contains(table.out, "H100-SXM: calibrated on NVIDIA H100 80GB HBM3; T4: analytic "
                                  "roofline"))
      << table.out;
  EXPECT_TRUE(contains(table.out, "  calibrated on NVIDIA H100 80GB HBM3\n"))
      << "the summary row says it: " << table.out;

  // --no-calibration: the models alone, as for a GPU no one calibrated, though the user's
  // folder holds the H100's file; naming a file too contradicts it.
  const std::string userFolder = testing::TempDir() + "/user_calibrations";
  std::filesystem::create_directories(userFolder);
  std::filesystem::copy_file(calibration, userFolder + "/h100.json",
                             std::filesystem::copy_options::overwrite_existing);
  const auto methodOf = [&](const std::string& flags) {
    const CliRun run = wavecast("predict " + tracePath + " --gpu H100 --json" + flags,
                                "WAVECAST_CALIBRATION_DIR=" + userFolder);
    EXPECT_EQ(run.status, 0) << run.err;
    return nlohmann::json::parse(run.out)["summaries"][0]["method"].get<std::string>();
  };
  EXPECT_EQ(methodOf(""), "calibrated on NVIDIA H100 80GB HBM3");
  EXPECT_EQ(methodOf(" --no-calibration"), "learned per-op model");
  expectOneLineError(wavecast("predict " + tracePath + " --gpu H100 --no-calibration " +
                              "--calibration " + calibration),
                     "--no-calibration reads no calibration file: drop --calibration " +
                         calibration + " or --no-calibration");
  std::filesystem::remove_all(userFolder);

  const std::string bad = testing::TempDir() + "/bad_calibration.json";
  std::ofstream(bad) << R"({"format": "wavecast-calibration", "version": 9})";
  expectOneLineError(
      wavecast("predict " + tracePath + " --gpu H100 --calibration " + bad, noUserFiles),
      "calibration file " + bad + ": \"version\" is 9");
  std::remove(bad.c_str());
  std::remove(tracePath.c_str());
}

} // namespace
