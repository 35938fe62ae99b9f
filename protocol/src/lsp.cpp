#include "wavecast/protocol/lsp.h"

#include "wavecast/protocol/json_read.h"

#include <cstdio>

namespace wavecast::protocol {

namespace {

std::string textDocumentUri(const Json& params, std::string_view method) {
  std::string where = "params";
  requireObject(params, where);
  (void)method;
  return requireString(requireMember(params, "textDocument", where), "uri", "params.textDocument");
}

int toInt(int64_t value, std::string_view what) {
  if (value < 0 || value > INT32_MAX)
    throwInvalidParams(std::string(what) + " must be between 0 and 2^31-1");
  return static_cast<int>(value);
}

bool flag(const Json& object, std::initializer_list<const char*> path) {
  const Json* node = &object;
  for (const char* key : path) {
    if (!node->is_object())
      return false;
    auto it = node->find(key);
    if (it == node->end())
      return false;
    node = &*it;
  }
  return node->is_boolean() ? node->get<bool>() : !node->is_null();
}

std::vector<WorkspaceFolder> foldersFromJson(const Json& value, std::string_view where) {
  std::vector<WorkspaceFolder> folders;
  if (value.is_null())
    return folders;
  if (!value.is_array())
    throwInvalidParams(std::string(where) + " must be an array");
  for (const Json& item : value)
    folders.push_back(
        {requireString(item, "uri", where), optionalString(item, "name", where).value_or("")});
  return folders;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

} // namespace

Position positionFromJson(const Json& value, std::string_view where) {
  std::string at(where);
  return {toInt(requireInt(value, "line", at), at + ".line"),
          toInt(requireInt(value, "character", at), at + ".character")};
}

Range rangeFromJson(const Json& value, std::string_view where) {
  std::string at(where);
  return {positionFromJson(requireMember(value, "start", at), at + ".start"),
          positionFromJson(requireMember(value, "end", at), at + ".end")};
}

DidOpenParams didOpenFromJson(const Json& params) {
  const Json& doc = requireMember(requireObject(params, "params"), "textDocument", "params");
  const char* where = "params.textDocument";
  return {{requireString(doc, "uri", where), optionalString(doc, "languageId", where).value_or(""),
           requireInt(doc, "version", where), requireString(doc, "text", where)}};
}

DidChangeParams didChangeFromJson(const Json& params) {
  const Json& doc = requireMember(requireObject(params, "params"), "textDocument", "params");
  DidChangeParams out;
  out.uri = requireString(doc, "uri", "params.textDocument");
  out.version = optionalInt(doc, "version", "params.textDocument").value_or(0);
  const Json& changes = requireMember(params, "contentChanges", "params");
  if (!changes.is_array())
    throwInvalidParams("params.contentChanges must be an array");
  for (const Json& change : changes) {
    TextDocumentContentChange decoded;
    decoded.text = requireString(change, "text", "params.contentChanges[]");
    if (change.contains("range") && !change["range"].is_null())
      decoded.range = rangeFromJson(change["range"], "params.contentChanges[].range");
    out.contentChanges.push_back(std::move(decoded));
  }
  return out;
}

DidSaveParams didSaveFromJson(const Json& params) {
  return {textDocumentUri(params, "didSave"), optionalString(params, "text", "params")};
}

DidCloseParams didCloseFromJson(const Json& params) {
  return {textDocumentUri(params, "didClose")};
}

TextDocumentPositionParams positionParamsFromJson(const Json& params) {
  return {textDocumentUri(params, "position"),
          positionFromJson(requireMember(params, "position", "params"), "params.position")};
}

InlayHintParams inlayHintParamsFromJson(const Json& params) {
  return {textDocumentUri(params, "inlayHint"),
          rangeFromJson(requireMember(params, "range", "params"), "params.range")};
}

DocumentParams documentParamsFromJson(const Json& params) {
  return {textDocumentUri(params, "document")};
}

InitializeParams initializeFromJson(const Json& params) {
  requireObject(params, "params");
  InitializeParams out;
  out.processId = optionalInt(params, "processId", "params");
  out.rootUri = optionalString(params, "rootUri", "params");
  out.workspaceFolders =
      foldersFromJson(params.value("workspaceFolders", Json()), "params.workspaceFolders");
  if (params.contains("clientInfo") && params["clientInfo"].is_object())
    out.clientName = optionalString(params["clientInfo"], "name", "params.clientInfo");
  out.initializationOptions = params.value("initializationOptions", Json());
  const Json caps = params.value("capabilities", Json::object());
  ClientCapabilities& c = out.capabilities;
  c.workDoneProgress = flag(caps, {"window", "workDoneProgress"});
  c.configuration = flag(caps, {"workspace", "configuration"});
  c.inlayHint = flag(caps, {"textDocument", "inlayHint"});
  c.inlayHintRefresh = flag(caps, {"workspace", "inlayHint", "refreshSupport"});
  c.codeLensRefresh = flag(caps, {"workspace", "codeLens", "refreshSupport"});
  const Json formats =
      caps.is_object() && caps.contains("textDocument") && caps["textDocument"].is_object() &&
              caps["textDocument"].contains("hover") && caps["textDocument"]["hover"].is_object()
          ? caps["textDocument"]["hover"].value("contentFormat", Json::array())
          : Json::array();
  for (const Json& format : formats)
    c.hoverMarkdown = c.hoverMarkdown || format == "markdown";
  return out;
}

WorkspaceFoldersChange workspaceFoldersChangeFromJson(const Json& params) {
  const Json& event = requireMember(requireObject(params, "params"), "event", "params");
  return {foldersFromJson(requireMember(event, "added", "params.event"), "params.event.added"),
          foldersFromJson(requireMember(event, "removed", "params.event"), "params.event.removed")};
}

Json toJson(const Position& position) {
  return {{"line", position.line}, {"character", position.character}};
}

Json toJson(const Range& range) {
  return {{"start", toJson(range.start)}, {"end", toJson(range.end)}};
}

Json toJson(const Diagnostic& diagnostic) {
  Json out = {{"range", toJson(diagnostic.range)},
              {"severity", static_cast<int>(diagnostic.severity)},
              {"source", "wavecast"},
              {"message", diagnostic.message}};
  if (!diagnostic.code.empty())
    out["code"] = diagnostic.code;
  return out;
}

Json toJson(const ShowMessageParams& params) {
  return {{"type", static_cast<int>(params.type)}, {"message", params.message}};
}

Json toJson(const PublishDiagnosticsParams& params) {
  Json diagnostics = Json::array();
  for (const auto& diagnostic : params.diagnostics)
    diagnostics.push_back(toJson(diagnostic));
  Json out = {{"uri", params.uri}, {"diagnostics", std::move(diagnostics)}};
  if (params.version)
    out["version"] = *params.version;
  return out;
}

Json toJson(const Hover& hover) {
  Json out = {{"contents", {{"kind", "markdown"}, {"value", hover.markdown}}}};
  if (hover.range)
    out["range"] = toJson(*hover.range);
  return out;
}

Json toJson(const InlayHint& hint) {
  Json out = {{"position", toJson(hint.position)},
              {"label", hint.label},
              {"paddingLeft", hint.paddingLeft}};
  if (!hint.tooltip.empty())
    out["tooltip"] = {{"kind", "markdown"}, {"value", hint.tooltip}};
  return out;
}

Json toJson(const CodeLens& lens) {
  return {{"range", toJson(lens.range)},
          {"command",
           {{"title", lens.command.title},
            {"command", lens.command.command},
            {"arguments", lens.command.arguments}}}};
}

int utf16Length(std::string_view utf8) {
  int units = 0;
  for (unsigned char c : utf8) {
    if ((c & 0xC0) == 0x80)
      continue;                 // continuation byte
    units += c >= 0xF0 ? 2 : 1; // 4-byte sequences are surrogate pairs
  }
  return units;
}

size_t utf8Offset(std::string_view line, int character) {
  int units = 0;
  size_t i = 0;
  while (i < line.size() && units < character) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    units += c >= 0xF0 ? 2 : 1;
    i = std::min(line.size(), i + length);
  }
  return i;
}

namespace {

// Byte offset of `position` in `text` (clamped to the end of its line / the text).
size_t offsetOf(const std::string& text, const Position& position) {
  size_t lineStart = 0;
  for (int line = 0; line < position.line; ++line) {
    size_t eol = text.find('\n', lineStart);
    if (eol == std::string::npos)
      return text.size();
    lineStart = eol + 1;
  }
  size_t eol = text.find('\n', lineStart);
  std::string_view lineText(text.data() + lineStart,
                            (eol == std::string::npos ? text.size() : eol) - lineStart);
  return lineStart + utf8Offset(lineText, position.character);
}

} // namespace

void applyChange(std::string& text, const TextDocumentContentChange& change) {
  if (!change.range) {
    text = change.text;
    return;
  }
  size_t begin = offsetOf(text, change.range->start);
  size_t end = std::max(begin, offsetOf(text, change.range->end));
  text.replace(begin, end - begin, change.text);
}

std::optional<std::string> uriToPath(std::string_view uri) {
  constexpr std::string_view scheme = "file://";
  if (uri.substr(0, scheme.size()) != scheme)
    return std::nullopt;
  std::string_view rest = uri.substr(scheme.size());
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos)
    return std::nullopt;
  rest = rest.substr(slash); // drop the (usually empty) authority
  std::string path;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] != '%') {
      path += rest[i];
      continue;
    }
    if (i + 2 >= rest.size() || hexValue(rest[i + 1]) < 0 || hexValue(rest[i + 2]) < 0)
      return std::nullopt;
    path += static_cast<char>(hexValue(rest[i + 1]) * 16 + hexValue(rest[i + 2]));
    i += 2;
  }
  return path;
}

std::string pathToUri(std::string_view path) {
  std::string uri = "file://";
  for (unsigned char c : path) {
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (unreserved) {
      uri += static_cast<char>(c);
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", c);
      uri += escaped;
    }
  }
  return uri;
}

} // namespace wavecast::protocol
