// The tracer (Python) and wavecast (C++) each list the error and warning kinds the
// trace carries; a kind one side lacks would be read as another, so both lists must agree.
#include "wavecast/trace.h"

#include <cstdio>
#include <gtest/gtest.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

namespace wavecast {
namespace {

// The lines a Python snippet prints, run with the tracer package importable (it
// imports no torch for these tables).
std::set<std::string> pythonLines(const std::string& code) {
  const std::string command =
      "PYTHONPATH='" WAVECAST_TRACER_PYTHON_DIR "' python3 -c '" + code + "'";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::set<std::string> lines;
  if (!pipe)
    return lines;
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe.get())) {
    std::string line = buffer;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
      line.pop_back();
    lines.insert(line);
  }
  return lines;
}

TEST(KindTables, ErrorKindsAreTheSameInTheTracerAndHere) {
  const auto python =
      pythonLines("from wavecast_tracer.errors import KINDS; print(\"\\n\".join(KINDS))");
  ASSERT_FALSE(python.empty()) << "could not run python3 on the tracer's errors.py";
  std::set<std::string> cpp;
  for (int i = 0; i <= static_cast<int>(ProfileErrorKind::Internal); ++i)
    cpp.insert(toString(static_cast<ProfileErrorKind>(i)));
  EXPECT_EQ(python, cpp);
}

TEST(KindTables, WarningKindsAndSeveritiesAreTheSameInTheTracerAndHere) {
  const auto python = pythonLines("from wavecast_tracer.trace_warnings import SEVERITY; "
                                  "[print(k, v) for k, v in SEVERITY.items()]");
  ASSERT_FALSE(python.empty()) << "could not run python3 on the tracer's trace_warnings.py";
  std::set<std::string> cpp;
  for (const auto& line : python) {
    std::istringstream words(line);
    std::string kind, severity;
    words >> kind >> severity;
    const auto parsed = traceWarningKindFromString(kind);
    ASSERT_TRUE(parsed) << kind << " is written by the tracer but unknown here";
    ASSERT_TRUE(severityFromString(severity)) << severity;
  }
  // Every kind here but Sentence (version-1 traces) is one the tracer writes.
  for (int i = 0; i < static_cast<int>(TraceWarningKind::Sentence); ++i) {
    const std::string name = toString(static_cast<TraceWarningKind>(i));
    bool written = false;
    for (const auto& line : python)
      written |= line.rfind(name + " ", 0) == 0;
    EXPECT_TRUE(written) << name << " is known here but the tracer never writes it";
  }
}

TEST(TraceWarnings, RecordsRoundTripAndVersionOneSentencesAreKept) {
  const auto doc = nlohmann::json::parse(R"({
    "format": "wavecast-trace", "version": 2, "mode": "shape", "ops": [],
    "warnings": [
      {"kind": "host_tensor_with_gpu", "severity": "warning", "file": "/p/t.py", "line": 9,
       "origin": {"file": "/p/t.py", "line": 4}},
      {"kind": "kernels_outside_ops", "severity": "info", "count": 4, "ms": 0.2},
      {"kind": "autocast_unsupported_dtype", "severity": "warning", "file": "/p/t.py",
       "line": 2, "dtype": "float64"},
      {"kind": "unsupported_distributed", "severity": "warning", "file": "/p/t.py",
       "line": 7, "call": "all_gather_object"}]})");
  const Trace trace = traceFromJson(doc);
  ASSERT_EQ(trace.warnings.size(), 4u);
  EXPECT_EQ(trace.warnings[0].kind, TraceWarningKind::HostTensorWithGpu);
  EXPECT_EQ(trace.warnings[0].loc.line, 9);
  ASSERT_TRUE(trace.warnings[0].origin);
  EXPECT_EQ(trace.warnings[0].origin->line, 4);
  EXPECT_EQ(trace.warnings[1].severity, Severity::Info);
  EXPECT_EQ(trace.warnings[1].count, 4);
  EXPECT_DOUBLE_EQ(trace.warnings[1].ms, 0.2);
  EXPECT_EQ(trace.warnings[2].dtype, "float64");
  EXPECT_EQ(trace.warnings[3].kind, TraceWarningKind::UnsupportedDistributed);
  EXPECT_EQ(trace.warnings[3].call, "all_gather_object");
  const Trace again = traceFromJson(traceToJson(trace));
  ASSERT_EQ(again.warnings.size(), 4u);
  EXPECT_EQ(again.warnings[0].origin->file, "/p/t.py");
  EXPECT_EQ(again.warnings[2].dtype, "float64");
  EXPECT_EQ(again.warnings[3].call, "all_gather_object");

  auto older = doc;
  older["version"] = 1;
  older["warnings"] = {"/p/t.py:3: a sentence of an older wavecast"};
  const Trace v1 = traceFromJson(older);
  ASSERT_EQ(v1.warnings.size(), 1u);
  EXPECT_EQ(v1.warnings[0].kind, TraceWarningKind::Sentence);
  EXPECT_EQ(v1.warnings[0].text, "/p/t.py:3: a sentence of an older wavecast");

  auto misspelt = doc;
  misspelt["warnings"] = {{{"kind", "host_tensor_with_cpu"}}};
  EXPECT_THROW(traceFromJson(misspelt), TraceFormatError);
}

} // namespace
} // namespace wavecast
