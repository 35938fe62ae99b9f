// Pins the FLOP and byte counts of the vector families: norms, elementwise ops, reductions,
// softmax, embeddings, pooling, losses, optimizers and copies (docs/predictor.md has the
// formulas); matrix_cost_test.cpp pins the matrix ones.
#include "op_record_builders.h"
#include "wavecast/predictor/op_cost.h"

#include <gtest/gtest.h>

namespace wavecast {
namespace {

using testing::Ints;
using testing::op;
using testing::tensor;

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
  EXPECT_DOUBLE_EQ(add.smCycles, 6400 * 0.861);
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
  EXPECT_DOUBLE_EQ(fill.smCycles, 6400 * 0.861); // the fill, with its mask broadcast
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
  EXPECT_DOUBLE_EQ(bwd.smCycles, 8192 * 5.95);
  EXPECT_DOUBLE_EQ(bwd.serialUs, 30);
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
  EXPECT_EQ(mse.note, CostNote::None);
  // CTC (wav2vec2's 199 frames, 8 clips, 32 characters, 48 labels): priced by its tensors
  // and flagged, as its kernels step through the frames.
  const auto ctc =
      estimateOpCost(op("aten::_ctc_loss",
                        {tensor({199, 8, 32}), tensor({384}, ScalarType::Int64),
                         tensor({8}, ScalarType::Int64), tensor({8}, ScalarType::Int64)},
                        {tensor({8}), tensor({8, 199, 97})}));
  EXPECT_EQ(ctc.family, CostFamily::Loss);
  EXPECT_TRUE(ctc.approximate);
  EXPECT_EQ(ctc.note, CostNote::SerialOverFrames);
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
  EXPECT_DOUBLE_EQ(up.smCycles, 1000 * 0.861);
  const auto across =
      estimateOpCost(op("aten::_to_copy", {bf16}, {tensor({1000}, ScalarType::Float16)}));
  EXPECT_DOUBLE_EQ(across.smCycles, 1000 * 0.861);
  // Down from fp32, and a copy within one dtype, stream at the bandwidth.
  const auto down = estimateOpCost(op("aten::_to_copy", {tensor({1000})}, {bf16}));
  EXPECT_DOUBLE_EQ(down.smCycles, 0);
  // copy_(self, src) reads src: a bf16 source into an fp32 self is a cast up.
  const auto intoSelf = estimateOpCost(op("aten::copy_", {tensor({1000}), bf16}, {}));
  EXPECT_DOUBLE_EQ(intoSelf.smCycles, 1000 * 0.861);
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

TEST(OpCost, ABatchCopiedToTheGpuCrossesTheHostLink) {
  // x.to("cuda") of a pageable batch of 64 x 3 x 224 x 224 floats, staged in 4 ms here.
  const auto pageable = estimateOpCost(op("wavecast::host_to_device", {tensor({64, 3, 224, 224})},
                                          {tensor({64, 3, 224, 224})},
                                          {{"bytes", int64_t{38535168}},
                                           {"pinned", false},
                                           {"non_blocking", false},
                                           {"staging_ms", 4.0}}));
  EXPECT_EQ(pageable.family, CostFamily::HostTransfer);
  EXPECT_DOUBLE_EQ(pageable.bytes, 38535168);
  EXPECT_EQ(pageable.kernels, 1);
  EXPECT_TRUE(pageable.transfer.pageable);
  EXPECT_TRUE(pageable.transfer.blocking);
  EXPECT_DOUBLE_EQ(pageable.transfer.stagingMs, 4.0);
  EXPECT_FALSE(pageable.approximate);
  // From a DataLoader(pin_memory=True) with non_blocking=True: nothing to stage.
  const auto pinned =
      estimateOpCost(op("wavecast::host_to_device", {tensor({64})}, {tensor({64})},
                        {{"bytes", int64_t{512}}, {"pinned", true}, {"non_blocking", true}}));
  EXPECT_FALSE(pinned.transfer.pageable);
  EXPECT_FALSE(pinned.transfer.blocking);
  EXPECT_DOUBLE_EQ(pinned.transfer.stagingMs, 0);
  EXPECT_EQ(pinned.transfer.direction, TransferDirection::ToDevice);
}

TEST(OpCost, AResultReadBackCrossesTheHostLinkTheOtherWay) {
  // logits.cpu(): 4096 x 10 floats into pageable memory, staged in 0.02 ms here.
  const auto back =
      estimateOpCost(op("wavecast::device_to_host", {tensor({4096, 10})}, {tensor({4096, 10})},
                        {{"bytes", int64_t{163840}},
                         {"pinned", false},
                         {"non_blocking", false},
                         {"staging_ms", 0.02}}));
  EXPECT_EQ(back.family, CostFamily::HostTransfer);
  EXPECT_EQ(back.transfer.direction, TransferDirection::ToHost);
  EXPECT_DOUBLE_EQ(back.bytes, 163840);
  EXPECT_TRUE(back.transfer.pageable);
  EXPECT_TRUE(back.transfer.blocking);
  EXPECT_DOUBLE_EQ(back.transfer.stagingMs, 0.02);
  // torch.cuda.synchronize(): no kernel, a wait.
  const auto wait = estimateOpCost(op("wavecast::synchronize", {}, {}, {}));
  EXPECT_TRUE(wait.metadataOnly());
  EXPECT_EQ(wait.note, CostNote::WaitsForGpu);
  EXPECT_FALSE(wait.approximate);
}

} // namespace
} // namespace wavecast
