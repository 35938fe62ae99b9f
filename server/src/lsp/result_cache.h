// Finished analyses kept by what they analysed, so that saving code back to a
// state already analysed (an undo, a reopened file) shows its results without
// running the worker. A key names the entry file's content and the request's
// settings; it cannot see an imported module change, so every entry also keeps
// the hash of each file its result depends on and is stale once one differs.
#pragma once

#include "lsp/analyzer.h"
#include "lsp/indexed_result.h"
#include "wavecast/profiler/content_hash.h"

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace wavecast::lsp {

using wavecast::contentHash; // the content part of cache keys and the source hashes
// The key of an analysis of `request` whose entry file holds `entryText`.
std::string cacheKey(std::string_view entryText, const AnalysisRequest& request);

class ResultCache {
public:
  // A file's current contentHash; nullopt when it cannot be read.
  using FileHasher = std::function<std::optional<std::string>(const std::string& path)>;
  explicit ResultCache(size_t capacity, FileHasher hashFile = fileContentHash);

  // The result for `key` while every file it depends on is unchanged; a stale
  // entry is dropped.
  std::shared_ptr<const IndexedResult> fresh(const std::string& key);
  // The result for `key` without reading the files it depends on (opening a
  // document shows what is known at once, before anything is saved).
  std::shared_ptr<const IndexedResult> peek(const std::string& key) const;
  // Adds or replaces the entry for `key`; `sourceHashes` maps every file the
  // result depends on to its contentHash. Beyond the capacity the entry
  // inserted first goes.
  void insert(const std::string& key, std::shared_ptr<const IndexedResult> result,
              std::map<std::string, std::string> sourceHashes);
  size_t size() const { return entries_.size(); }

private:
  struct Entry {
    std::shared_ptr<const IndexedResult> result;
    std::map<std::string, std::string> sourceHashes;
  };
  void erase(const std::string& key);

  size_t capacity_;
  FileHasher hashFile_;
  std::map<std::string, Entry> entries_;
  std::deque<std::string> order_; // the keys of entries_, first inserted first
};

} // namespace wavecast::lsp
