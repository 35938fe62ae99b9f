#include "lsp/document_store.h"

#include "wavecast/protocol/json_read.h"

#include <algorithm>
#include <filesystem>
#include <set>

namespace wavecast::lsp {

namespace fs = std::filesystem;

const Document* DocumentStore::find(const std::string& uri) const {
  auto it = documents_.find(uri);
  return it == documents_.end() ? nullptr : &it->second;
}

const Document* DocumentStore::findByPath(const std::string& path) const {
  const Document* found = nullptr;
  for (const auto& [uri, doc] : documents_)
    if (doc.path == path)
      found = &doc;
  return found;
}

void DocumentStore::open(const std::string& uri, std::string path, std::string text,
                         int64_t version) {
  documents_[uri] = Document{std::move(path), std::move(text), version, false};
  lineMaps_.erase(uri);
}

void DocumentStore::change(const protocol::DidChangeParams& change) {
  auto it = documents_.find(change.uri);
  if (it == documents_.end())
    protocol::throwInvalidParams("didChange for a document that is not open: " + change.uri);
  for (const auto& item : change.contentChanges)
    protocol::applyChange(it->second.text, item);
  it->second.version = change.version;
  it->second.dirty = true;
}

void DocumentStore::saved(const std::string& uri, const std::optional<std::string>& text) {
  auto it = documents_.find(uri);
  if (it == documents_.end())
    return;
  it->second.dirty = false;
  if (text)
    it->second.text = *text;
  lineMaps_.erase(uri);
}

void DocumentStore::close(const std::string& uri) {
  documents_.erase(uri);
  lineMaps_.erase(uri);
}

std::vector<std::string> DocumentStore::unsavedPythonFiles(
    const std::function<bool(const std::string& path)>& include) const {
  std::vector<std::string> names;
  for (const auto& [uri, doc] : documents_)
    if (doc.dirty && fs::path(doc.path).extension() == ".py" && include(doc.path))
      names.push_back(fs::path(doc.path).filename().string());
  return names;
}

std::shared_ptr<const LineMap> DocumentStore::lineMapFor(const std::string& uri,
                                                         const IndexedResult& result) const {
  const Document* doc = find(uri);
  if (!doc)
    return nullptr;
  auto cached = lineMaps_.find(uri);
  if (cached != lineMaps_.end() && cached->second.sequence == result.sequence &&
      cached->second.version == doc->version)
    return cached->second.map;
  std::shared_ptr<const LineMap> map;
  auto analysed = result.analysedText.find(doc->path);
  if (analysed != result.analysedText.end() && analysed->second != doc->text)
    map = std::make_shared<LineMap>(LineMap::between(analysed->second, doc->text));
  lineMaps_[uri] = CachedLineMap{result.sequence, doc->version, map};
  return map;
}

bool definesProviders(std::string_view text) {
  static const std::set<std::string_view> providers = {
      "wavecast_model",          "wavecast_input",          "wavecast_iteration",
      "deepview_model_provider", "deepview_input_provider", "deepview_iteration_provider",
      "skyline_model_provider",  "skyline_input_provider",  "skyline_iteration_provider"};
  size_t start = 0;
  while (start < text.size()) {
    size_t eol = text.find('\n', start);
    std::string_view line = text.substr(start, eol == text.npos ? text.npos : eol - start);
    start = eol == text.npos ? text.size() : eol + 1;
    line.remove_prefix(std::min(line.size(), line.find_first_not_of(" \t")));
    if (line.substr(0, 4) != "def ")
      continue;
    line.remove_prefix(4);
    line.remove_prefix(std::min(line.size(), line.find_first_not_of(" \t")));
    std::string_view name = line.substr(0, line.find_first_of(" \t("));
    if (providers.count(name))
      return true;
  }
  return false;
}

bool isAnalysisEntry(std::string_view text) {
  if (definesProviders(text))
    return true;
  const auto has = [text](std::string_view part) { return text.find(part) != text.npos; };
  // A script, not a module of helpers: a main block, or a loop at the top level.
  const bool runs = has("__main__") || text.substr(0, 4) == "for " ||
                    text.substr(0, 6) == "while " || has("\nfor ") || has("\nwhile ");
  return runs && has("torch") && (has(".step(") || has(".fit(") || has(".train()"));
}

} // namespace wavecast::lsp
