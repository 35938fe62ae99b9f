#include "lsp/result_cache.h"

#include <gtest/gtest.h>

namespace wavecast::lsp {
namespace {

// The files a result depends on, as the cache sees them: path -> content.
class Files {
public:
  void write(const std::string& path, const std::string& text) { texts_[path] = text; }
  void remove(const std::string& path) { texts_.erase(path); }
  ResultCache::FileHasher hasher() {
    return [this](const std::string& path) -> std::optional<std::string> {
      auto it = texts_.find(path);
      if (it == texts_.end())
        return std::nullopt;
      return contentHash(it->second);
    };
  }
  std::map<std::string, std::string> hashes() const {
    std::map<std::string, std::string> out;
    for (const auto& [path, text] : texts_)
      out[path] = contentHash(text);
    return out;
  }

private:
  std::map<std::string, std::string> texts_;
};

std::shared_ptr<const IndexedResult> result(uint64_t sequence) {
  auto indexed = std::make_shared<IndexedResult>();
  indexed->sequence = sequence;
  return indexed;
}

TEST(ResultCache, AnEntryIsFreshWhileNoFileItDependsOnChanged) {
  Files files;
  files.write("/w/train.py", "def wavecast_model(): ...");
  files.write("/w/model.py", "class Net: ...");
  ResultCache cache(4, files.hasher());
  cache.insert("train", result(1), files.hashes());
  ASSERT_NE(cache.fresh("train"), nullptr);
  EXPECT_EQ(cache.fresh("train")->sequence, 1u);
  EXPECT_EQ(cache.fresh("other"), nullptr);
}

TEST(ResultCache, AChangedImportedModuleMakesTheEntryStale) {
  Files files;
  files.write("/w/train.py", "import model");
  files.write("/w/model.py", "class Net: ...");
  ResultCache cache(4, files.hasher());
  cache.insert("train", result(1), files.hashes());
  files.write("/w/model.py", "class Net: bigger");
  EXPECT_EQ(cache.fresh("train"), nullptr);
  EXPECT_EQ(cache.peek("train"), nullptr); // dropped, not only skipped
  EXPECT_EQ(cache.size(), 0u);
  files.write("/w/model.py", "class Net: ..."); // back as it was: the entry is gone
  EXPECT_EQ(cache.fresh("train"), nullptr);
}

TEST(ResultCache, AnUnreadableSourceMakesTheEntryStale) {
  Files files;
  files.write("/w/train.py", "import model");
  files.write("/w/model.py", "class Net: ...");
  ResultCache cache(4, files.hasher());
  cache.insert("train", result(1), files.hashes());
  files.remove("/w/model.py");
  EXPECT_EQ(cache.fresh("train"), nullptr);
}

TEST(ResultCache, PeekDoesNotReadTheSources) {
  Files files;
  files.write("/w/model.py", "class Net: ...");
  ResultCache cache(4, files.hasher());
  cache.insert("train", result(1), files.hashes());
  files.write("/w/model.py", "changed");
  EXPECT_NE(cache.peek("train"), nullptr);
}

TEST(ResultCache, BeyondItsCapacityTheFirstInsertedEntryGoes) {
  Files files;
  ResultCache cache(2, files.hasher());
  cache.insert("a", result(1), {});
  cache.insert("b", result(2), {});
  cache.insert("a", result(3), {}); // a replacement keeps its place
  cache.insert("c", result(4), {});
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.peek("a"), nullptr);
  EXPECT_EQ(cache.peek("b")->sequence, 2u);
  EXPECT_EQ(cache.peek("c")->sequence, 4u);
}

// A stale entry used to leave its key in the eviction order: inserted again it
// was evicted at the old key's turn, before entries older than the new one.
TEST(ResultCache, AnEntryInsertedAgainAfterGoingStaleIsEvictedLast) {
  Files files;
  files.write("/w/model.py", "v1");
  ResultCache cache(2, files.hasher());
  cache.insert("a", result(1), files.hashes());
  cache.insert("b", result(2), {});
  files.write("/w/model.py", "v2");
  ASSERT_EQ(cache.fresh("a"), nullptr);
  cache.insert("a", result(3), files.hashes()); // analysed anew
  cache.insert("c", result(4), {});
  EXPECT_EQ(cache.peek("b"), nullptr);
  ASSERT_NE(cache.fresh("a"), nullptr);
  EXPECT_EQ(cache.fresh("a")->sequence, 3u);
  EXPECT_NE(cache.peek("c"), nullptr);
}

TEST(ResultCache, KeysNameTheContentAndEverySettingOfTheRequest) {
  const AnalysisRequest request{"/w/train.py", 32, {"H100-SXM", "T4"}, "", TraceMode::Shape, {}};
  const std::string key = cacheKey("text", request);
  EXPECT_EQ(key, contentHash("text") + "|H100-SXM|T4|32||mode0");
  EXPECT_NE(cacheKey("text2", request), key);
  AnalysisRequest other = request;
  other.batchSize.reset();
  EXPECT_EQ(cacheKey("text", other), contentHash("text") + "|H100-SXM|T4|default||mode0");
  other = request;
  other.pythonEnv = "system";
  EXPECT_NE(cacheKey("text", other), key);
  other = request;
  other.mode = TraceMode::Cuda;
  EXPECT_NE(cacheKey("text", other), key) << "measured and shape results are not interchangeable";
  other = request;
  other.scriptArgs = {"--lr", "0.1"};
  EXPECT_EQ(cacheKey("text", other), key + "|arg:--lr|arg:0.1");
  other = request;
  other.worldSize = 64;
  EXPECT_EQ(cacheKey("text", other), key + "|ranks64") << "a launch of other ranks traces anew";
  other = request;
  other.compile = CompileMode::ReduceOverhead;
  EXPECT_EQ(cacheKey("text", other), key + "|compile:reduce-overhead")
      << "a compiled what-if is another trace";
}

} // namespace
} // namespace wavecast::lsp
