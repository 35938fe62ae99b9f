// The language server's settings and workspace folders: what editors send or are
// asked for (initialize, workspace/configuration, didChangeConfiguration), applied
// key by key, and the folders that scope which unsaved files hold an analysis back.
#include "lsp/files.h"
#include "lsp/language_server.h"

#include <set>

namespace wavecast::lsp {

using namespace protocol;

void LanguageServer::pullConfiguration(ClientId client) {
  if (!clients_.at(client).capabilities.configuration)
    return;
  sendRequest(client, "workspace/configuration", {{"items", {{{"section", "wavecast"}}}}},
              [this, client](const Response& response) {
                auto* result = std::get_if<Json>(&response.outcome);
                if (!result || !result->is_array() || result->empty() ||
                    !result->front().is_object())
                  return;
                applySettings(client, result->front(), "workspace/configuration[wavecast]");
              });
}

void LanguageServer::applySettings(ClientId client, const Json& object, std::string_view where) {
  Settings merged = settings_;
  std::vector<std::string> problems = mergeValidSettings(merged, object, where);
  std::vector<std::string> targets = targets_;
  if (merged.targets != settings_.targets || targets.empty()) {
    try {
      targets = merged.targets.empty() ? analyzer_.defaultTargets()
                                       : analyzer_.resolveTargets(merged.targets);
    } catch (const UnknownGpuError& error) {
      problems.push_back(std::string(where) + ".targets: " + error.what() +
                         "; the GPUs stay as they were");
      merged.targets = settings_.targets;
    }
  }
  std::vector<LayoutTarget> layouts = layouts_;
  if (merged.parallelTargets != settings_.parallelTargets) {
    try {
      layouts = analyzer_.resolveLayouts(merged.parallelTargets);
    } catch (const std::runtime_error& error) { // UnknownTargetError, UnknownGpuError
      problems.push_back(std::string(where) + ".parallelTargets: " + error.what() +
                         "; the multi-GPU targets stay as they were");
      merged.parallelTargets = settings_.parallelTargets;
    }
  }
  // A wrong value is shown once; shown again only after it was fixed in between.
  std::set<std::string> current(problems.begin(), problems.end());
  for (const auto& problem : current)
    if (!settingProblems_.count(problem))
      send(client,
           encodeNotification(
               "window/showMessage",
               toJson(ShowMessageParams{MessageType::Warning,
                                        "wavecast: " + problem +
                                            " (that setting keeps its value; the others apply)"})));
  settingProblems_ = std::move(current);
  bool rerun = targets != targets_ || layouts != layouts_ ||
               merged.batchSize != settings_.batchSize || merged.pythonEnv != settings_.pythonEnv ||
               merged.mode != settings_.mode || merged.scriptArgs != settings_.scriptArgs ||
               merged.scriptWorkingDirectories != settings_.scriptWorkingDirectories ||
               merged.worldSize != settings_.worldSize || merged.compile != settings_.compile;
  bool redisplay = merged.lineDiagnostics != settings_.lineDiagnostics;
  bool relens = merged.lineCodeLens != settings_.lineCodeLens;
  settings_ = std::move(merged);
  targets_ = std::move(targets);
  layouts_ = std::move(layouts);
  // The worker loads Python and torch while the editor is still opening files.
  analyzer_.prepare(settings_.pythonEnv);
  if (rerun)
    reanalyzeEntriesWithResults();
  if (redisplay)
    publishDiagnostics();
  if (relens)
    refreshViews(false, true); // editors ask for code lenses only when told they changed
}

void LanguageServer::didChangeConfiguration(ClientId client, const Json& params) {
  const Json settings = params.is_object() ? params.value("settings", Json()) : Json();
  if (settings.is_object() && settings.contains("wavecast"))
    applySettings(client, settings["wavecast"], "params.settings.wavecast");
  else
    pullConfiguration(client); // VS Code's pull model sends no values
}

void LanguageServer::didChangeWorkspaceFolders(ClientId, const Json& params) {
  const WorkspaceFoldersChange change = workspaceFoldersChangeFromJson(params);
  for (const auto& folder : change.removed)
    if (auto path = uriToPath(folder.uri))
      workspaceFolders_.erase(canonicalPath(*path));
  for (const auto& folder : change.added)
    addWorkspaceFolder(folder.uri);
  runAnalysesBlockedBySaves(); // a folder gone may unblock an entry
}

void LanguageServer::addWorkspaceFolder(const std::string& uri) {
  if (auto path = uriToPath(uri))
    workspaceFolders_.insert(canonicalPath(*path));
}

std::string LanguageServer::workspaceFolderOf(const std::string& path) const {
  std::string best;
  for (const auto& folder : workspaceFolders_) {
    const bool inside = path.size() > folder.size() &&
                        path.compare(0, folder.size(), folder) == 0 &&
                        (folder.back() == '/' || path[folder.size()] == '/');
    if (inside && folder.size() > best.size())
      best = folder;
  }
  return best;
}

} // namespace wavecast::lsp
