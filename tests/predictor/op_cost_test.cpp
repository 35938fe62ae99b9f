// Pins the FLOP and byte counts of every op family (docs/predictor.md has the formulas).
#include "wavecast/predictor/op_cost.h"

#include <gtest/gtest.h>

namespace wavecast {
namespace {

TensorMeta tensor(std::vector<int64_t> shape, ScalarType dtype = ScalarType::Float32) {
  TensorMeta t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

OpRecord op(std::string name, std::vector<std::optional<TensorMeta>> inputs,
            std::vector<std::optional<TensorMeta>> outputs,
            std::map<std::string, ArgValue> args = {}, Phase phase = Phase::Forward) {
  OpRecord record;
  record.name = std::move(name);
  record.inputs = std::move(inputs);
  record.outputs = std::move(outputs);
  record.args = std::move(args);
  record.phase = phase;
  return record;
}

using Ints = std::vector<int64_t>;

TEST(OpCost, Convolution) {
  // 2 * N * out positions * numel(weight) + bias: 2*32*1024*432 + 32*16*1024.
  const auto conv = estimateOpCost(
      op("aten::convolution", {tensor({32, 3, 32, 32}), tensor({16, 3, 3, 3}), tensor({16})},
         {tensor({32, 16, 32, 32})},
         {{"stride", Ints{1, 1}}, {"padding", Ints{1, 1}}, {"groups", int64_t{1}}}));
  EXPECT_EQ(conv.family, CostFamily::Conv);
  EXPECT_EQ(conv.unit, ComputeUnit::Matrix);
  EXPECT_DOUBLE_EQ(conv.flops, 28835840);
  EXPECT_DOUBLE_EQ(conv.bytes, 4.0 * (98304 + 432 + 524288));
  EXPECT_DOUBLE_EQ(conv.gemm.m, 32 * 1024);
  EXPECT_DOUBLE_EQ(conv.gemm.n, 16);
  EXPECT_DOUBLE_EQ(conv.gemm.k, 27);
  // float32: no layout transforms, but PyTorch adds the bias after cuDNN in a kernel of
  // its own (output.add_(bias)), reading and writing the whole output.
  EXPECT_DOUBLE_EQ(conv.helperBytes, 4.0 * (2 * 524288 + 16));
  // The bias is broadcast over the output: the add runs at the element rate.
  EXPECT_DOUBLE_EQ(conv.helperSmCycles, 524288 * 0.858);
  EXPECT_EQ(conv.kernels, 2);
  // bfloat16 on NCHW: where cuDNN's tensor-core kernels run on NHWC, input, weight and
  // output are each transformed (read and written) around the convolution, in kernels
  // of their own (layoutTransformsOn says on which GPUs).
  const auto half = estimateOpCost(
      op("aten::convolution",
         {tensor({32, 3, 32, 32}, ScalarType::BFloat16),
          tensor({16, 3, 3, 3}, ScalarType::BFloat16), tensor({16}, ScalarType::BFloat16)},
         {tensor({32, 16, 32, 32}, ScalarType::BFloat16)},
         {{"stride", Ints{1, 1}}, {"padding", Ints{1, 1}}}));
  EXPECT_DOUBLE_EQ(half.helperBytes, 2.0 * (2 * 524288 + 16));
  EXPECT_DOUBLE_EQ(half.layoutTransformBytes, 2 * 2.0 * (98304 + 432 + 524288));
  EXPECT_EQ(half.kernels, 2);
  EXPECT_EQ(half.layoutTransformKernels, 3);
  EXPECT_DOUBLE_EQ(conv.layoutTransformBytes, 0);
  // Backward: each of the two cuDNN calls transforms grad_output, weight and input.
  const auto halfBack = estimateOpCost(op(
      "aten::convolution_backward",
      {tensor({32, 16, 32, 32}, ScalarType::BFloat16),
       tensor({32, 3, 32, 32}, ScalarType::BFloat16), tensor({16, 3, 3, 3}, ScalarType::BFloat16)},
      {tensor({32, 3, 32, 32}, ScalarType::BFloat16), tensor({16, 3, 3, 3}, ScalarType::BFloat16),
       std::nullopt},
      {{"output_mask", Ints{1, 1, 0}}}, Phase::Backward));
  EXPECT_DOUBLE_EQ(halfBack.layoutTransformBytes, 2 * 2 * 2.0 * (524288 + 432 + 98304));
  EXPECT_EQ(halfBack.kernels, 2);
  EXPECT_EQ(halfBack.layoutTransformKernels, 6);
}

TEST(OpCost, ConvolutionsOnFewChannelsPerTapAreNarrowWork) {
  // A first layer on 3 channels: cuDNN's tensor-core implicit GEMM reduces over 8 channels
  // per tap, so its work is priced as narrow: per position of the output written.
  const auto first = estimateOpCost(
      op("aten::convolution", {tensor({32, 3, 32, 32}), tensor({16, 3, 3, 3})},
         {tensor({32, 16, 32, 32})}, {{"stride", Ints{1, 1}}, {"padding", Ints{1, 1}}}));
  ASSERT_EQ(first.narrowConvs.size(), 1u);
  EXPECT_EQ(first.narrowConvs[0].kernel, NarrowConvKernel::Data);
  EXPECT_DOUBLE_EQ(first.narrowConvs[0].positions, 32 * 1024);
  EXPECT_DOUBLE_EQ(first.narrowConvs[0].multiplyAdds, first.flops / 2);
  // Its backward: the input gradient writes the image, the weight gradient runs over the
  // output's positions.
  const auto back =
      estimateOpCost(op("aten::convolution_backward",
                        {tensor({32, 16, 16, 16}), tensor({32, 3, 32, 32}), tensor({16, 3, 3, 3})},
                        {}, {{"output_mask", Ints{1, 1, 0}}}, Phase::Backward));
  ASSERT_EQ(back.narrowConvs.size(), 2u);
  EXPECT_EQ(back.narrowConvs[0].kernel, NarrowConvKernel::Data);
  EXPECT_DOUBLE_EQ(back.narrowConvs[0].positions, 32 * 1024);
  EXPECT_EQ(back.narrowConvs[1].kernel, NarrowConvKernel::WeightGradient);
  EXPECT_DOUBLE_EQ(back.narrowConvs[1].positions, 32 * 256);
  EXPECT_DOUBLE_EQ(back.narrowConvs[0].multiplyAdds + back.narrowConvs[1].multiplyAdds,
                   back.flops / 2);
  // A generator's last layer writes 3 channels: per position of its (larger) output.
  const auto last =
      estimateOpCost(op("aten::convolution", {tensor({8, 64, 32, 32}), tensor({64, 3, 4, 4})}, {},
                        {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"transposed", true}}));
  ASSERT_EQ(last.narrowConvs.size(), 1u);
  EXPECT_DOUBLE_EQ(last.narrowConvs[0].positions, 8 * 64 * 64);
  EXPECT_DOUBLE_EQ(last.narrowConvs[0].multiplyAdds, last.flops / 2);
  // 8 channels per tap, and grouped (depthwise) convolutions, are not.
  EXPECT_TRUE(
      estimateOpCost(op("aten::convolution", {tensor({32, 8, 32, 32}), tensor({16, 8, 3, 3})}, {},
                        {{"padding", Ints{1, 1}}}))
          .narrowConvs.empty());
  EXPECT_TRUE(
      estimateOpCost(op("aten::convolution", {tensor({8, 32, 16, 16}), tensor({32, 1, 3, 3})}, {},
                        {{"padding", Ints{1, 1}}, {"groups", int64_t{32}}}))
          .narrowConvs.empty());
}

TEST(OpCost, GroupedStridedConvolutionWithoutTracedOutput) {
  // Depthwise 3x3, stride 2, pad 1: 16x16 -> 8x8; 2 * 8 * 64 * (32*1*9).
  const auto conv = estimateOpCost(
      op("aten::convolution", {tensor({8, 32, 16, 16}), tensor({32, 1, 3, 3}), std::nullopt}, {},
         {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"groups", int64_t{32}}}));
  EXPECT_DOUBLE_EQ(conv.flops, 294912);
  EXPECT_DOUBLE_EQ(conv.bytes, 4.0 * (65536 + 288 + 16384));
  EXPECT_DOUBLE_EQ(conv.gemm.batch, 32);
  // With a bias: PyTorch's own depthwise kernel adds it (no kernel of its own) in float32
  // and bfloat16, on NCHW (no layout transforms either); float16 and channels_last
  // depthwise convolutions go to cuDNN, which leaves the bias to an add_ after it.
  const auto withBias = [](ScalarType dtype, bool contiguous) {
    TensorMeta input = tensor({8, 32, 16, 16}, dtype);
    input.contiguous = contiguous;
    return estimateOpCost(
        op("aten::convolution", {input, tensor({32, 1, 3, 3}, dtype), tensor({32}, dtype)}, {},
           {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"groups", int64_t{32}}}));
  };
  for (const ScalarType dtype : {ScalarType::Float32, ScalarType::BFloat16}) {
    const auto own = withBias(dtype, true);
    EXPECT_DOUBLE_EQ(own.helperBytes, 0);
    EXPECT_EQ(own.kernels, 1);
  }
  const auto half = withBias(ScalarType::Float16, true);
  EXPECT_DOUBLE_EQ(half.helperBytes, 2.0 * (2 * 16384 + 32));
  EXPECT_DOUBLE_EQ(half.layoutTransformBytes, 2 * 2.0 * (65536 + 288 + 16384));
  EXPECT_DOUBLE_EQ(withBias(ScalarType::Float32, false).helperBytes, 4.0 * (2 * 16384 + 32));
}

TEST(OpCost, DilatedAndTransposedConvolution) {
  // Dilation 2, 3x3 on 10x10, no padding: (10 - 4 - 1) + 1 = 6 -> 36 positions * 9.
  const auto dilated =
      estimateOpCost(op("aten::convolution", {tensor({1, 1, 10, 10}), tensor({1, 1, 3, 3})}, {},
                        {{"dilation", Ints{2, 2}}}));
  EXPECT_DOUBLE_EQ(dilated.flops, 2 * 36 * 9);
  // Transposed, stride 2, pad 1, k 4: 8x8 -> 16x16; FLOPs scale with INPUT positions:
  // 2 * (2 * 64) * numel(weight = 8*4*4*4).
  const auto transposed =
      estimateOpCost(op("aten::convolution", {tensor({2, 8, 8, 8}), tensor({8, 4, 4, 4})}, {},
                        {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"transposed", true}}));
  EXPECT_DOUBLE_EQ(transposed.flops, 131072);
  EXPECT_DOUBLE_EQ(transposed.bytes, 4.0 * (2 * 8 * 64 + 512 + 2 * 4 * 256));
}

TEST(OpCost, ConvolutionBackwardHonoursOutputMask) {
  const std::vector<std::optional<TensorMeta>> inputs{
      tensor({32, 16, 32, 32}), tensor({32, 3, 32, 32}), tensor({16, 3, 3, 3})};
  const auto all = estimateOpCost(op("aten::convolution_backward", inputs, {},
                                     {{"output_mask", Ints{1, 1, 1}}}, Phase::Backward));
  EXPECT_DOUBLE_EQ(all.flops, 2 * 28311552.0 + 524288);
  EXPECT_EQ(all.kernels, 3);
  // First layer: no grad_input.
  const auto noInput = estimateOpCost(op("aten::convolution_backward", inputs, {},
                                         {{"output_mask", Ints{0, 1, 1}}}, Phase::Backward));
  EXPECT_DOUBLE_EQ(noInput.flops, 28311552.0 + 524288);
  EXPECT_DOUBLE_EQ(noInput.bytes, 2097152.0 + 393216 + 1728);
  // grad_bias is grad_output.sum over (N, H, W), a reduction after cuDNN's kernels.
  EXPECT_DOUBLE_EQ(noInput.helperBytes, 2097152.0 + 64);
  EXPECT_EQ(noInput.kernels, 2);
}

TEST(OpCost, ConvolutionBackwardRunsTheInputAndWeightGradientsAsTheirOwnGemms) {
  // 3x3, 64 -> 128 channels, 16x16 -> 8x8 (stride 2), batch 8.
  const std::vector<std::optional<TensorMeta>> inputs{
      tensor({8, 128, 8, 8}), tensor({8, 64, 16, 16}), tensor({128, 64, 3, 3})};
  const auto cost = estimateOpCost(op("aten::convolution_backward", inputs, {},
                                      {{"output_mask", Ints{1, 1, 0}}}, Phase::Backward));
  ASSERT_EQ(cost.gemms.size(), 2u);
  // grad_input: M = N x input positions, N = Cin, K = Cout x R x S.
  const GemmShape& input = cost.gemms[0].shape;
  EXPECT_DOUBLE_EQ(input.m, 8 * 256);
  EXPECT_DOUBLE_EQ(input.n, 64);
  EXPECT_DOUBLE_EQ(input.k, 128 * 9);
  EXPECT_FALSE(input.splitK);
  // grad_weight: M = Cout, N = Cin x R x S, K = N x output positions, split-K.
  const GemmShape& weight = cost.gemms[1].shape;
  EXPECT_DOUBLE_EQ(weight.m, 128);
  EXPECT_DOUBLE_EQ(weight.n, 64 * 9);
  EXPECT_DOUBLE_EQ(weight.k, 8 * 64);
  EXPECT_TRUE(weight.splitK);
  EXPECT_DOUBLE_EQ(cost.gemms[0].flops + cost.gemms[1].flops, cost.flops);

  // Transposed (weight: Cin, Cout, R, S), 8x8 -> 16x16: the input gradient is the
  // forward's GEMM, the weight gradient sums over the input's positions.
  const std::vector<std::optional<TensorMeta>> transposedInputs{
      tensor({8, 64, 16, 16}), tensor({8, 128, 8, 8}), tensor({128, 64, 4, 4})};
  const auto transposed =
      estimateOpCost(op("aten::convolution_backward", transposedInputs, {},
                        {{"output_mask", Ints{1, 1, 0}}, {"transposed", true}}, Phase::Backward));
  ASSERT_EQ(transposed.gemms.size(), 2u);
  EXPECT_DOUBLE_EQ(transposed.gemms[0].shape.m, 8 * 64);
  EXPECT_DOUBLE_EQ(transposed.gemms[0].shape.n, 128);
  EXPECT_DOUBLE_EQ(transposed.gemms[0].shape.k, 64 * 16);
  EXPECT_DOUBLE_EQ(transposed.gemms[1].shape.m, 128);
  EXPECT_DOUBLE_EQ(transposed.gemms[1].shape.n, 64 * 16);
  EXPECT_DOUBLE_EQ(transposed.gemms[1].shape.k, 8 * 64);
}

TEST(OpCost, GroupedGemmOfAMixtureOfExperts) {
  // 2,048 (token, expert) pairs over 8 experts of 1024 -> 4096: the router decides each
  // expert's rows, so each gets an even 256.
  const auto bf16 = [](std::vector<int64_t> shape) { return tensor(shape, ScalarType::BFloat16); };
  const auto offsets = tensor({8}, ScalarType::Int32);
  const auto forward =
      estimateOpCost(op("aten::_grouped_mm", {bf16({2048, 1024}), bf16({8, 1024, 4096}), offsets},
                        {bf16({2048, 4096})}));
  EXPECT_EQ(forward.family, CostFamily::Gemm);
  EXPECT_FALSE(forward.approximate);
  EXPECT_EQ(forward.note, CostNote::EvenExpertGroups);
  EXPECT_DOUBLE_EQ(forward.gemm.batch, 8);
  EXPECT_DOUBLE_EQ(forward.gemm.m, 256);
  EXPECT_DOUBLE_EQ(forward.gemm.k, 1024);
  EXPECT_DOUBLE_EQ(forward.gemm.n, 4096);
  EXPECT_DOUBLE_EQ(forward.flops, 2.0 * 2048 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(forward.bytes, 2.0 * (2048 * 1024 + 8 * 1024 * 4096 + 2048 * 4096) + 4 * 8);
  EXPECT_EQ(forward.grouped.groups, 8);
  EXPECT_TRUE(forward.grouped.groupedKernel);
  EXPECT_EQ(forward.kernels, 1) << "one grouped kernel where the GPU has it";
  // The weight gradient, x.t() @ grad: the offsets cut K, one 1024 x 4096 matrix per expert.
  const auto weightGrad =
      estimateOpCost(op("aten::_grouped_mm", {bf16({1024, 2048}), bf16({2048, 4096}), offsets},
                        {bf16({8, 1024, 4096})}, {}, Phase::Backward));
  EXPECT_DOUBLE_EQ(weightGrad.gemm.m, 1024);
  EXPECT_DOUBLE_EQ(weightGrad.gemm.k, 256);
  EXPECT_DOUBLE_EQ(weightGrad.gemm.n, 4096);
  EXPECT_DOUBLE_EQ(weightGrad.flops, forward.flops);
  // 3-D x 2-D: the offsets cut the columns.
  const auto columns = estimateOpCost(op(
      "aten::_grouped_mm", {bf16({8, 64, 1024}), bf16({1024, 2048}), offsets}, {bf16({64, 2048})}));
  EXPECT_DOUBLE_EQ(columns.gemm.m, 64);
  EXPECT_DOUBLE_EQ(columns.gemm.n, 256);
  EXPECT_DOUBLE_EQ(columns.flops, 2.0 * 64 * 1024 * 2048);
  // 3-D x 3-D, no offsets: a batch of equal GEMMs, nothing assumed.
  const auto batched = estimateOpCost(op("aten::_grouped_mm",
                                         {bf16({8, 64, 1024}), bf16({8, 1024, 512}), std::nullopt},
                                         {bf16({8, 64, 512})}));
  EXPECT_DOUBLE_EQ(batched.flops, 2.0 * 8 * 64 * 1024 * 512);
  EXPECT_EQ(batched.note, CostNote::None);
  // float32 (autocast leaves grouped GEMMs in the weights' dtype): one mm per expert on
  // every GPU.
  const auto fp32 = estimateOpCost(op("aten::_grouped_mm",
                                      {tensor({2048, 1024}), tensor({8, 1024, 4096}), offsets},
                                      {tensor({2048, 4096})}));
  EXPECT_FALSE(fp32.grouped.groupedKernel);
  EXPECT_EQ(fp32.kernels, 8);
  // transformers' own loop (GPUs before sm80): the same GEMMs, the output zeroed first, and
  // its backward's two GEMMs per expert into zeroed gradients.
  const auto loop = estimateOpCost(op("transformers::grouped_mm_fallback",
                                      {bf16({2048, 1024}), bf16({8, 1024, 4096}), offsets},
                                      {bf16({2048, 4096})}));
  EXPECT_DOUBLE_EQ(loop.flops, forward.flops);
  EXPECT_FALSE(loop.grouped.groupedKernel);
  EXPECT_EQ(loop.kernels, 9);
  const auto loopBackward =
      estimateOpCost(op("transformers::grouped_mm_fallback_backward",
                        {bf16({2048, 1024}), bf16({8, 1024, 4096}), offsets, bf16({2048, 4096})},
                        {bf16({2048, 1024}), bf16({8, 1024, 4096})}, {}, Phase::Backward));
  EXPECT_DOUBLE_EQ(loopBackward.flops, 2 * forward.flops);
  EXPECT_EQ(loopBackward.kernels, 18);
  EXPECT_EQ(loopBackward.grouped.groups, 8);
}

TEST(OpCost, GroupedGemmLoopsWhereTheGpuHasNoGroupedKernel) {
  OpCost grouped;
  grouped.grouped = {8, true};
  DeviceSpec hopper, ampere;
  hopper.computeCapabilityMajor = 9;
  ampere.computeCapabilityMajor = 8;
  EXPECT_FALSE(groupedGemmLoops(grouped, hopper));
  EXPECT_TRUE(groupedGemmLoops(grouped, ampere));
  grouped.grouped.groupedKernel = false;
  EXPECT_TRUE(groupedGemmLoops(grouped, hopper)) << "CUTLASS's grouped kernel is bf16 only";
  EXPECT_FALSE(groupedGemmLoops(OpCost{}, ampere)) << "not a grouped GEMM";
}

TEST(OpCost, FourierTransformsOfAFourierNeuralOperator) {
  // torch.fft.rfft2 of [16, 32, 64, 64] float32: 512 transforms of 64 x 64 real points into
  // a onesided [64, 33] spectrum, a pass per dimension.
  const auto complex = [](std::vector<int64_t> shape) {
    return tensor(shape, ScalarType::Complex64);
  };
  const auto r2c =
      estimateOpCost(op("aten::_fft_r2c", {tensor({16, 32, 64, 64})}, {complex({16, 32, 64, 33})},
                        {{"dim", Ints{2, 3}}, {"normalization", int64_t{0}}}));
  EXPECT_EQ(r2c.family, CostFamily::Fft);
  EXPECT_FALSE(r2c.approximate);
  EXPECT_DOUBLE_EQ(r2c.flops, 2.5 * 4096 * 12 * 512);
  const double signal = 4.0 * 16 * 32 * 4096, spectrum = 8.0 * 16 * 32 * 64 * 33;
  EXPECT_DOUBLE_EQ(r2c.bytes, signal + spectrum + 2 * spectrum) << "the second pass";
  EXPECT_EQ(r2c.kernels, 2);
  // Back (irfft2, normalized by 1/n): the points are the real output's; the scaling is a
  // kernel of its own.
  const auto c2r =
      estimateOpCost(op("aten::_fft_c2r", {complex({16, 32, 64, 33})}, {tensor({16, 32, 64, 64})},
                        {{"dim", Ints{2, 3}}, {"normalization", int64_t{2}}}));
  EXPECT_DOUBLE_EQ(c2r.flops, r2c.flops);
  EXPECT_DOUBLE_EQ(c2r.helperBytes, 2 * signal);
  EXPECT_EQ(c2r.kernels, 3);
  // A complex transform along the last dimension only: twice a real one's FLOPs, one pass.
  const auto c2c = estimateOpCost(op("aten::_fft_c2c", {complex({8, 1024})}, {complex({8, 1024})},
                                     {{"dim", Ints{1}}, {"normalization", int64_t{0}}}));
  EXPECT_DOUBLE_EQ(c2c.flops, 5.0 * 1024 * 10 * 8);
  EXPECT_DOUBLE_EQ(c2c.bytes, 2 * 8.0 * 8 * 1024);
  EXPECT_EQ(c2c.kernels, 1);
}

TEST(OpCost, WeightNormReadsItsWeightTwice) {
  // A weight-normed Conv1d(80, 256, 7): the norm of each output channel's slice, then v * g /
  // norm; the backward reads the gradient and v twice the same way.
  const auto forward =
      estimateOpCost(op("aten::_weight_norm_interface", {tensor({256, 80, 7}), tensor({256, 1, 1})},
                        {tensor({256, 80, 7}), tensor({256, 1, 1})}, {{"dim", int64_t{0}}}));
  EXPECT_EQ(forward.family, CostFamily::Norm);
  EXPECT_FALSE(forward.approximate);
  const double v = 4.0 * 256 * 80 * 7, g = 4.0 * 256;
  EXPECT_DOUBLE_EQ(forward.bytes, 2 * v + (v + g) + g);
  EXPECT_EQ(forward.kernels, 1);
  const auto backward = estimateOpCost(
      op("aten::_weight_norm_interface_backward",
         {tensor({256, 80, 7}), tensor({256, 80, 7}), tensor({256, 1, 1}), tensor({256, 1, 1})},
         {tensor({256, 80, 7}), tensor({256, 1, 1})}, {{"dim", int64_t{0}}}, Phase::Backward));
  EXPECT_FALSE(backward.approximate);
  EXPECT_DOUBLE_EQ(backward.bytes, 2 * (v + v) + (v + g) + 2 * g);
  EXPECT_EQ(backward.kernels, 1);
}

TEST(OpCost, GemmLeadingDimensionAlignment) {
  const auto bf16 = [](std::vector<int64_t> shape, bool contiguous = true) {
    TensorMeta t = tensor(std::move(shape), ScalarType::BFloat16);
    t.contiguous = contiguous;
    return t;
  };
  // GPT-2's head, F.linear(x, W) as addmm(x, W.t()): W.t() is a view whose leading
  // dimension is 768 (aligned); the 50,257-wide output is 2 bytes short of it.
  auto head = estimateOpCost(
      op("aten::mm", {bf16({8184, 768}), bf16({768, 50257}, false)}, {bf16({8184, 50257})}));
  EXPECT_EQ(head.gemm.leadingDimAlignmentBytes, 2);
  EXPECT_EQ(head.note, CostNote::OddLeadingDimension);
  // nanoGPT's padded vocabulary: every leading dimension a multiple of 16 bytes.
  head = estimateOpCost(
      op("aten::mm", {bf16({8184, 768}), bf16({768, 50304}, false)}, {bf16({8184, 50304})}));
  EXPECT_EQ(head.gemm.leadingDimAlignmentBytes, 16);
  EXPECT_EQ(head.note, CostNote::None);
  // The weight gradient, grad.t() @ x: the transposed gradient's leading dimension is
  // its 50,257 rows.
  const auto weightGrad = estimateOpCost(
      op("aten::mm", {bf16({50257, 8184}, false), bf16({8184, 768})}, {bf16({50257, 768})}));
  EXPECT_EQ(weightGrad.gemm.leadingDimAlignmentBytes, 2);
  // Attention scores over 1,023 tokens: K^T's rows and the scores are 1,023 wide.
  const auto scores = estimateOpCost(
      op("aten::bmm", {bf16({96, 1023, 64}), bf16({96, 64, 1023})}, {bf16({96, 1023, 1023})}));
  EXPECT_EQ(scores.gemm.leadingDimAlignmentBytes, 2);
  // An even width that is not a multiple of 8 elements: 8-byte aligned (1,020 x 2).
  const auto even =
      estimateOpCost(op("aten::mm", {bf16({512, 1020}), bf16({1020, 512})}, {bf16({512, 512})}));
  EXPECT_EQ(even.gemm.leadingDimAlignmentBytes, 8);
  // The same odd width in float32 is 4-byte aligned: one element, not a half.
  const auto fp32 = estimateOpCost(
      op("aten::mm", {tensor({512, 1023}), tensor({1023, 512})}, {tensor({512, 512})}));
  EXPECT_EQ(fp32.gemm.leadingDimAlignmentBytes, 4);
  // A batch of tokens that is odd only in the rows (M) of a row-major product is aligned.
  const auto rows = estimateOpCost(
      op("aten::mm", {bf16({1023, 768}), bf16({768, 2304}, false)}, {bf16({1023, 2304})}));
  EXPECT_EQ(rows.gemm.leadingDimAlignmentBytes, 16);
}

// One output column or row per batch is a matrix-vector product, streamed at the
// bandwidth; a K of 1 an outer product, bound by its output elements. Neither is tiled.
TEST(OpCost, GemvAndOuterProductAreNotTiledGemms) {
  // GNMT's attention score layer, Linear(1024, 1) over 640,000 positions: forward, the
  // weight gradient (one output row) and the input gradient (K = 1).
  const auto forward = estimateOpCost(
      op("aten::mm", {tensor({640000, 1024}), tensor({1024, 1})}, {tensor({640000, 1})}));
  EXPECT_EQ(forward.gemmKernel, GemmKernel::MatrixVector);
  EXPECT_EQ(forward.unit, ComputeUnit::Vector);
  EXPECT_DOUBLE_EQ(forward.parallelElements, 640000.0 * 1024);
  EXPECT_DOUBLE_EQ(forward.bytes, 4.0 * (640000.0 * 1024 + 1024 + 640000));
  const auto weightGrad = estimateOpCost(
      op("aten::mm", {tensor({1, 640000}), tensor({640000, 1024})}, {tensor({1, 1024})}));
  EXPECT_EQ(weightGrad.gemmKernel, GemmKernel::MatrixVector);
  const auto inputGrad = estimateOpCost(
      op("aten::mm", {tensor({640000, 1}), tensor({1, 1024})}, {tensor({640000, 1024})}));
  EXPECT_EQ(inputGrad.gemmKernel, GemmKernel::OuterProduct);
  EXPECT_EQ(inputGrad.unit, ComputeUnit::Vector);
  EXPECT_DOUBLE_EQ(inputGrad.smCycles, 640000.0 * 1024 * 0.40);
  // Decoding attention, one query per head: a batch of GEMVs.
  const auto decode = estimateOpCost(
      op("aten::bmm", {tensor({96, 1, 64}), tensor({96, 64, 1024})}, {tensor({96, 1, 1024})}));
  EXPECT_EQ(decode.gemmKernel, GemmKernel::MatrixVector);
  EXPECT_DOUBLE_EQ(decode.parallelElements, 96.0 * 1024 * 64);
  // mv, dot and a Linear to one feature.
  EXPECT_EQ(estimateOpCost(op("aten::mv", {tensor({4096, 4096}), tensor({4096})}, {tensor({4096})}))
                .gemmKernel,
            GemmKernel::MatrixVector);
  EXPECT_EQ(
      estimateOpCost(op("aten::dot", {tensor({4096}), tensor({4096})}, {tensor({})})).gemmKernel,
      GemmKernel::MatrixVector);
  EXPECT_EQ(estimateOpCost(op("aten::linear", {tensor({64, 512}), tensor({1, 512}), tensor({1})},
                              {tensor({64, 1})}))
                .gemmKernel,
            GemmKernel::MatrixVector);
  // Two columns are still a tiled GEMM, and so is a 1 x 1 output over a K of 1.
  const auto twoColumns = estimateOpCost(
      op("aten::mm", {tensor({640000, 1024}), tensor({1024, 2})}, {tensor({640000, 2})}));
  EXPECT_EQ(twoColumns.gemmKernel, GemmKernel::Tiled);
  EXPECT_EQ(twoColumns.unit, ComputeUnit::Matrix);
}

TEST(OpCost, MatrixProducts) {
  auto cost =
      estimateOpCost(op("aten::mm", {tensor({64, 128}), tensor({128, 256})}, {tensor({64, 256})}));
  EXPECT_EQ(cost.family, CostFamily::Gemm);
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 64 * 256 * 128);
  EXPECT_DOUBLE_EQ(cost.bytes, 4.0 * (8192 + 32768 + 16384));
  cost = estimateOpCost(op("aten::addmm", {tensor({256}), tensor({64, 128}), tensor({128, 256})},
                           {tensor({64, 256})}));
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 64 * 256 * 128 + 64 * 256);
  cost = estimateOpCost(
      op("aten::bmm", {tensor({8, 64, 32}), tensor({8, 32, 16})}, {tensor({8, 64, 16})}));
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 8 * 64 * 16 * 32);
  cost = estimateOpCost(op("aten::baddbmm",
                           {tensor({8, 64, 16}), tensor({8, 64, 32}), tensor({8, 32, 16})},
                           {tensor({8, 64, 16})}));
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 8 * 64 * 16 * 32 + 8 * 64 * 16);
  cost = estimateOpCost(op("aten::linear", {tensor({4, 10, 128}), tensor({64, 128}), tensor({64})},
                           {tensor({4, 10, 64})}));
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 40 * 64 * 128 + 40 * 64);
  // Broadcast matmul [2,3,4,5] x [5,6]: batch 6.
  cost = estimateOpCost(
      op("aten::matmul", {tensor({2, 3, 4, 5}), tensor({5, 6})}, {tensor({2, 3, 4, 6})}));
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 6 * 4 * 6 * 5);
  // A transposed operand (a view, non-contiguous) costs the same FLOPs.
  auto transposedB = tensor({128, 256});
  transposedB.contiguous = false;
  cost = estimateOpCost(op("aten::mm", {tensor({64, 128}), transposedB}, {tensor({64, 256})}));
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 64 * 256 * 128);
  cost = estimateOpCost(op(
      "aten::mm", {tensor({64, 128}, ScalarType::Float16), tensor({128, 256}, ScalarType::Float16)},
      {tensor({64, 256}, ScalarType::Float16)}));
  EXPECT_EQ(cost.dtype, ScalarType::Float16);
  EXPECT_DOUBLE_EQ(cost.bytes, 2.0 * (8192 + 32768 + 16384));
}

TEST(OpCost, ScaledDotProductAttention) {
  const auto q = tensor({2, 4, 128, 64});
  const auto fwd = estimateOpCost(
      op("aten::scaled_dot_product_attention", {q, q, q}, {tensor({2, 4, 128, 64})}));
  EXPECT_EQ(fwd.family, CostFamily::Attention);
  EXPECT_DOUBLE_EQ(fwd.flops, 2.0 * 8 * 128 * 128 * 128 + 5.0 * 8 * 128 * 128);
  EXPECT_DOUBLE_EQ(fwd.bytes, 4.0 * 4 * 65536);
  const auto bwd = estimateOpCost(op("aten::_scaled_dot_product_efficient_attention_backward",
                                     {q, q, q, q, q}, {q, q, q}, {}, Phase::Backward));
  EXPECT_DOUBLE_EQ(bwd.flops, 2.5 * 2.0 * 8 * 128 * 128 * 128 + 10.0 * 8 * 128 * 128);
}

TEST(OpCost, CausalAttentionSkipsTheMaskedBlocks) {
  const auto q = tensor({1, 12, 1024, 64});
  const double full = 2.0 * 12 * 1024 * 1024 * 128 + 5.0 * 12 * 1024 * 1024;
  // Flash: 8 x 8 blocks of 128, of which 8 + 7 + ... + 1 = 36 are computed.
  const auto flash = estimateOpCost(
      op("aten::_scaled_dot_product_flash_attention", {q, q, q}, {q}, {{"is_causal", true}}));
  EXPECT_DOUBLE_EQ(flash.flops, full * 36 / 64);
  // Memory-efficient: 16 x 16 blocks of 64, 136 computed; its backward skips them too.
  const auto efficientBackward =
      estimateOpCost(op("aten::_scaled_dot_product_efficient_attention_backward", {q, q, q, q, q},
                        {q, q, q}, {{"is_causal", true}}, Phase::Backward));
  EXPECT_DOUBLE_EQ(efficientBackward.flops,
                   (2.5 * 2.0 * 12 * 1024 * 1024 * 128 + 10.0 * 12 * 1024 * 1024) * 136 / 256);
  // A sequence within one block, a non-causal call and the math composite compute it all.
  const auto shortSeq = tensor({16, 8, 50, 64});
  const auto oneBlock =
      estimateOpCost(op("aten::_scaled_dot_product_flash_attention", {shortSeq, shortSeq, shortSeq},
                        {shortSeq}, {{"is_causal", true}}));
  EXPECT_DOUBLE_EQ(oneBlock.flops, 2.0 * 128 * 50 * 50 * 128 + 5.0 * 128 * 50 * 50);
  const auto notCausal = estimateOpCost(
      op("aten::_scaled_dot_product_flash_attention", {q, q, q}, {q}, {{"is_causal", false}}));
  EXPECT_DOUBLE_EQ(notCausal.flops, full);
  const auto composite = estimateOpCost(
      op("aten::scaled_dot_product_attention", {q, q, q}, {q}, {{"is_causal", true}}));
  EXPECT_DOUBLE_EQ(composite.flops, full);
}

TEST(OpCost, Normalisation) {
  const auto ln = estimateOpCost(
      op("aten::native_layer_norm", {tensor({32, 128, 768}), tensor({768}), tensor({768})},
         {tensor({32, 128, 768}), tensor({32, 128, 1}), tensor({32, 128, 1})}));
  EXPECT_EQ(ln.family, CostFamily::Norm);
  EXPECT_DOUBLE_EQ(ln.flops, 8.0 * 3145728);
  EXPECT_DOUBLE_EQ(ln.bytes, 12582912.0 + (12582912.0 + 2 * 16384) + 6144);
  // Batch norm in training: a per-channel reduction reading x (its cost), then an
  // elementwise pass reading x and writing y at full bandwidth (helperBytes).
  const auto bn = estimateOpCost(
      op("aten::native_batch_norm",
         {tensor({8, 16, 4, 4}), tensor({16}), tensor({16}), tensor({16}), tensor({16})},
         {tensor({8, 16, 4, 4}), tensor({16}), tensor({16})}, {{"training", true}}));
  EXPECT_DOUBLE_EQ(bn.bytes, 8192.0 + 256);
  EXPECT_DOUBLE_EQ(bn.helperBytes, 8192.0 + 8320);
  EXPECT_DOUBLE_EQ(bn.flops, 90.0 * 2048);
  EXPECT_EQ(bn.blocksPerSm, 2);
  EXPECT_EQ(bn.kernels, 1);
  const auto bnEval = estimateOpCost(
      op("aten::native_batch_norm",
         {tensor({8, 16, 4, 4}), tensor({16}), tensor({16}), tensor({16}), tensor({16})},
         {tensor({8, 16, 4, 4}), tensor({0}), tensor({0})}, {{"training", false}}));
  EXPECT_DOUBLE_EQ(bnEval.bytes, 8192.0 + 8192 + 256);
  EXPECT_DOUBLE_EQ(bnEval.helperBytes, 0);
  // Backward: the reduction reads (dy, x); the elementwise pass reads them again and
  // writes dx (+ the small weight/bias gradients).
  const auto bnBack =
      estimateOpCost(op("aten::native_batch_norm_backward",
                        {tensor({8, 16, 4, 4}), tensor({8, 16, 4, 4}), tensor({16})},
                        {tensor({8, 16, 4, 4}), tensor({16}), tensor({16})}, {}, Phase::Backward));
  EXPECT_DOUBLE_EQ(bnBack.bytes, 8192.0 + 8192 + 64);
  EXPECT_DOUBLE_EQ(bnBack.helperBytes, 8192.0 + 8192 + 8320);
  EXPECT_DOUBLE_EQ(bnBack.flops, 90.0 * 2048);
  EXPECT_EQ(bnBack.blocksPerSm, 6);
  EXPECT_EQ(bnBack.kernels, 2);
  // One block per NCHW channel, in both directions; layer norm and channels_last batch
  // norm spread per element.
  EXPECT_DOUBLE_EQ(bn.parallelBlocks, 16);
  EXPECT_DOUBLE_EQ(bnBack.parallelBlocks, 16);
  EXPECT_DOUBLE_EQ(bnEval.parallelBlocks, 0) << "inference: one elementwise pass";
  EXPECT_DOUBLE_EQ(ln.parallelBlocks, 0);
  EXPECT_EQ(ln.blocksPerSm, 0);
  auto nhwc = tensor({8, 16, 4, 4});
  nhwc.contiguous = false;
  EXPECT_DOUBLE_EQ(estimateOpCost(op("aten::native_batch_norm",
                                     {nhwc, tensor({16}), tensor({16}), tensor({16}), tensor({16})},
                                     {nhwc, tensor({16}), tensor({16})}, {{"training", true}}))
                       .parallelBlocks,
                   0);
  // bfloat16 (autocast: float32 weights) goes to PyTorch's own kernels, whose reduction is
  // slower per element and holds an SM per block; float16 still goes to cuDNN.
  const auto bf16 = tensor({8, 16, 4, 4}, ScalarType::BFloat16);
  const auto bnBf16 = estimateOpCost(
      op("aten::native_batch_norm", {bf16, tensor({16}), tensor({16}), tensor({16}), tensor({16})},
         {bf16, tensor({16}), tensor({16})}, {{"training", true}}));
  EXPECT_DOUBLE_EQ(bnBf16.bytes, 4096.0 + 256);
  EXPECT_DOUBLE_EQ(bnBf16.flops, 380.0 * 2048);
  EXPECT_EQ(bnBf16.blocksPerSm, 1);
  const auto fp16 = tensor({8, 16, 4, 4}, ScalarType::Float16);
  const auto bnFp16 = estimateOpCost(
      op("aten::native_batch_norm", {fp16, tensor({16}), tensor({16}), tensor({16}), tensor({16})},
         {fp16, tensor({16}), tensor({16})}, {{"training", true}}));
  EXPECT_DOUBLE_EQ(bnFp16.bytes, 4096.0 + 256);
  EXPECT_DOUBLE_EQ(bnFp16.helperBytes, 4096.0 + 4096 + 128);
  EXPECT_DOUBLE_EQ(bnFp16.flops, bn.flops);
  const auto gn =
      estimateOpCost(op("aten::native_group_norm", {tensor({2, 4, 8, 8}), tensor({4}), tensor({4})},
                        {tensor({2, 4, 8, 8}), tensor({2, 2}), tensor({2, 2})}));
  EXPECT_DOUBLE_EQ(gn.bytes, 2 * 2048.0 + 2048 + 32 + 32);
}

TEST(OpCost, ElementwiseWithBroadcastingAndInPlace) {
  auto add = estimateOpCost(op("aten::add", {tensor({1000}), tensor({1000})}, {tensor({1000})}));
  EXPECT_EQ(add.family, CostFamily::Elementwise);
  EXPECT_DOUBLE_EQ(add.bytes, 12000);
  EXPECT_DOUBLE_EQ(add.flops, 1000);
  EXPECT_DOUBLE_EQ(add.smCycles, 0); // vectorized: bound by its bytes
  add = estimateOpCost(op("aten::add", {tensor({64, 100}), tensor({100})}, {tensor({64, 100})}));
  EXPECT_DOUBLE_EQ(add.bytes, 25600.0 + 400 + 25600);
  EXPECT_DOUBLE_EQ(add.flops, 6400);
  // A broadcast operand: the legacy kernel's cycles per element (bench/truth/fit_broadcast.py).
  EXPECT_DOUBLE_EQ(add.smCycles, 6400 * 0.858);
  // In place with no recorded output still writes self.
  add = estimateOpCost(op("aten::add_", {tensor({1000}), tensor({1000})}, {}));
  EXPECT_DOUBLE_EQ(add.bytes, 12000);
  // A one-element operand is not a broadcast the kernel pays for.
  add = estimateOpCost(op("aten::mul", {tensor({1000}), tensor({})}, {tensor({1000})}));
  EXPECT_DOUBLE_EQ(add.smCycles, 0);
  const auto gelu = estimateOpCost(op("aten::gelu", {tensor({10})}, {tensor({10})}));
  EXPECT_DOUBLE_EQ(gelu.flops, 140);
  const auto relu = estimateOpCost(op("aten::threshold_backward", {tensor({10}), tensor({10})},
                                      {tensor({10})}, {}, Phase::Backward));
  EXPECT_DOUBLE_EQ(relu.bytes, 120);
  // masked_fill clones self, then fills the clone: 64x100 floats and a broadcast mask.
  const auto mask = tensor({1, 100}, ScalarType::Bool);
  const auto fill = estimateOpCost(
      op("aten::masked_fill", {tensor({64, 100}), mask}, {tensor({64, 100})}, {{"value", 0.0}}));
  EXPECT_DOUBLE_EQ(fill.helperBytes, 2 * 25600.0); // the clone, a vectorized copy
  EXPECT_DOUBLE_EQ(fill.bytes, 25600.0 + 100 + 25600);
  EXPECT_DOUBLE_EQ(fill.smCycles, 6400 * 0.858); // the fill, with its mask broadcast
  EXPECT_EQ(fill.kernels, 2);
  const auto fillInPlace =
      estimateOpCost(op("aten::masked_fill_", {tensor({64, 100}), mask}, {tensor({64, 100})}));
  EXPECT_DOUBLE_EQ(fillInPlace.bytes, 25600.0 + 100 + 25600);
  EXPECT_EQ(fillInPlace.kernels, 1);
}

TEST(OpCost, ReductionsAndSoftmax) {
  const auto sum = estimateOpCost(op("aten::sum", {tensor({32, 1000})}, {tensor({})}));
  EXPECT_EQ(sum.family, CostFamily::Reduction);
  EXPECT_DOUBLE_EQ(sum.bytes, 128004);
  EXPECT_DOUBLE_EQ(sum.flops, 32000);
  const auto softmax =
      estimateOpCost(op("aten::_softmax", {tensor({32, 1000})}, {tensor({32, 1000})}));
  EXPECT_EQ(softmax.family, CostFamily::Softmax);
  EXPECT_DOUBLE_EQ(softmax.bytes, 256000);
  EXPECT_DOUBLE_EQ(softmax.flops, 160000);
  const auto back = estimateOpCost(op("aten::_log_softmax_backward_data",
                                      {tensor({32, 1000}), tensor({32, 1000})},
                                      {tensor({32, 1000})}, {}, Phase::Backward));
  EXPECT_DOUBLE_EQ(back.bytes, 384000);
  EXPECT_DOUBLE_EQ(back.flops, 128000);
}

// A tensor passed twice (x * x, Adam's addcmul_(v, grad, grad)) is read once.
TEST(OpCost, AnInputPassedTwiceIsReadOnce) {
  TensorMeta again = tensor({1024, 1024});
  again.sameAs = 0;
  const OpCost square =
      estimateOpCost(op("aten::mul", {tensor({1024, 1024}), again}, {tensor({1024, 1024})}));
  EXPECT_DOUBLE_EQ(square.bytes, 2 * 1024 * 1024 * 4.0);
  const OpCost product = estimateOpCost(
      op("aten::mul", {tensor({1024, 1024}), tensor({1024, 1024})}, {tensor({1024, 1024})}));
  EXPECT_DOUBLE_EQ(product.bytes, 3 * 1024 * 1024 * 4.0);
}

// PyTorch's softmax kernels read a row from memory once when it fits registers or 48 KB
// of shared memory (or cache); longer rows three times forward and the gradient twice
// backward. Softmax's backward multiplies gradient and output first.
TEST(OpCost, SoftmaxReadsLongRowsAgain) {
  const auto fwd = [](std::vector<int64_t> shape, int64_t dim,
                      ScalarType dtype = ScalarType::Float32) {
    return estimateOpCost(op("aten::_log_softmax", {tensor(shape, dtype)}, {tensor(shape, dtype)},
                             {{"dim", dim}, {"half_to_float", false}}));
  };
  const double scores = 8.0 * 12 * 1023 * 1023 * 4;
  EXPECT_DOUBLE_EQ(fwd({8, 12, 1023, 1023}, -1).bytes, 2 * scores); // registers
  const double vocab = 1023.0 * 50257 * 4;
  EXPECT_DOUBLE_EQ(fwd({1023, 50257}, 1).bytes, 4 * vocab);          // too long: 3 reads
  EXPECT_DOUBLE_EQ(fwd({64, 8190}, 1).bytes, 2 * 64 * 8190 * 4.0);   // within 48 KB
  EXPECT_DOUBLE_EQ(fwd({64, 12300}, 1).bytes, 4 * 64 * 12300 * 4.0); // just past 48 KB
  EXPECT_DOUBLE_EQ(fwd({64, 16384}, 1, ScalarType::BFloat16).bytes, 2 * 64 * 16384 * 2.0);
  EXPECT_DOUBLE_EQ(fwd({32, 1000, 7}, 1).bytes, 2 * 32 * 1000 * 7 * 4.0); // inner dimension
  EXPECT_DOUBLE_EQ(fwd({4, 50257, 16}, 1).bytes, 4 * 4 * 50257 * 16 * 4.0);

  const auto backward = [](const char* name, std::vector<int64_t> shape, int64_t dim) {
    return estimateOpCost(op(name, {tensor(shape), tensor(shape)}, {tensor(shape)},
                             {{"dim", dim}, {"input_dtype", std::string("float32")}},
                             Phase::Backward));
  };
  const OpCost logBack = backward("aten::_log_softmax_backward_data", {1023, 50257}, 1);
  EXPECT_DOUBLE_EQ(logBack.bytes, 4 * vocab);
  EXPECT_EQ(logBack.kernels, 1);
  EXPECT_DOUBLE_EQ(backward("aten::_log_softmax_backward_data", {64, 8192}, 1).bytes,
                   3 * 64 * 8192 * 4.0);
  const OpCost back = backward("aten::_softmax_backward_data", {8, 12, 1023, 1023}, -1);
  EXPECT_DOUBLE_EQ(back.bytes, 6 * scores);
  EXPECT_EQ(back.kernels, 2);
  const OpCost innerBack = backward("aten::_softmax_backward_data", {32, 1000, 7}, 1);
  EXPECT_DOUBLE_EQ(innerBack.bytes, 6 * 32 * 1000 * 7 * 4.0);
  EXPECT_EQ(innerBack.kernels, 2);
}

TEST(OpCost, Embedding) {
  const auto fwd =
      estimateOpCost(op("aten::embedding", {tensor({1000, 64}), tensor({8, 16}, ScalarType::Int64)},
                        {tensor({8, 16, 64})}));
  EXPECT_EQ(fwd.family, CostFamily::Embedding);
  EXPECT_DOUBLE_EQ(fwd.bytes, 1024.0 + 2 * 128 * 64 * 4);
  const auto bwd = estimateOpCost(op(
      "aten::embedding_dense_backward", {tensor({8, 16, 64}), tensor({8, 16}, ScalarType::Int64)},
      {tensor({1000, 64})}, {{"num_weights", int64_t{1000}}}, Phase::Backward));
  // The weight gradient zeroed first (a fill of its own), then the rows summed into it:
  // a fixed time for the sort and segment kernels, SM cycles per gradient element
  // (bench/truth/fit_embedding_backward.py).
  EXPECT_DOUBLE_EQ(bwd.helperBytes, 256000);
  EXPECT_DOUBLE_EQ(bwd.bytes, 32768.0 + 2 * 1024 + 256000);
  EXPECT_DOUBLE_EQ(bwd.flops, 8192);
  EXPECT_DOUBLE_EQ(bwd.smCycles, 8192 * 6.05);
  EXPECT_DOUBLE_EQ(bwd.serialUs, 29);
}

TEST(OpCost, Pooling) {
  const auto maxPool = estimateOpCost(
      op("aten::max_pool2d_with_indices", {tensor({8, 64, 32, 32})},
         {tensor({8, 64, 16, 16}), tensor({8, 64, 16, 16}, ScalarType::Int64)},
         {{"kernel_size", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}}));
  EXPECT_EQ(maxPool.family, CostFamily::Pooling);
  EXPECT_DOUBLE_EQ(maxPool.bytes, 4.0 * 524288 + 12.0 * 131072);
  // Per output: decoding its position from a 64-bit index, then the 3x3 window.
  EXPECT_DOUBLE_EQ(maxPool.flops, 131072.0 * (350 + 55 * 9));
  const auto adaptive = estimateOpCost(
      op("aten::_adaptive_avg_pool2d", {tensor({8, 512, 7, 7})}, {tensor({8, 512, 1, 1})}));
  EXPECT_DOUBLE_EQ(adaptive.flops, 4096.0 * 49);
  const auto back =
      estimateOpCost(op("aten::max_pool2d_with_indices_backward",
                        {tensor({8, 64, 16, 16}), tensor({8, 64, 32, 32}),
                         tensor({8, 64, 16, 16}, ScalarType::Int64)},
                        {tensor({8, 64, 32, 32})}, {{"kernel_size", Ints{3, 3}}}, Phase::Backward));
  EXPECT_DOUBLE_EQ(back.bytes, (524288.0 + 2097152 + 1048576) + 2 * 2097152.0);
  // Per input gradient: its position, then the windows touching it (stride = kernel: 1).
  EXPECT_DOUBLE_EQ(back.flops, 524288.0 * (350 + 55 * 1));
  // 3x3 windows at stride 1 (Inception's average pooling): nine windows touch an input,
  // each with its own bounds and divisor to work out.
  const auto avgBack = estimateOpCost(
      op("aten::avg_pool2d_backward", {tensor({8, 64, 32, 32}), tensor({8, 64, 32, 32})},
         {tensor({8, 64, 32, 32})},
         {{"kernel_size", Ints{3, 3}}, {"stride", Ints{1, 1}}, {"padding", Ints{1, 1}}},
         Phase::Backward));
  EXPECT_DOUBLE_EQ(avgBack.flops, 524288.0 * (845 + 93 * 9));
}

TEST(OpCost, DropoutAndLosses) {
  const auto dropout = estimateOpCost(op("aten::native_dropout", {tensor({1000})},
                                         {tensor({1000}), tensor({1000}, ScalarType::Bool)},
                                         {{"p", 0.1}, {"train", true}}));
  EXPECT_DOUBLE_EQ(dropout.bytes, 9000);
  EXPECT_DOUBLE_EQ(dropout.flops, 2000);
  const auto nll = estimateOpCost(op(
      "aten::nll_loss_forward", {tensor({32, 10}), tensor({32}, ScalarType::Int64), std::nullopt},
      {tensor({}), tensor({})}));
  EXPECT_EQ(nll.family, CostFamily::Loss);
  EXPECT_DOUBLE_EQ(nll.bytes, 256.0 + 256 + 8);
  const auto mse =
      estimateOpCost(op("aten::mse_loss", {tensor({100}), tensor({100})}, {tensor({})}));
  EXPECT_DOUBLE_EQ(mse.bytes, 804);
  EXPECT_DOUBLE_EQ(mse.flops, 300);
}

TEST(OpCost, RecurrentLayers) {
  // One-layer LSTM, T=10, B=4, I=32, H=64: 10 * (2*4*256*(32+64) + 10*4*256).
  const auto lstm = estimateOpCost(
      op("aten::lstm", {tensor({10, 4, 32}), tensor({1, 4, 64}), tensor({1, 4, 64})},
         {tensor({10, 4, 64}), tensor({1, 4, 64}), tensor({1, 4, 64})},
         {{"num_layers", int64_t{1}}, {"bidirectional", false}, {"batch_first", false}}));
  EXPECT_EQ(lstm.family, CostFamily::Rnn);
  EXPECT_DOUBLE_EQ(lstm.flops, 10.0 * (2 * 4 * 256 * 96 + 10 * 4 * 256));
  // cuDNN's standard algorithm: the input projection, then per step the recurrent GEMM
  // and the gate kernel.
  EXPECT_EQ(lstm.kernels, 1 + 2 * 10);
  // A two-layer bidirectional GRU: layer 2 reads 2H features.
  const auto gru =
      estimateOpCost(op("aten::gru", {tensor({5, 2, 16}), tensor({4, 2, 8})}, {tensor({5, 2, 16})},
                        {{"num_layers", int64_t{2}}, {"bidirectional", true}}));
  EXPECT_DOUBLE_EQ(gru.flops, 2.0 * 5 * (2 * 2 * 24 * (16 + 8) + 10 * 2 * 24) +
                                  2.0 * 5 * (2 * 2 * 24 * (16 + 8) + 10 * 2 * 24));
  EXPECT_EQ(gru.kernels, 2 * 2 * (1 + 2 * 5));
  // Backward: per step the gate gradient and the recurrent data gradient, then the two
  // weight-gradient GEMMs.
  const auto lstmBack = estimateOpCost(op(
      "aten::_cudnn_rnn_backward", {tensor({10, 4, 32}), tensor({1, 4, 64})}, {tensor({10, 4, 32})},
      {{"num_layers", int64_t{1}}, {"hidden_size", int64_t{64}}}, Phase::Backward));
  EXPECT_EQ(lstmBack.kernels, 2 + 2 * 10);
}

TEST(OpCost, OptimizerUpdates) {
  // _foreach_add_(self=[p1, p2], other=[g1, g2]): reads both lists, writes self.
  const auto foreachAdd = estimateOpCost(
      op("aten::_foreach_add_", {tensor({100}), tensor({200}), tensor({100}), tensor({200})}, {},
         {{"num_tensors", int64_t{2}}}, Phase::Optimizer));
  EXPECT_EQ(foreachAdd.family, CostFamily::Optimizer);
  EXPECT_DOUBLE_EQ(foreachAdd.bytes, 2400.0 + 1200);
  EXPECT_DOUBLE_EQ(foreachAdd.flops, 300);
  EXPECT_EQ(foreachAdd.kernels, 1);
  // Per-parameter Adam step: addcdiv_(param, exp_avg, denom).
  const auto addcdiv =
      estimateOpCost(op("aten::addcdiv_", {tensor({100}), tensor({100}), tensor({100})},
                        {tensor({100})}, {}, Phase::Optimizer));
  EXPECT_EQ(addcdiv.family, CostFamily::Optimizer);
  EXPECT_DOUBLE_EQ(addcdiv.bytes, 1600);
  EXPECT_DOUBLE_EQ(addcdiv.flops, 200);
}

TEST(OpCost, GradScalersUnscaleAndUpdateHaveFormulas) {
  // _amp_foreach_non_finite_check_and_unscale_(grads=[g1, g2], found_inf, inv_scale): each
  // gradient read and written in place (a multiply and a finiteness check per element).
  const auto unscale = estimateOpCost(op("aten::_amp_foreach_non_finite_check_and_unscale_",
                                         {tensor({100}), tensor({200}), tensor({}), tensor({})}, {},
                                         {{"num_tensors", int64_t{2}}}, Phase::Backward));
  EXPECT_FALSE(unscale.approximate);
  EXPECT_EQ(unscale.family, CostFamily::Optimizer);
  EXPECT_DOUBLE_EQ(unscale.bytes, 2 * 1200.0 + 8);
  EXPECT_DOUBLE_EQ(unscale.flops, 600);
  EXPECT_EQ(unscale.kernels, 1);
  const auto update =
      estimateOpCost(op("aten::_amp_update_scale_", {tensor({}), tensor({}), tensor({})},
                        {tensor({})}, {}, Phase::Optimizer));
  EXPECT_FALSE(update.approximate);
  EXPECT_EQ(update.kernels, 1);
}

TEST(OpCost, CopiesAndConcatenation) {
  const auto cat = estimateOpCost(op("aten::cat", {tensor({4, 10}), tensor({4, 30})},
                                     {tensor({4, 40})}, {{"num_tensors", int64_t{2}}}));
  EXPECT_EQ(cat.family, CostFamily::Copy);
  EXPECT_DOUBLE_EQ(cat.bytes, 1280);
  const auto clone = estimateOpCost(op("aten::clone", {tensor({50})}, {tensor({50})}));
  EXPECT_DOUBLE_EQ(clone.bytes, 400);
  EXPECT_DOUBLE_EQ(clone.smCycles, 0);
}

TEST(OpCost, CastsFromA16BitFloatRunAtAnElementRate) {
  const auto bf16 = tensor({1000}, ScalarType::BFloat16);
  const auto up = estimateOpCost(op("aten::_to_copy", {bf16}, {tensor({1000})}));
  EXPECT_DOUBLE_EQ(up.bytes, 6000);
  EXPECT_DOUBLE_EQ(up.smCycles, 1000 * 0.858);
  const auto across =
      estimateOpCost(op("aten::_to_copy", {bf16}, {tensor({1000}, ScalarType::Float16)}));
  EXPECT_DOUBLE_EQ(across.smCycles, 1000 * 0.858);
  // Down from fp32, and a copy within one dtype, stream at the bandwidth.
  const auto down = estimateOpCost(op("aten::_to_copy", {tensor({1000})}, {bf16}));
  EXPECT_DOUBLE_EQ(down.smCycles, 0);
  // copy_(self, src) reads src: a bf16 source into an fp32 self is a cast up.
  const auto intoSelf = estimateOpCost(op("aten::copy_", {tensor({1000}), bf16}, {}));
  EXPECT_DOUBLE_EQ(intoSelf.smCycles, 1000 * 0.858);
  const auto sameType = estimateOpCost(op("aten::copy_", {bf16, bf16}, {}));
  EXPECT_DOUBLE_EQ(sameType.smCycles, 0);
}

TEST(OpCost, MetadataOpsCostNothing) {
  for (const char* name :
       {"aten::view", "aten::reshape", "aten::expand", "aten::t", "aten::transpose",
        "aten::permute", "aten::as_strided", "aten::detach", "aten::unsqueeze", "aten::squeeze",
        "aten::slice", "aten::select", "aten::alias", "aten::_reshape_alias", "aten::empty"}) {
    const auto cost = estimateOpCost(op(name, {tensor({100, 100})}, {tensor({100, 100})}));
    EXPECT_TRUE(cost.metadataOnly()) << name;
    EXPECT_EQ(cost.family, CostFamily::Metadata) << name;
    EXPECT_EQ(cost.bytes, 0) << name;
    EXPECT_NE(cost.note, CostNote::None) << name;
  }
}

TEST(OpCost, UnknownOpUsesClosestFamilyAndIsFlagged) {
  const auto unknown =
      estimateOpCost(op("aten::frobnicate", {tensor({1000}), tensor({1000})}, {tensor({1000})}));
  EXPECT_TRUE(unknown.approximate);
  EXPECT_EQ(unknown.family, CostFamily::Elementwise);
  EXPECT_DOUBLE_EQ(unknown.bytes, 12000);
  EXPECT_EQ(unknown.note, CostNote::NoFormula);
  const auto convLike =
      estimateOpCost(op("aten::my_fancy_conv2d", {tensor({1, 1, 10, 10}), tensor({1, 1, 3, 3})},
                        {tensor({1, 1, 8, 8})}));
  EXPECT_TRUE(convLike.approximate);
  EXPECT_EQ(convLike.family, CostFamily::Conv);
  EXPECT_DOUBLE_EQ(convLike.flops, 2.0 * 64 * 9);
}

TEST(OpCost, ZeroAndNegativeShapes) {
  const auto empty =
      estimateOpCost(op("aten::add", {tensor({0, 4}), tensor({0, 4})}, {tensor({0, 4})}));
  EXPECT_TRUE(empty.metadataOnly());
  EXPECT_EQ(empty.bytes, 0);
  EXPECT_EQ(empty.note, CostNote::EmptyTensors);
  const auto negative =
      estimateOpCost(op("aten::mul", {tensor({-3, 4}), tensor({4})}, {tensor({-3, 4})}));
  EXPECT_TRUE(negative.approximate);
  EXPECT_EQ(negative.note, CostNote::NegativeDimension);
  EXPECT_DOUBLE_EQ(negative.bytes, 16);
}

TEST(OpCost, HostOpsLaunchNoKernel) {
  // Adam's step counters stay on the CPU: their foreach add is host work.
  OpRecord counters =
      op("aten::_foreach_add_", {tensor({}), tensor({})}, {tensor({})}, {}, Phase::Optimizer);
  EXPECT_FALSE(estimateOpCost(counters).metadataOnly());
  counters.onHost = true;
  const OpCost cost = estimateOpCost(counters);
  EXPECT_TRUE(cost.metadataOnly());
  EXPECT_EQ(cost.note, CostNote::OnHost);
}

} // namespace
} // namespace wavecast
