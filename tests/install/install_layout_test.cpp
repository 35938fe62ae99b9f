// InstallLayout::resolve on made-up installations and build trees.
#include "install_layout.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iostream>
#include <map>
#include <string>

namespace wavecast {
namespace {

namespace fs = std::filesystem;

class InstallLayoutTest : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/wavecast-layout-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root = pattern;
  }
  void TearDown() override { fs::remove_all(root); }

  InstallLayout resolve(const fs::path& bin) {
    return InstallLayout::resolve(bin.string(), [this](const char* name) {
      const auto found = environment.find(name);
      return found == environment.end() ? std::string() : found->second;
    });
  }

  fs::path root;
  std::map<std::string, std::string> environment;
};

TEST_F(InstallLayoutTest, InstalledLayoutIsFoundFromBin) {
  const fs::path prefix = root / "opt/wavecast";
  fs::create_directories(prefix / "bin");
  fs::create_directories(prefix / "share/wavecast/data");
  const InstallLayout layout = resolve(prefix / "bin");
  EXPECT_TRUE(layout.installed);
  EXPECT_EQ(layout.dataDir, (prefix / "share/wavecast/data").string());
  EXPECT_EQ(layout.gpuDatabasePath(), (prefix / "share/wavecast/data/gpus.json").string());
  EXPECT_EQ(layout.pythonDir, (prefix / "share/wavecast/python").string());
  EXPECT_EQ(layout.workerPath, (prefix / "lib/wavecast/wavecast-worker").string());
  EXPECT_EQ(layout.learnPath, (prefix / "lib/wavecast/wavecast-learn").string());
  EXPECT_NE(layout.repairAdvice().find("reinstall"), std::string::npos);
}

TEST_F(InstallLayoutTest, BuildTreeUsesTheSourceTreeAndSiblingHelpers) {
  const fs::path bin = root / "build/bin";
  fs::create_directories(bin);
  const InstallLayout layout = resolve(bin);
  EXPECT_FALSE(layout.installed);
  EXPECT_EQ(layout.dataDir, std::string(WAVECAST_SOURCE_ROOT) + "/data");
  EXPECT_EQ(layout.pythonDir, std::string(WAVECAST_SOURCE_ROOT) + "/profiler/python");
  EXPECT_EQ(layout.workerPath, (bin / "wavecast-worker").string());
  EXPECT_EQ(layout.learnPath, (bin / "wavecast-learn").string());
  EXPECT_NE(layout.repairAdvice().find("rebuild"), std::string::npos);
}

TEST_F(InstallLayoutTest, DefaultPythonEnvironmentIsTheConfiguredVenvWhenItExists) {
  fs::create_directories(root / "bin");
  const fs::path configured = WAVECAST_CONFIGURED_PYTHON_ENV;
  const bool exists = fs::exists(configured / "pyvenv.cfg");
  std::cout << "configured venv " << configured << (exists ? " exists\n" : " does not exist\n");
  const InstallLayout layout = resolve(root / "bin");
  EXPECT_EQ(layout.pythonEnv, exists ? configured.string() : std::string());
  EXPECT_EQ(layout.missingPythonEnv, exists ? std::string() : configured.string());
}

TEST_F(InstallLayoutTest, EnvironmentOverridesEachPart) {
  fs::create_directories(root / "bin");
  environment = {{"WAVECAST_DATA_DIR", "/d"},
                 {"WAVECAST_WORKER", "/w"},
                 {"WAVECAST_PYTHON_DIR", "/p"},
                 {"WAVECAST_PYTHON_ENV", "/venv"},
                 {"WAVECAST_GPU_FILE", "/mine.json"}};
  const InstallLayout layout = resolve(root / "bin");
  EXPECT_EQ(layout.dataDir, "/d");
  EXPECT_EQ(layout.workerPath, "/w");
  EXPECT_EQ(layout.pythonDir, "/p");
  EXPECT_EQ(layout.pythonEnv, "/venv");
  EXPECT_EQ(layout.userGpuFile, "/mine.json");

  EXPECT_EQ(layout.missingPythonEnv, "");

  environment = {{"WAVECAST_PYTHON_ENV", "system"}};
  EXPECT_EQ(resolve(root / "bin").pythonEnv, "system");
}

TEST_F(InstallLayoutTest, UserGpuFileFollowsXdgConfigHome) {
  fs::create_directories(root / "bin");
  environment = {{"HOME", "/home/me"}};
  EXPECT_EQ(resolve(root / "bin").userGpuFile, "/home/me/.config/wavecast/gpus.json");
  environment["XDG_CONFIG_HOME"] = "/cfg";
  EXPECT_EQ(resolve(root / "bin").userGpuFile, "/cfg/wavecast/gpus.json");
  environment.clear();
  EXPECT_EQ(resolve(root / "bin").userGpuFile, "");
}

TEST_F(InstallLayoutTest, CalibrationFilesLiveBesideTheUsersGpuFile) {
  fs::create_directories(root / "bin");
  environment = {{"HOME", "/home/me"}};
  EXPECT_EQ(resolve(root / "bin").userCalibrationDir, "/home/me/.config/wavecast/calibration");
  environment["XDG_CONFIG_HOME"] = "/cfg";
  EXPECT_EQ(resolve(root / "bin").userCalibrationDir, "/cfg/wavecast/calibration");
  environment["WAVECAST_CALIBRATION_DIR"] = "/mine";
  const InstallLayout layout = resolve(root / "bin");
  EXPECT_EQ(layout.userCalibrationDir, "/mine");
  EXPECT_EQ(layout.calibrationDir(), layout.dataDir + "/calibration");
  environment.clear();
  EXPECT_EQ(resolve(root / "bin").userCalibrationDir, "");
}

TEST_F(InstallLayoutTest, TracesAreStoredInTheUsersCacheFolder) {
  fs::create_directories(root / "bin");
  environment = {{"HOME", "/home/me"}};
  EXPECT_EQ(resolve(root / "bin").userTraceStoreDir, "/home/me/.cache/wavecast/traces");
  environment["XDG_CACHE_HOME"] = "/cache";
  EXPECT_EQ(resolve(root / "bin").userTraceStoreDir, "/cache/wavecast/traces");
  environment["WAVECAST_TRACE_STORE"] = kNoTraceStore;
  EXPECT_EQ(resolve(root / "bin").userTraceStoreDir, kNoTraceStore);
  environment.clear();
  EXPECT_EQ(resolve(root / "bin").userTraceStoreDir, kNoTraceStore) << "no home: no store";
}

} // namespace
} // namespace wavecast

namespace wavecast {
namespace {

TEST_F(InstallLayoutTest, UserSystemFileSitsBesideTheGpuFile) {
  fs::create_directories(root / "bin");
  environment = {{"HOME", "/home/me"}};
  EXPECT_EQ(resolve(root / "bin").userSystemFile, "/home/me/.config/wavecast/systems.json");
  environment["XDG_CONFIG_HOME"] = "/cfg";
  EXPECT_EQ(resolve(root / "bin").userSystemFile, "/cfg/wavecast/systems.json");
  environment["WAVECAST_SYSTEM_FILE"] = "/ours.json";
  EXPECT_EQ(resolve(root / "bin").userSystemFile, "/ours.json");
  environment.clear();
  EXPECT_EQ(resolve(root / "bin").userSystemFile, "");
}

} // namespace
} // namespace wavecast
