// The subset of LSP 3.17 types wavecast speaks, as plain structs with
// fromJson/toJson. Positions are 0-based lines and UTF-16 code-unit columns.
#pragma once

#include "wavecast/protocol/jsonrpc.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wavecast::protocol {

struct Position {
  int line = 0;
  int character = 0;
  bool operator==(const Position& other) const {
    return line == other.line && character == other.character;
  }
};

struct Range {
  Position start;
  Position end;
  bool operator==(const Range& other) const { return start == other.start && end == other.end; }
};

struct TextDocumentItem {
  std::string uri;
  std::string languageId;
  int64_t version = 0;
  std::string text;
};

// Full-document sync: each change carries the whole text. A change with a range
// replaces that range (clients that ignore the advertised sync kind).
struct TextDocumentContentChange {
  std::optional<Range> range;
  std::string text;
};

struct DidOpenParams {
  TextDocumentItem textDocument;
};

struct DidChangeParams {
  std::string uri;
  int64_t version = 0;
  std::vector<TextDocumentContentChange> contentChanges;
};

struct DidSaveParams {
  std::string uri;
  std::optional<std::string> text;
};

struct DidCloseParams {
  std::string uri;
};

struct TextDocumentPositionParams {
  std::string uri;
  Position position;
};

struct InlayHintParams {
  std::string uri;
  Range range;
};

struct DocumentParams { // codeLens, documentSymbol-like requests
  std::string uri;
};

struct WorkspaceFolder {
  std::string uri;
  std::string name;
};

// What the server needs to know of the client's capabilities.
struct ClientCapabilities {
  bool workDoneProgress = false;
  bool configuration = false;
  bool inlayHint = false;
  bool inlayHintRefresh = false;
  bool codeLensRefresh = false;
  bool hoverMarkdown = false;
};

struct InitializeParams {
  std::optional<int64_t> processId;
  std::optional<std::string> rootUri;
  std::vector<WorkspaceFolder> workspaceFolders;
  ClientCapabilities capabilities;
  Json initializationOptions; // null when absent
  std::optional<std::string> clientName;
};

struct WorkspaceFoldersChange {
  std::vector<WorkspaceFolder> added;
  std::vector<WorkspaceFolder> removed;
};

enum class DiagnosticSeverity { Error = 1, Warning = 2, Information = 3, Hint = 4 };

// window/showMessage and window/logMessage.
enum class MessageType { Error = 1, Warning = 2, Info = 3, Log = 4 };
struct ShowMessageParams {
  MessageType type = MessageType::Info;
  std::string message;
};
Json toJson(const ShowMessageParams& params);

struct Diagnostic {
  Range range;
  DiagnosticSeverity severity = DiagnosticSeverity::Error;
  std::string code;
  std::string message;
};

struct PublishDiagnosticsParams {
  std::string uri;
  std::optional<int64_t> version;
  std::vector<Diagnostic> diagnostics;
};

struct Hover {
  std::string markdown;
  std::optional<Range> range;
};

struct InlayHint {
  Position position;
  std::string label;
  std::string tooltip; // markdown; empty for none
  bool paddingLeft = true;
};

struct Command {
  std::string title;
  std::string command;
  Json arguments = Json::array();
};

struct CodeLens {
  Range range;
  Command command;
};

// Decoders throw RpcError(InvalidParams) naming the offending field.
Position positionFromJson(const Json& value, std::string_view where);
Range rangeFromJson(const Json& value, std::string_view where);
DidOpenParams didOpenFromJson(const Json& params);
DidChangeParams didChangeFromJson(const Json& params);
DidSaveParams didSaveFromJson(const Json& params);
DidCloseParams didCloseFromJson(const Json& params);
TextDocumentPositionParams positionParamsFromJson(const Json& params);
InlayHintParams inlayHintParamsFromJson(const Json& params);
DocumentParams documentParamsFromJson(const Json& params);
InitializeParams initializeFromJson(const Json& params);
WorkspaceFoldersChange workspaceFoldersChangeFromJson(const Json& params);

Json toJson(const Position& position);
Json toJson(const Range& range);
Json toJson(const Diagnostic& diagnostic);
Json toJson(const PublishDiagnosticsParams& params);
Json toJson(const Hover& hover);
Json toJson(const InlayHint& hint);
Json toJson(const CodeLens& lens);

// Number of UTF-16 code units in UTF-8 text (LSP's default column unit).
int utf16Length(std::string_view utf8);
// Byte offset in `line` of the UTF-16 column `character` (clamped to the line).
size_t utf8Offset(std::string_view line, int character);
// Applies one change to `text` (a ranged edit, or a full replacement).
void applyChange(std::string& text, const TextDocumentContentChange& change);

// file:// URIs <-> absolute paths (percent-decoding/encoding). nullopt for
// other schemes or malformed escapes.
std::optional<std::string> uriToPath(std::string_view uri);
std::string pathToUri(std::string_view path);

} // namespace wavecast::protocol
