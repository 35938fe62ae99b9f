#include "wavecast/trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace wavecast {
namespace {

TEST(ScalarType, EveryTypeRoundTripsThroughTorchsName) {
  for (int i = 0; i <= static_cast<int>(ScalarType::Other); ++i) {
    const auto type = static_cast<ScalarType>(i);
    EXPECT_EQ(scalarTypeFromString(toString(type)), type) << toString(type);
  }
  EXPECT_STREQ(toString(ScalarType::BFloat16), "bfloat16");
  EXPECT_STREQ(toString(ScalarType::Float8E4M3), "float8_e4m3fn");
}

TEST(ScalarType, TypesWavecastDoesNotPriceAreOtherAndFourBytes) {
  EXPECT_EQ(scalarTypeFromString("quint8"), ScalarType::Other);
  EXPECT_EQ(scalarTypeFromString("torch.float32"), ScalarType::Other) << "names come without torch.";
  EXPECT_EQ(elementSize(ScalarType::Other), 4);
  EXPECT_FALSE(isFloatingPoint(ScalarType::Other));
}

TEST(ScalarType, SizesAndFloatingPoint) {
  EXPECT_EQ(elementSize(ScalarType::Float64), 8);
  EXPECT_EQ(elementSize(ScalarType::BFloat16), 2);
  EXPECT_EQ(elementSize(ScalarType::Float8E5M2), 1);
  EXPECT_EQ(elementSize(ScalarType::Complex128), 16);
  EXPECT_EQ(elementSize(ScalarType::Bool), 1);
  EXPECT_TRUE(isFloatingPoint(ScalarType::Float8E4M3));
  EXPECT_TRUE(isFloatingPoint(ScalarType::Float64));
  EXPECT_FALSE(isFloatingPoint(ScalarType::Int64));
  EXPECT_FALSE(isFloatingPoint(ScalarType::Complex64)) << "complex math is not priced as real";
}

TEST(ScalarType, TraceDocumentKeepsDtypesAndAutocast) {
  const auto doc = nlohmann::json::parse(R"({
    "format": "wavecast-trace", "version": 1, "mode": "shape", "entry_file": "/p/train.py",
    "precision": {"matmul_tf32": false, "cudnn_tf32": true, "autocast": "bfloat16"},
    "ops": [{"id": 0, "name": "aten::mm", "phase": "forward",
             "inputs": [{"shape": [2, 3], "dtype": "bfloat16"}, {"shape": [3], "dtype": "int64"}],
             "outputs": [{"shape": [2], "dtype": "float8_e5m2"}]}]})");
  const Trace trace = traceFromJson(doc);
  ASSERT_EQ(trace.ops.size(), 1u);
  EXPECT_EQ(trace.ops[0].inputs[0]->dtype, ScalarType::BFloat16);
  EXPECT_EQ(trace.ops[0].inputs[1]->dtype, ScalarType::Int64);
  EXPECT_EQ(trace.ops[0].outputs[0]->dtype, ScalarType::Float8E5M2);
  ASSERT_TRUE(trace.precision && trace.precision->autocast);
  EXPECT_EQ(*trace.precision->autocast, ScalarType::BFloat16);
  const auto again = traceToJson(trace);
  EXPECT_EQ(again["ops"][0]["inputs"][0]["dtype"], "bfloat16");
  EXPECT_EQ(again["precision"]["autocast"], "bfloat16");
}

} // namespace
} // namespace wavecast
