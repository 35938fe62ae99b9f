// Where the lines of one version of a file are in another. Results name the
// lines of the text that was analysed (the saved file); while the user edits
// without saving, hints and hovers follow their line through the edits instead
// of staying at its old number. Lines an edit changed map to nothing.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace wavecast::lsp {

class LineMap {
public:
  // A line-level diff (patience anchors, then common prefixes and suffixes
  // between them): linear in the text size for typical edits.
  static LineMap between(std::string_view before, std::string_view after);

  // 0-based line numbers; nullopt when the line was changed or removed.
  std::optional<int> toAfter(int beforeLine) const;
  std::optional<int> toBefore(int afterLine) const;

private:
  std::vector<int> afterOf_;  // before line -> after line, -1 when unmatched
  std::vector<int> beforeOf_; // after line -> before line, -1 when unmatched
};

} // namespace wavecast::lsp
