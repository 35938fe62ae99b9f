#include "lsp/result_cache.h"

#include <algorithm>

namespace wavecast::lsp {

std::string cacheKey(std::string_view entryText, const AnalysisRequest& request) {
  std::string key = contentHash(entryText);
  for (const auto& target : request.targets)
    key += "|" + target;
  for (const auto& layout : request.layouts)
    key += "|" + layout.gpu + "@" + layout.system + ":" + layout.words;
  key += "|" + (request.batchSize ? std::to_string(*request.batchSize) : "default") + "|" +
         request.pythonEnv + "|mode" + std::to_string(static_cast<int>(request.mode));
  for (const auto& word : request.scriptArgs)
    key += "|arg:" + word;
  if (!request.workingDirectory.empty())
    key += "|cwd:" + request.workingDirectory;
  if (request.worldSize)
    key += "|ranks" + std::to_string(*request.worldSize);
  if (request.compile)
    key += "|compile:" + std::string(toString(*request.compile));
  return key;
}

ResultCache::ResultCache(size_t capacity, FileHasher hashFile)
    : capacity_(capacity), hashFile_(std::move(hashFile)) {}

std::shared_ptr<const IndexedResult> ResultCache::fresh(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end())
    return nullptr;
  const auto& hashes = it->second.sourceHashes;
  const bool unchanged = std::all_of(hashes.begin(), hashes.end(), [&](const auto& source) {
    return hashFile_(source.first) == source.second;
  });
  if (unchanged)
    return it->second.result;
  erase(key);
  return nullptr;
}

std::shared_ptr<const IndexedResult> ResultCache::peek(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.result;
}

void ResultCache::insert(const std::string& key, std::shared_ptr<const IndexedResult> result,
                         std::map<std::string, std::string> sourceHashes) {
  if (!entries_.count(key))
    order_.push_back(key);
  entries_[key] = Entry{std::move(result), std::move(sourceHashes)};
  while (entries_.size() > capacity_ && !order_.empty())
    erase(order_.front());
}

void ResultCache::erase(const std::string& key) {
  entries_.erase(key);
  // The key leaves the order with its entry: a key left behind would be
  // evicted later in place of the fresh entry inserted under it again.
  order_.erase(std::remove(order_.begin(), order_.end(), key), order_.end());
}

} // namespace wavecast::lsp
