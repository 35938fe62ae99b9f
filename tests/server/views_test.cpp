#include "fake_analyzer.h"
#include "lsp/document_store.h"
#include "lsp/views.h"
#include "presentation.h"

#include <gtest/gtest.h>

namespace wavecast::lsp {
namespace {

using protocol::Range;

const char* kAnalysed = "import torch\n\ny = conv(x)\n\nopt.step()\n";

std::shared_ptr<IndexedResult> sampleResult() {
  auto result = indexResult(testing::sampleOutput("/w/train.py"), 1);
  result->analysedText["/w/train.py"] = kAnalysed;
  return result;
}

TEST(Views, HintsSitAtTheEndOfTheirLinesWithinTheRange) {
  auto result = sampleResult();
  auto hints = inlayHints(*result, "/w/train.py", {kAnalysed, nullptr}, Range{{0, 0}, {10, 0}});
  ASSERT_EQ(hints.size(), 2u);
  EXPECT_EQ(hints[0].position.line, 2);
  EXPECT_EQ(hints[0].position.character, 11); // after "y = conv(x)"
  EXPECT_EQ(hints[1].position.line, 4);
  EXPECT_TRUE(
      inlayHints(*result, "/w/train.py", {kAnalysed, nullptr}, Range{{0, 0}, {3, 0}}).size() == 1);
  EXPECT_TRUE(
      inlayHints(*result, "/w/other.py", {kAnalysed, nullptr}, Range{{0, 0}, {9, 0}}).empty());
}

TEST(Views, HintsAndHoversFollowMovedLinesAndSkipEditedOnes) {
  auto result = sampleResult();
  const std::string edited = "import torch\n# new\n\ny = conv(x)\n\nopt.step(closure)\n";
  const LineMap moved = LineMap::between(kAnalysed, edited);
  auto hints = inlayHints(*result, "/w/train.py", {edited, &moved}, Range{{0, 0}, {10, 0}});
  ASSERT_EQ(hints.size(), 1u); // opt.step() was edited
  EXPECT_EQ(hints[0].position.line, 3);
  EXPECT_TRUE(hoverAt(*result, "/w/train.py", {edited, &moved}, 3).has_value());
  EXPECT_FALSE(hoverAt(*result, "/w/train.py", {edited, &moved}, 5).has_value());
  EXPECT_FALSE(hoverAt(*result, "/w/train.py", {edited, &moved}, 0).has_value());
}

TEST(Views, TheEntryGetsAGpuLensPerTargetAndAMemoryLens) {
  auto result = sampleResult();
  auto lenses = summaryLenses(result->output, nullptr, protocol::Json::array({"file:///w"}));
  ASSERT_EQ(lenses.size(), 3u);
  EXPECT_EQ(lenses[0].range.start.line, 8); // the iteration provider's def line
  EXPECT_EQ(lenses[2].range.start.line, 6); // the input provider's
  EXPECT_EQ(lenses[2].command.command, "wavecast.setBatchSize");
}

TEST(Views, AnErrorIsADiagnosticAtItsLineOfItsFile) {
  Entries entries;
  Entry& entry = entries["file:///w/train.py"];
  entry.path = "/w/train.py";
  entry.state = protocol::ResultsState::Error;
  ProfileError error;
  error.kind = ProfileErrorKind::UserException;
  error.message = "ZeroDivisionError";
  error.line = 3;
  entry.error = error;
  auto diagnostics = diagnosticsFor(entries, "/w/train.py", false, [] { return kAnalysed; });
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].range.start.line, 2);
  EXPECT_EQ(diagnostics[0].range.end.character, 11);
  EXPECT_EQ(diagnostics[0].code, "user_exception");
  EXPECT_TRUE(diagnosticsFor(entries, "/w/model.py", false, [] { return ""; }).empty());
}

TEST(Views, TraceWarningsAboutALineAreDiagnosticsThere) {
  Entries entries;
  Entry& entry = entries["file:///w/train.py"];
  entry.path = "/w/train.py";
  entry.state = protocol::ResultsState::Ready;
  AnalysisOutput output = testing::sampleOutput("/w/train.py");
  TraceWarning mixed;
  mixed.kind = TraceWarningKind::HostTensorWithGpu;
  mixed.loc = {"/w/train.py", 3, ""};
  mixed.origin = SourceLocation{"/w/train.py", 1, ""};
  TraceWarning compiled; // the torch.compile warning names its line: a diagnostic too
  compiled.kind = TraceWarningKind::TorchCompile;
  compiled.loc = {"/w/model.py", 7, ""};
  TraceWarning wholeScript; // about no line: no diagnostic
  wholeScript.kind = TraceWarningKind::CudaTracedOnCpu;
  wholeScript.severity = Severity::Info;
  output.traceWarnings = {mixed, compiled, wholeScript};
  entry.result = indexResult(std::move(output), 1);
  auto diagnostics = diagnosticsFor(entries, "/w/train.py", false, [] { return kAnalysed; });
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].range.start.line, 2);
  EXPECT_EQ(diagnostics[0].severity, protocol::DiagnosticSeverity::Warning);
  EXPECT_EQ(diagnostics[0].code, "host_tensor_with_gpu");
  EXPECT_EQ(diagnostics[0].message, traceWarningMessage(mixed));
  const auto model =
      diagnosticsFor(entries, "/w/model.py", false, [] { return "a\nb\nc\nd\ne\nf\ng\n"; });
  ASSERT_EQ(model.size(), 1u);
  EXPECT_EQ(model[0].range.start.line, 6);
  EXPECT_EQ(model[0].code, "torch_compile");
}

TEST(DocumentStore, UnsavedPythonFilesAreThoseEditedSinceTheirSave) {
  DocumentStore documents;
  documents.open("file:///w/a.py", "/w/a.py", "x = 1\n", 1);
  documents.open("file:///w/notes.txt", "/w/notes.txt", "", 1);
  auto all = [](const std::string&) { return true; };
  EXPECT_TRUE(documents.unsavedPythonFiles(all).empty());
  documents.change({"file:///w/a.py", 2, {{std::nullopt, "x = 2\n"}}});
  documents.change({"file:///w/notes.txt", 2, {{std::nullopt, "todo\n"}}});
  EXPECT_EQ(documents.unsavedPythonFiles(all), std::vector<std::string>{"a.py"});
  EXPECT_EQ(documents.find("file:///w/a.py")->text, "x = 2\n");
  documents.saved("file:///w/a.py", std::nullopt);
  EXPECT_TRUE(documents.unsavedPythonFiles(all).empty());
  documents.close("file:///w/a.py");
  EXPECT_EQ(documents.find("file:///w/a.py"), nullptr);
}

TEST(DocumentStore, TheLineMapFollowsTheDocumentsVersion) {
  DocumentStore documents;
  auto result = sampleResult();
  documents.open("file:///w/train.py", "/w/train.py", kAnalysed, 1);
  EXPECT_EQ(documents.lineMapFor("file:///w/train.py", *result), nullptr); // same text
  documents.change({"file:///w/train.py", 2, {{std::nullopt, std::string("# top\n") + kAnalysed}}});
  auto map = documents.lineMapFor("file:///w/train.py", *result);
  ASSERT_NE(map, nullptr);
  EXPECT_EQ(map->toAfter(2), 3);
  EXPECT_EQ(documents.lineMapFor("file:///w/train.py", *result), map); // kept, not rebuilt
  EXPECT_EQ(documents.lineMapFor("file:///w/closed.py", *result), nullptr);
}

} // namespace
} // namespace wavecast::lsp
