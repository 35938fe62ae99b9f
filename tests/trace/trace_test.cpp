#include "wavecast/trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace wavecast {
namespace {

using nlohmann::json;

json sampleDoc() {
  return json::parse(R"({
    "format": "wavecast-trace", "version": 1,
    "producer": {"torch": "1.13.0", "python": "3.11.2"},
    "entry_file": "/p/train.py", "project_root": "/p", "batch_size": 32, "mode": "shape",
    "providers": {"model": 10, "input": 20, "iteration": 30},
    "ops": [
      {"id": 0, "name": "aten::convolution", "phase": "forward",
       "inputs": [{"shape": [32, 3, 224, 224], "dtype": "float32", "contiguous": true},
                  {"shape": [64, 3, 7, 7], "dtype": "float32"}, null],
       "outputs": [{"shape": [32, 64, 112, 112], "dtype": "float16", "contiguous": false}],
       "args": {"stride": [2, 2], "padding": [3, 3], "groups": 1, "transposed": false,
                "p": 0.5, "reduce": "mean", "weird": [1.5, 2.5]},
       "loc": {"file": "/p/train.py", "line": 14, "function": "forward"},
       "stack": [{"file": "/p/train.py", "line": 31, "function": "iteration"},
                 {"file": "/p/train.py", "line": 14, "function": "forward"}],
       "module": "conv1", "fallback": false, "future_field": {"x": 1}},
      {"id": 1, "name": "aten::convolution_backward", "phase": "backward", "forward_id": 0,
       "gradient_work": true,
       "loc": {"file": "/p/train.py", "line": 14}, "fallback": true,
       "measured": {"time_ms": 0.25},
       "kernels": [{"name": "k", "grid": [10, 1, 1], "block": [256, 1, 1],
                    "registers_per_thread": 64, "static_shared_bytes": 1024,
                    "dynamic_shared_bytes": 0, "duration_ms": 0.2},
                   {"kind": "memset", "name": "Memset", "grid": [], "block": [],
                    "bytes": 4096, "duration_ms": 0.01},
                   {"kind": "future_kind", "name": "k2", "grid": [1, 1, 1], "block": [32, 1, 1],
                    "duration_ms": 0.03}]}
    ],
    "fallback_ops": ["aten::convolution_backward"],
    "memory": {"parameters_bytes": 1000, "gradients_bytes": 1000, "optimizer_state_bytes": 2000}
  })");
}

TEST(TraceTest, ReadsEveryField) {
  const Trace t = traceFromJson(sampleDoc());
  EXPECT_EQ(t.torchVersion, "1.13.0");
  EXPECT_EQ(t.batchSize, 32);
  EXPECT_EQ(t.samples(), 32) << "no samples_per_iteration: one batch per step";
  EXPECT_EQ(t.providerLines.at(Provider::Input), 20);
  ASSERT_EQ(t.ops.size(), 2u);
  const OpRecord& conv = t.ops[0];
  EXPECT_EQ(conv.name, "aten::convolution");
  EXPECT_EQ(conv.phase, Phase::Forward);
  ASSERT_EQ(conv.inputs.size(), 3u);
  EXPECT_FALSE(conv.inputs[2].has_value());
  EXPECT_EQ(conv.input(0)->numel(), 32 * 3 * 224 * 224);
  EXPECT_EQ(conv.output(0)->bytes(), 32LL * 64 * 112 * 112 * 2);
  EXPECT_FALSE(conv.output(0)->contiguous);
  EXPECT_EQ(conv.intListArg("stride"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(conv.intArg("groups"), 1);
  EXPECT_EQ(conv.boolArg("transposed"), false);
  EXPECT_DOUBLE_EQ(*conv.floatArg("p"), 0.5);
  EXPECT_FALSE(conv.intArg("reduce").has_value());
  EXPECT_FALSE(conv.intListArg("weird").has_value()) << "float lists are not cost arguments";
  EXPECT_EQ(conv.loc.line, 14);
  ASSERT_EQ(conv.stack.size(), 2u);
  EXPECT_EQ(conv.stack[0].function, "iteration");
  EXPECT_EQ(conv.module, "conv1");
  const OpRecord& back = t.ops[1];
  EXPECT_EQ(back.phase, Phase::Backward);
  EXPECT_EQ(back.forwardId, 0);
  EXPECT_TRUE(back.fallback);
  EXPECT_TRUE(back.gradientWork);
  EXPECT_FALSE(conv.gradientWork) << "absent: not work on the gradients";
  EXPECT_DOUBLE_EQ(*back.measuredMs, 0.25);
  ASSERT_EQ(back.kernels.size(), 3u);
  EXPECT_EQ(back.kernels[0].registersPerThread, 64);
  EXPECT_EQ(back.kernels[0].kind, GpuActivityKind::Kernel) << "absent kind: a kernel";
  EXPECT_EQ(back.kernels[1].kind, GpuActivityKind::Memset);
  EXPECT_EQ(back.kernels[1].bytes, 4096);
  EXPECT_EQ(back.kernels[2].kind, GpuActivityKind::Kernel) << "an unknown kind reads as a kernel";
  EXPECT_EQ(t.memory.optimizerStateBytes, 2000);
  EXPECT_EQ(t.mode, TraceMode::Shape) << "absent: a shape trace";
}

TEST(TraceTest, ReadsTheSamplesOfAnIterationThatAccumulates) {
  json doc = sampleDoc();
  doc["samples_per_iteration"] = 128;
  const Trace t = traceFromJson(doc);
  EXPECT_EQ(t.batchSize, 32);
  EXPECT_EQ(t.samples(), 128);
  EXPECT_EQ(traceToJson(t)["samples_per_iteration"], 128);
}

TEST(TraceTest, RoundTripsThroughJson) {
  const Trace t = traceFromJson(sampleDoc());
  const Trace again = traceFromJson(traceToJson(t));
  EXPECT_EQ(traceToJson(again), traceToJson(t));
  EXPECT_EQ(again.ops[0].intListArg("padding"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(again.ops[1].kernels[1].kind, GpuActivityKind::Memset);
  EXPECT_EQ(traceToJson(t)["ops"][1]["kernels"][1]["kind"], "memset");
  EXPECT_FALSE(traceToJson(t)["ops"][1]["kernels"][0].contains("kind")) << "kernels stay as before";
}

TEST(TraceTest, DistributedRankAndCollectiveArgsRoundTrip) {
  json doc = sampleDoc();
  doc["distributed"] = json::parse(R"({"world_size": 16, "rank": 3, "local_world_size": 8,
      "backend": "fake", "groups": [{"name": "default", "size": 16}, {"name": "tp", "size": 4}]})");
  doc["ops"].push_back(json::parse(R"({"id": 2, "name": "c10d::allreduce_", "phase": "backward",
      "args": {"collective": "all_reduce", "bytes": 26214400, "group_size": 16,
               "group": "default", "async": true, "wait_op": 7}})"));
  const Trace trace = traceFromJson(doc);
  ASSERT_TRUE(trace.distributed);
  EXPECT_EQ(trace.distributed->worldSize, 16);
  EXPECT_EQ(trace.distributed->rank, 3);
  EXPECT_EQ(trace.distributed->localWorldSize, 8);
  EXPECT_EQ(trace.distributed->backend, "fake");
  ASSERT_EQ(trace.distributed->groups.size(), 2u);
  EXPECT_EQ(trace.distributed->groups[1].name, "tp");
  EXPECT_EQ(trace.distributed->groups[1].size, 4);
  const OpRecord& op = trace.ops.back();
  EXPECT_EQ(std::get<std::string>(op.args.at("collective")), "all_reduce");
  EXPECT_EQ(op.intArg("bytes"), 26214400);
  EXPECT_EQ(op.boolArg("async"), true);
  EXPECT_EQ(op.intArg("wait_op"), 7);

  const Trace again = traceFromJson(traceToJson(trace));
  ASSERT_TRUE(again.distributed);
  EXPECT_EQ(again.distributed->localWorldSize, 8);
  EXPECT_EQ(again.distributed->groups[0].name, "default");
  EXPECT_EQ(again.distributed->groups[0].size, 16);
  EXPECT_EQ(again.ops.back().intArg("group_size"), 16);
  EXPECT_FALSE(traceFromJson(sampleDoc()).distributed); // a single-process script

  doc["distributed"]["world_size"] = "eight";
  EXPECT_THROW(traceFromJson(doc), TraceFormatError);
}

TEST(TraceTest, NewerVersionSaysToUpdate) {
  auto doc = sampleDoc();
  doc["version"] = 7;
  try {
    traceFromJson(doc);
    FAIL() << "expected TraceFormatError";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("update wavecast"), std::string::npos) << e.what();
  }
}

TEST(TraceTest, RejectsMalformedDocumentsWithTheField) {
  auto expectError = [](json doc, const std::string& fragment) {
    try {
      traceFromJson(doc);
      ADD_FAILURE() << "expected an error mentioning " << fragment;
    } catch (const TraceFormatError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expectError(json::array(), "JSON object");
  auto noFormat = sampleDoc();
  noFormat.erase("format");
  expectError(noFormat, "format");
  auto badShape = sampleDoc();
  badShape["ops"][0]["inputs"][0]["shape"] = "big";
  expectError(badShape, "ops[0].inputs[0].shape");
  auto badPhase = sampleDoc();
  badPhase["ops"][1]["phase"] = "sideways";
  expectError(badPhase, "ops[1].phase");
  auto noName = sampleDoc();
  noName["ops"][0].erase("name");
  expectError(noName, "ops[0].name");
  auto badMode = sampleDoc();
  badMode["mode"] = "tpu";
  expectError(badMode, "trace.mode must be shape, cpu or cuda");
}

// x * x: the second input is the first tensor again, which memory reads once.
TEST(TraceTest, AnInputPassedTwiceNamesItsFirstPlace) {
  auto doc = sampleDoc();
  const json x = {{"shape", {8, 8}}, {"dtype", "float32"}, {"contiguous", true}};
  json again = x;
  again["same_as"] = 0;
  doc["ops"][0]["inputs"] = {x, again};
  const Trace t = traceFromJson(doc);
  EXPECT_EQ(t.ops[0].input(0)->sameAs, -1);
  EXPECT_EQ(t.ops[0].input(1)->sameAs, 0);
  const json written = traceToJson(t)["ops"][0]["inputs"];
  EXPECT_FALSE(written[0].contains("same_as"));
  EXPECT_EQ(written[1]["same_as"], 0);

  auto expectError = [&](json sameAs) {
    auto bad = doc;
    bad["ops"][0]["inputs"][1]["same_as"] = sameAs;
    try {
      traceFromJson(bad);
      ADD_FAILURE() << "expected an error for same_as " << sameAs.dump();
    } catch (const TraceFormatError& e) {
      EXPECT_NE(std::string(e.what()).find("ops[0].inputs[1].same_as must be the index of an "
                                           "earlier input"),
                std::string::npos)
          << e.what();
    }
  };
  expectError(1);
  expectError(-2);
  expectError("first");
}

TEST(TraceTest, ModesAreTextOnlyInTheDocument) {
  for (const TraceMode mode : {TraceMode::Shape, TraceMode::Cpu, TraceMode::Cuda}) {
    EXPECT_EQ(traceModeFromString(toString(mode)), mode);
    auto doc = sampleDoc();
    doc["mode"] = toString(mode);
    EXPECT_EQ(traceFromJson(doc).mode, mode);
    EXPECT_EQ(traceToJson(traceFromJson(doc))["mode"], toString(mode));
  }
  EXPECT_FALSE(traceModeFromString("CUDA").has_value());
}

TEST(TensorMetaTest, ElementSizesFollowDtype) {
  EXPECT_EQ((TensorMeta{{2, 3}, ScalarType::BFloat16, true}).bytes(), 12);
  EXPECT_EQ((TensorMeta{{4}, ScalarType::Int64, true}).bytes(), 32);
  EXPECT_EQ((TensorMeta{{}, ScalarType::Float32, true}).numel(), 1)
      << "a scalar tensor has one element";
  EXPECT_EQ((TensorMeta{{0, 5}, ScalarType::Float32, true}).numel(), 0);
}

} // namespace
} // namespace wavecast
