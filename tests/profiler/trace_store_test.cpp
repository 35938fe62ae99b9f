#include "wavecast/profiler/trace_store.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace wavecast {
namespace {

namespace fs = std::filesystem;

class TraceStoreTest : public ::testing::Test {
protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("wavecast-trace-store-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "project");
    entry_ = (root_ / "project" / "train.py").string();
    helper_ = (root_ / "project" / "model.py").string();
    write(entry_, "import model\n");
    write(helper_, "def build(): pass\n");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
  // Two ops: one on a line of the entry, one called from the helper module.
  Trace trace() const {
    Trace t;
    t.torchVersion = "2.11.0";
    t.entryFile = entry_;
    t.batchSize = 8;
    OpRecord conv;
    conv.id = 0;
    conv.name = "aten::convolution";
    conv.loc = {entry_, 3, "forward"};
    OpRecord add = conv;
    add.id = 1;
    add.name = "aten::add_";
    add.loc = {helper_, 1, "build"};
    add.stack = {{entry_, 5, "iteration"}, {helper_, 1, "build"}};
    t.ops = {conv, add};
    return t;
  }
  TraceRequest request() const {
    TraceRequest r;
    r.file = entry_;
    r.batchSize = 8;
    return r;
  }
  fs::path folder() const { return root_ / "store"; }

  fs::path root_;
  std::string entry_, helper_;
};

TEST_F(TraceStoreTest, ATraceComesBackWhileItsFilesAreUnchanged) {
  TraceStore store(folder(), "1.0");
  const std::string key = TraceStore::key(request(), "/venv", "import model\n");
  EXPECT_FALSE(store.load(key)) << "nothing stored yet";
  const auto recorded = std::chrono::system_clock::time_point(std::chrono::seconds(1764190000));
  ASSERT_TRUE(store.save(key, trace(), entry_, "import model\n", recorded));

  EXPECT_EQ(fs::status(folder()).permissions() & fs::perms::all, fs::perms::owner_all)
      << "traces name the user's files: the folder is theirs alone";
  const auto stored = store.load(key);
  ASSERT_TRUE(stored);
  EXPECT_EQ(traceToJson(stored->trace), traceToJson(trace()));
  EXPECT_EQ(stored->recorded, recorded);

  write(helper_, "def build(): return 1\n"); // a module the iteration ran changed
  EXPECT_FALSE(store.load(key));
  write(helper_, "def build(): pass\n"); // and back: the entry was kept
  EXPECT_TRUE(store.load(key));
  fs::remove(helper_);
  EXPECT_FALSE(store.load(key));
}

TEST_F(TraceStoreTest, TheKeyNamesEverythingTheTraceDependsOn) {
  const std::string base = TraceStore::key(request(), "/venv", "import model\n");
  EXPECT_EQ(TraceStore::key(request(), "/venv", "import model\n"), base);
  EXPECT_NE(TraceStore::key(request(), "/venv", "import model  \n"), base);
  EXPECT_NE(TraceStore::key(request(), "/other-venv", "import model\n"), base);
  auto changed = [&](auto edit) {
    TraceRequest r = request();
    edit(r);
    return TraceStore::key(r, "/venv", "import model\n");
  };
  EXPECT_NE(changed([](TraceRequest& r) { r.batchSize.reset(); }), base);
  EXPECT_NE(changed([](TraceRequest& r) { r.mode = TraceMode::Cuda; }), base);
  EXPECT_NE(changed([](TraceRequest& r) { r.worldSize = 16; }), base);
  EXPECT_NE(changed([](TraceRequest& r) { r.scriptArgs = {"--lr", "0.1"}; }), base);
  EXPECT_NE(changed([](TraceRequest& r) { r.device = ScriptDevice{"NVIDIA L4", 1, 8, 9, 58, 0}; }),
            base);
  EXPECT_EQ(changed([](TraceRequest& r) { r.timeout = std::chrono::seconds(5); }), base)
      << "how long a trace may take does not change what it records";
}

TEST_F(TraceStoreTest, InstallingOrRemovingAPackageChangesTheKey) {
  const fs::path env = root_ / "venv";
  fs::create_directories(env / "lib" / "python3.11" / "site-packages");
  const fs::path site = env / "lib" / "python3.11" / "site-packages";
  const auto keyNow = [&](const std::string& given) {
    return TraceStore::key(request(), given, "import model\n");
  };
  fs::last_write_time(site, fs::file_time_type::clock::now() - std::chrono::hours(2));
  const std::string before = keyNow(env.string());
  EXPECT_EQ(keyNow(env.string()), before);
  EXPECT_NE(TraceStore::packagesStamp((env / "bin" / "python").string()), "")
      << "a venv named by its interpreter is stamped by the same folder";
  EXPECT_EQ(TraceStore::packagesStamp((env / "bin" / "python").string()),
            TraceStore::packagesStamp(env.string()));
  fs::create_directories(site / "torch-2.11.0.dist-info"); // pip installs a package
  EXPECT_NE(keyNow(env.string()), before);
}

TEST_F(TraceStoreTest, NothingIsStoredWhenTheEntryChangedDuringTheTrace) {
  TraceStore store(folder(), "1.0");
  const std::string key = TraceStore::key(request(), "/venv", "import model\n");
  write(entry_, "import model  # edited while tracing\n");
  EXPECT_FALSE(store.save(key, trace(), entry_, "import model\n"));
  EXPECT_FALSE(store.load(key));
}

TEST_F(TraceStoreTest, AnotherVersionsOrABrokenEntryIsDropped) {
  const std::string key = TraceStore::key(request(), "/venv", "import model\n");
  {
    TraceStore older(folder(), "0.9");
    ASSERT_TRUE(older.save(key, trace(), entry_, "import model\n"));
  }
  TraceStore store(folder(), "1.0");
  EXPECT_FALSE(store.load(key)) << "written by another wavecast, whose tracer may differ";
  EXPECT_TRUE(fs::is_empty(folder()));

  ASSERT_TRUE(store.save(key, trace(), entry_, "import model\n"));
  const fs::path file = fs::directory_iterator(folder())->path();
  write(file.string(), "{\"format\": \"wavecast-trace-store\", \"vers"); // torn
  EXPECT_FALSE(store.load(key));
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(TraceStoreTest, TheLeastRecentlyUsedEntriesGoBeyondTheCapacity) {
  TraceStore store(folder(), "1.0", TraceStoreLimits{2});
  std::vector<std::string> keys;
  for (int batch : {1, 2, 3}) {
    TraceRequest r = request();
    r.batchSize = batch;
    keys.push_back(TraceStore::key(r, "/venv", "import model\n"));
  }
  ASSERT_TRUE(store.save(keys[0], trace(), entry_, "import model\n"));
  ASSERT_TRUE(store.save(keys[1], trace(), entry_, "import model\n"));
  // Entry 0 is older on disk; loading it makes it the most recently used.
  for (const auto& item : fs::directory_iterator(folder()))
    fs::last_write_time(item.path(), fs::file_time_type::clock::now() - std::chrono::hours(1));
  ASSERT_TRUE(store.load(keys[0]));
  ASSERT_TRUE(store.save(keys[2], trace(), entry_, "import model\n"));
  EXPECT_TRUE(store.load(keys[0]));
  EXPECT_FALSE(store.load(keys[1]));
  EXPECT_TRUE(store.load(keys[2]));
}

TEST_F(TraceStoreTest, TheLeastRecentlyUsedEntriesGoBeyondTheBytes) {
  std::vector<std::string> keys;
  for (int batch : {1, 2, 3}) {
    TraceRequest r = request();
    r.batchSize = batch;
    keys.push_back(TraceStore::key(r, "/venv", "import model\n"));
  }
  uintmax_t one = 0;
  {
    TraceStore probe(root_ / "probe", "1.0");
    ASSERT_TRUE(probe.save(keys[0], trace(), entry_, "import model\n"));
    one = fs::file_size(fs::directory_iterator(root_ / "probe")->path());
  }
  TraceStore store(folder(), "1.0", TraceStoreLimits{128, 2 * one + one / 2});
  for (const auto& key : keys) {
    ASSERT_TRUE(store.save(key, trace(), entry_, "import model\n"));
    // Apart in time, so that the order of use is the order of saving.
    for (const auto& item : fs::directory_iterator(folder()))
      fs::last_write_time(item.path(), item.last_write_time() - std::chrono::minutes(1));
  }
  EXPECT_FALSE(store.load(keys[0])) << "two entries fit the bytes; the oldest went";
  EXPECT_TRUE(store.load(keys[1]));
  EXPECT_TRUE(store.load(keys[2]));

  TraceStore tiny(root_ / "tiny", "1.0", TraceStoreLimits{128, 1});
  ASSERT_TRUE(tiny.save(keys[0], trace(), entry_, "import model\n"));
  EXPECT_TRUE(tiny.load(keys[0])) << "the newest entry stays even when it alone is larger";
}

TEST_F(TraceStoreTest, SavesInTheBackgroundAreWrittenByFlushAndOnDestruction) {
  const std::string key = TraceStore::key(request(), "/venv", "import model\n");
  {
    TraceStore store(folder(), "1.0");
    store.saveLater(key, std::make_shared<const Trace>(trace()), entry_, "import model\n");
    store.flush();
    EXPECT_TRUE(store.load(key));
    fs::remove_all(folder());
    store.saveLater(key, std::make_shared<const Trace>(trace()), entry_, "import model\n");
  } // the destructor writes what is queued
  TraceStore again(folder(), "1.0");
  EXPECT_TRUE(again.load(key));
}

TEST_F(TraceStoreTest, SourceFilesAreTheEntryAndEveryFileAnOpRan) {
  EXPECT_EQ(traceSourceFiles(trace(), entry_), (std::vector<std::string>{helper_, entry_}));
}

} // namespace
} // namespace wavecast
