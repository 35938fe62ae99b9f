#include "wavecast/eval/fx_mapping.h"

#include <gtest/gtest.h>

namespace wavecast::eval {
namespace {

using learned::ElementwiseOp;
using learned::KernelFamily;

FxRow row(const std::string& kind, const std::string& target,
          std::vector<std::vector<int64_t>> inputs, std::vector<int64_t> output,
          const std::string& moduleClass = "") {
  FxRow r;
  r.kind = kind;
  r.target = target;
  r.inputShapes = std::move(inputs);
  r.outputShape = std::move(output);
  r.moduleClass = moduleClass;
  return r;
}

TEST(FxMapping, LinearModuleIsOneGemmForwardTwoBackward) {
  const FxRow linear = row("call_module", "bert.encoder.layer.0.intermediate.dense",
                           {{8, 512, 1024}}, {8, 512, 4096}, "Linear");
  const MappedRow inference = mapFxRow(linear, false);
  ASSERT_TRUE(inference.mapped);
  EXPECT_EQ(inference.family, OpFamily::Gemm);
  ASSERT_EQ(inference.forward.size(), 1u);
  EXPECT_EQ(inference.forward[0].family, KernelFamily::Linear);
  EXPECT_EQ(inference.forward[0].m, 4096);
  EXPECT_EQ(inference.forward[0].n, 1024);
  EXPECT_EQ(inference.forward[0].k, 4096);
  EXPECT_TRUE(inference.backward.empty());

  const MappedRow training = mapFxRow(linear, true);
  ASSERT_EQ(training.backward.size(), 2u);
  // dX: (m x k) . (k x n); dW: (k x m) . (m x n)
  EXPECT_EQ(training.backward[0].describe(), "linear m=4096 n=4096 k=1024");
  EXPECT_EQ(training.backward[1].describe(), "linear m=4096 n=4096 k=1024");
  ASSERT_EQ(training.accumulate.size(), 1u);
  EXPECT_EQ(training.accumulate[0].describe(), "elementwise add 1024x4096");
}

TEST(FxMapping, AddmmOfConv1dUsesTheWeightOperand) {
  const MappedRow m = mapFxRow(row("call_function", "<built-in method addmm of type object at 0x1>",
                                   {{5120}, {4096, 1280}, {1280, 5120}}, {4096, 5120}),
                               false);
  ASSERT_TRUE(m.mapped);
  EXPECT_EQ(m.op, "aten::addmm");
  EXPECT_EQ(m.forward[0].describe(), "linear m=4096 n=1280 k=5120");
}

TEST(FxMapping, WhereWithABroadcastMaskStreamsOneTensor) {
  // GPT-2's causal mask [1, 1, s, s] stays in cache while the scores stream.
  const MappedRow masked =
      mapFxRow(row("call_function", "<built-in method where of type object>",
                   {{1, 1, 1024, 1024}, {4, 20, 1024, 1024}, {1}}, {4, 20, 1024, 1024}),
               false);
  ASSERT_TRUE(masked.mapped);
  ASSERT_EQ(masked.forward.size(), 1u);
  EXPECT_EQ(masked.forward[0].op, ElementwiseOp::AddScalar);
  const MappedRow full = mapFxRow(row("call_function", "<built-in method where of type object>",
                                      {{4, 1024}, {4, 1024}, {4, 1024}}, {4, 1024}),
                                  false);
  EXPECT_EQ(full.forward[0].op, ElementwiseOp::Add);
}

TEST(FxMapping, BatchedMatmulFoldsLeadingDimensions) {
  const MappedRow m =
      mapFxRow(row("call_function", "<built-in method matmul of type object at 0x1>",
                   {{8, 16, 512, 64}, {8, 16, 64, 512}}, {8, 16, 512, 512}),
               true);
  ASSERT_TRUE(m.mapped);
  EXPECT_EQ(m.forward[0].describe(), "bmm b=128 m=512 n=64 k=512");
  ASSERT_EQ(m.backward.size(), 2u);
  EXPECT_EQ(m.backward[0].describe(), "bmm b=128 m=512 n=512 k=64");
  EXPECT_EQ(m.backward[1].describe(), "bmm b=128 m=64 n=512 k=512");
}

TEST(FxMapping, RowWiseAndElementwiseOps) {
  const MappedRow softmax = mapFxRow(
      row("call_function", "<function softmax at 0x1>", {{8, 16, 512, 512}}, {8, 16, 512, 512}),
      false);
  EXPECT_EQ(softmax.family, OpFamily::Softmax);
  EXPECT_EQ(softmax.forward[0].describe(), "softmax 65536x512");

  const MappedRow norm =
      mapFxRow(row("call_module", "ln", {{4, 1024, 1280}}, {4, 1024, 1280}, "LayerNorm"), true);
  EXPECT_EQ(norm.family, OpFamily::Norm);
  EXPECT_EQ(norm.forward[0].describe(), "layernorm 4096x1280");
  EXPECT_EQ(norm.backward.size(), 2u);

  const MappedRow scaled = mapFxRow(
      row("call_function", "<built-in function mul>", {{4, 1024, 5120}}, {4, 1024, 5120}), false);
  EXPECT_EQ(scaled.forward[0].op, ElementwiseOp::MulScalar);
  const MappedRow masked = mapFxRow(row("call_function", "<built-in function add>",
                                        {{8, 16, 512, 512}, {8, 1, 1, 512}}, {8, 16, 512, 512}),
                                    false);
  EXPECT_EQ(masked.forward[0].op, ElementwiseOp::AddScalar); // the mask broadcasts from cache
  EXPECT_EQ(masked.family, OpFamily::Elementwise);
  const MappedRow residual = mapFxRow(row("call_function", "<built-in function add>",
                                          {{8, 512, 1024}, {8, 512, 1024}}, {8, 512, 1024}),
                                      false);
  EXPECT_EQ(residual.forward[0].op, ElementwiseOp::Add);

  const FxRow dropout = row("call_module", "drop", {{8, 512, 1024}}, {8, 512, 1024}, "Dropout");
  EXPECT_TRUE(mapFxRow(dropout, false).forward.empty()); // identity at inference
  EXPECT_EQ(mapFxRow(dropout, true).forward.size(), 1u);
}

TEST(FxMapping, HostSideRowsAreMetadataAndUnknownRowsAreNotDropped) {
  EXPECT_EQ(mapFxRow(row("call_function", "<built-in function add>", {{1}}, {1}), false).family,
            OpFamily::Metadata);
  EXPECT_EQ(
      mapFxRow(row("call_method", "view", {{8, 512, 1024}, {1}}, {8, 512, 16, 64}), false).family,
      OpFamily::Metadata);
  EXPECT_EQ(mapFxRow(row("placeholder", "input_ids", {}, {8, 512}), false).family,
            OpFamily::Metadata);
  const MappedRow unknown = mapFxRow(
      row("call_function", "<built-in method frobnicate of type object at 0x1>", {{2, 2}}, {2, 2}),
      false);
  EXPECT_FALSE(unknown.mapped);
  EXPECT_EQ(unknown.reason, "no mapping for function 'frobnicate'");
  EXPECT_FALSE(mapFxRow(row("call_module", "x", {{2, 2}}, {2, 2}, "Conv3d"), false).mapped);
}

} // namespace
} // namespace wavecast::eval
