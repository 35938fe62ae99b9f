// Levenshtein distance between two names, and the closest entries of a database by it,
// for "did you mean" suggestions.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace wavecast {

inline size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Up to `limit` ids of `entries` closest to `wanted` (both normalised): each entry's
// distance is its nearest key's, and a key containing `wanted` ("h10" in "h100sxm") is
// as close as it gets. Ties keep the entries' order.
template <class Entry, class KeysOf>
std::vector<std::string> closestIds(const std::string& wanted, const std::vector<Entry>& entries,
                                    KeysOf keysOf, size_t limit) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const Entry& entry : entries) {
    size_t best = std::string::npos;
    for (const std::string& key : keysOf(entry)) {
      size_t distance = editDistance(wanted, key);
      if (!wanted.empty() && key.find(wanted) != std::string::npos)
        distance = 0;
      best = std::min(best, distance);
    }
    scored.emplace_back(best, entry.id);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> ids;
  for (const auto& [distance, id] : scored) {
    if (ids.size() >= limit)
      break;
    ids.push_back(id);
  }
  return ids;
}

} // namespace wavecast
