#include "wavecast/learned/learned_op_time_model.h"

#include <gtest/gtest.h>

namespace wavecast::learned {
namespace {

TensorMeta tensor(std::vector<int64_t> shape, ScalarType dtype = ScalarType::Float32) {
  TensorMeta t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

OpRecord op(const std::string& name, std::vector<std::optional<TensorMeta>> inputs,
            std::vector<std::optional<TensorMeta>> outputs = {}) {
  OpRecord r;
  r.name = name;
  r.inputs = std::move(inputs);
  r.outputs = std::move(outputs);
  return r;
}

std::string shapeOf(const OpRecord& r) {
  const auto s = kernelShapeOf(r);
  return s ? s->describe() : "none";
}

TEST(KernelShapeOf, Gemms) {
  EXPECT_EQ(
      shapeOf(op("aten::addmm", {tensor({1024}), tensor({4096, 1280}), tensor({1280, 1024})})),
      "linear m=4096 n=1280 k=1024");
  EXPECT_EQ(shapeOf(op("aten::mm", {tensor({64, 32}), tensor({32, 16})})), "linear m=64 n=32 k=16");
  EXPECT_EQ(shapeOf(op("aten::bmm", {tensor({8, 64, 32}), tensor({8, 32, 16})})),
            "bmm b=8 m=64 n=32 k=16");
  EXPECT_EQ(shapeOf(op("aten::linear", {tensor({4, 128, 768}), tensor({3072, 768})})),
            "linear m=512 n=768 k=3072");
  // Half precision runs on tensor cores the FP32 models never saw.
  EXPECT_EQ(shapeOf(op("aten::mm", {tensor({64, 32}, ScalarType::Float16),
                                    tensor({32, 16}, ScalarType::Float16)})),
            "none");
}

TEST(KernelShapeOf, ConvolutionsNeuSightMeasured) {
  OpRecord conv = op("aten::convolution", {tensor({32, 3, 32, 32}), tensor({16, 3, 3, 3})});
  conv.args["stride"] = std::vector<int64_t>{1, 1};
  conv.args["padding"] = std::vector<int64_t>{1, 1};
  conv.args["dilation"] = std::vector<int64_t>{1, 1};
  conv.args["groups"] = int64_t{1};
  EXPECT_EQ(shapeOf(conv), "conv2d b=32 cin=3 cout=16 k=3 hw=32 s=1 p=1");
  conv.args["groups"] = int64_t{3};
  EXPECT_EQ(shapeOf(conv), "none"); // grouped: left to the analytic model
}

TEST(KernelShapeOf, RowWiseAndElementwise) {
  EXPECT_EQ(shapeOf(op("aten::native_layer_norm", {tensor({8, 512, 1024})})),
            "layernorm 4096x1024");
  OpRecord softmax = op("aten::_softmax", {tensor({8, 16, 512, 512})});
  softmax.args["dim"] = int64_t{-1};
  EXPECT_EQ(shapeOf(softmax), "softmax 65536x512");
  softmax.args["dim"] = int64_t{1};
  EXPECT_EQ(shapeOf(softmax), "none");
  EXPECT_EQ(shapeOf(op("aten::add", {tensor({8, 1024}), tensor({8, 1024})}, {tensor({8, 1024})})),
            "elementwise add 8x1024");
  EXPECT_EQ(shapeOf(op("aten::mul", {tensor({8, 1024}), std::nullopt}, {tensor({8, 1024})})),
            "elementwise mulu 8x1024");
  // NeuSight measured operands of one shape; a broadcast bias runs another kernel.
  EXPECT_EQ(shapeOf(op("aten::add", {tensor({8, 1024}), tensor({1024})}, {tensor({8, 1024})})),
            "none");
  EXPECT_EQ(shapeOf(op("aten::gelu", {tensor({8, 4096})}, {tensor({8, 4096})})),
            "elementwise gelu 8x4096");
  EXPECT_EQ(
      shapeOf(op("aten::embedding", {tensor({30522, 1024}), tensor({8, 512}, ScalarType::Int64)})),
      "none");
}

} // namespace
} // namespace wavecast::learned
