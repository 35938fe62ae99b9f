// Pins the FLOP and byte counts of the matrix families: convolutions, GEMMs, attention and
// recurrent layers (docs/predictor.md has the formulas).
#include "op_record_builders.h"
#include "wavecast/predictor/op_cost.h"

#include <gtest/gtest.h>

namespace wavecast {
namespace {

using testing::Ints;
using testing::op;
using testing::tensor;

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
  EXPECT_DOUBLE_EQ(conv.helperSmCycles, 524288 * 0.861);
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
  // A packed sequence: 1,028 tokens of 32 sentences, the longest 59 steps. Its FLOPs are
  // the tokens', its kernels the steps' (not a step per token), each step over 1028 / 59
  // rows on average.
  const auto packed = estimateOpCost(
      op("aten::gru", {tensor({1028, 128}), tensor({4, 32, 256})}, {tensor({1028, 512})},
         {{"num_layers", int64_t{2}}, {"bidirectional", true}, {"hidden_size", int64_t{256}},
          {"seq_len", int64_t{59}}, {"batch", int64_t{32}}, {"packed", true}}));
  EXPECT_DOUBLE_EQ(packed.flops, 2.0 * 1028 * (2 * 3 * 256 * (128 + 256) + 10 * 3 * 256) +
                                     2.0 * 1028 * (2 * 3 * 256 * (512 + 256) + 10 * 3 * 256));
  EXPECT_EQ(packed.kernels, 2 * 2 * (1 + 2 * 59));
  EXPECT_DOUBLE_EQ(packed.gemm.m, 1028.0 / 59);
}

} // namespace
} // namespace wavecast
