#include "lsp/line_map.h"

#include <algorithm>
#include <unordered_map>

namespace wavecast::lsp {
namespace {

std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t eol = text.find('\n', start);
    if (eol == std::string_view::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, eol - start));
    start = eol + 1;
  }
  return lines;
}

struct Range {
  int aBegin, aEnd, bBegin, bEnd;
};

// Lines occurring exactly once in both ranges, in order of `a`, reduced to the
// longest run also increasing in `b` (patience sorting).
std::vector<std::pair<int, int>> uniqueAnchors(const std::vector<std::string_view>& a,
                                               const std::vector<std::string_view>& b,
                                               const Range& r) {
  struct Seen {
    int countA = 0, countB = 0, lineA = -1, lineB = -1;
  };
  std::unordered_map<std::string_view, Seen> seen;
  for (int i = r.aBegin; i < r.aEnd; ++i) {
    Seen& s = seen[a[size_t(i)]];
    ++s.countA;
    s.lineA = i;
  }
  for (int j = r.bBegin; j < r.bEnd; ++j) {
    auto it = seen.find(b[size_t(j)]);
    if (it != seen.end()) {
      ++it->second.countB;
      it->second.lineB = j;
    }
  }
  std::vector<std::pair<int, int>> candidates;
  for (const auto& [line, s] : seen)
    if (s.countA == 1 && s.countB == 1)
      candidates.emplace_back(s.lineA, s.lineB);
  std::sort(candidates.begin(), candidates.end());

  // Longest increasing subsequence of the b lines.
  std::vector<int> tails;                           // index into candidates, per length
  std::vector<int> previous(candidates.size(), -1); // back links
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto pos = std::lower_bound(
        tails.begin(), tails.end(), candidates[i].second,
        [&](int index, int lineB) { return candidates[size_t(index)].second < lineB; });
    if (pos != tails.begin())
      previous[i] = *(pos - 1);
    if (pos == tails.end())
      tails.push_back(int(i));
    else
      *pos = int(i);
  }
  std::vector<std::pair<int, int>> anchors;
  for (int i = tails.empty() ? -1 : tails.back(); i >= 0; i = previous[size_t(i)])
    anchors.push_back(candidates[size_t(i)]);
  std::reverse(anchors.begin(), anchors.end());
  return anchors;
}

} // namespace

LineMap LineMap::between(std::string_view before, std::string_view after) {
  const std::vector<std::string_view> a = splitLines(before);
  const std::vector<std::string_view> b = splitLines(after);
  LineMap map;
  map.afterOf_.assign(a.size(), -1);
  map.beforeOf_.assign(b.size(), -1);
  auto match = [&](int i, int j) {
    map.afterOf_[size_t(i)] = j;
    map.beforeOf_[size_t(j)] = i;
  };
  // An explicit stack: nested edits must not recurse once per level.
  std::vector<Range> work{{0, int(a.size()), 0, int(b.size())}};
  while (!work.empty()) {
    Range r = work.back();
    work.pop_back();
    while (r.aBegin < r.aEnd && r.bBegin < r.bEnd && a[size_t(r.aBegin)] == b[size_t(r.bBegin)])
      match(r.aBegin++, r.bBegin++);
    while (r.aBegin < r.aEnd && r.bBegin < r.bEnd && a[size_t(r.aEnd - 1)] == b[size_t(r.bEnd - 1)])
      match(--r.aEnd, --r.bEnd);
    if (r.aBegin == r.aEnd || r.bBegin == r.bEnd)
      continue;
    int aStart = r.aBegin, bStart = r.bBegin;
    for (const auto& [i, j] : uniqueAnchors(a, b, r)) {
      match(i, j);
      work.push_back({aStart, i, bStart, j});
      aStart = i + 1;
      bStart = j + 1;
    }
    if (aStart != r.aBegin) // with no anchor the middle stays unmatched
      work.push_back({aStart, r.aEnd, bStart, r.bEnd});
  }
  return map;
}

std::optional<int> LineMap::toAfter(int beforeLine) const {
  if (beforeLine < 0 || size_t(beforeLine) >= afterOf_.size() || afterOf_[size_t(beforeLine)] < 0)
    return std::nullopt;
  return afterOf_[size_t(beforeLine)];
}

std::optional<int> LineMap::toBefore(int afterLine) const {
  if (afterLine < 0 || size_t(afterLine) >= beforeOf_.size() || beforeOf_[size_t(afterLine)] < 0)
    return std::nullopt;
  return beforeOf_[size_t(afterLine)];
}

} // namespace wavecast::lsp
