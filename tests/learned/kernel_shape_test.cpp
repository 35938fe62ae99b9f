#include "wavecast/learned/kernel_shape.h"
#include "wavecast/predictor/device_spec.h"

#include <cmath>
#include <gtest/gtest.h>

namespace wavecast::learned {
namespace {

GpuFeatures v100() {
  GpuFeatures g;
  g.smCount = 80;
  g.clockMHz = 1380;
  g.fp32Gflops = 14130;
  g.memoryBandwidthGBs = 900;
  g.l2CacheMiB = 6;
  return g;
}

TEST(Roofline, GemmFlopsAndBytes) {
  const RooflineCost linear = rooflineCost(KernelShape::linear(4096, 1024, 4096), v100());
  EXPECT_DOUBLE_EQ(linear.flops, 2.0 * 4096 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(linear.bytes, 4.0 * (4096.0 * 1024 + 1024.0 * 4096 + 4096.0 * 4096));
  EXPECT_NEAR(linear.computeMs, 2.0 * 4096 * 1024 * 4096 / 14130e9 * 1e3, 1e-12);
  EXPECT_DOUBLE_EQ(linear.boundMs(), linear.computeMs);

  // bmm reads a weight per batch, linear one shared weight.
  const RooflineCost bmm = rooflineCost(KernelShape::bmm(2, 64, 32, 16), v100());
  EXPECT_DOUBLE_EQ(bmm.flops, 2.0 * 2 * 64 * 32 * 16);
  EXPECT_DOUBLE_EQ(bmm.bytes, 4.0 * 2 * (64 * 32 + 32 * 16 + 64 * 16));
}

TEST(Roofline, ConvolutionAsImplicitGemm) {
  // 3x3, stride 1, pad 1 keeps 56x56: GEMM of (8*56*56) x (64*9) . (64*9) x 128.
  const RooflineCost conv = rooflineCost(KernelShape::conv2d(8, 64, 128, 3, 56, 1, 1), v100());
  EXPECT_DOUBLE_EQ(conv.flops, 2.0 * 8 * 56 * 56 * 64 * 9 * 128);
  EXPECT_DOUBLE_EQ(conv.bytes, 4.0 * (8.0 * 64 * 56 * 56 + 128.0 * 64 * 9 + 8.0 * 128 * 56 * 56));
}

TEST(Roofline, MemoryBoundOps) {
  const RooflineCost add =
      rooflineCost(KernelShape::elementwise(ElementwiseOp::Add, 1024, 1024), v100());
  EXPECT_DOUBLE_EQ(add.bytes, 4.0 * 3 * 1024 * 1024);
  const RooflineCost relu =
      rooflineCost(KernelShape::elementwise(ElementwiseOp::Relu, 1024, 1024), v100());
  EXPECT_DOUBLE_EQ(relu.bytes, 4.0 * 2 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(relu.boundMs(), relu.memoryMs);
  EXPECT_NEAR(relu.memoryMs, 8.0 * 1024 * 1024 / 900e9 * 1e3, 1e-12);
}

TEST(Features, FixedLengthPerFamilyAndNoGpuIdentity) {
  const GpuFeatures gpu = v100();
  for (const KernelShape& s :
       {KernelShape::linear(128, 256, 512), KernelShape::bmm(4, 128, 64, 128),
        KernelShape::conv2d(8, 64, 128, 3, 56, 1, 1),
        KernelShape::elementwise(ElementwiseOp::Gelu, 64, 4096), KernelShape::layerNorm(512, 1024),
        KernelShape::softmax(4096, 512)}) {
    const auto f = kernelFeatures(s, gpu);
    EXPECT_EQ(int(f.size()), featureCount(s.family)) << s.describe();
    for (float x : f)
      EXPECT_TRUE(std::isfinite(x)) << s.describe();
  }
  // Two GPUs with the same spec sheet are the same GPU to the model.
  GpuFeatures twin = gpu;
  EXPECT_EQ(kernelFeatures(KernelShape::linear(128, 256, 512), gpu),
            kernelFeatures(KernelShape::linear(128, 256, 512), twin));
}

TEST(Features, WaveQuantisation) {
  // 128-edge tiles of a 1024 x 1024 output: 64 tiles over 80 SMs = 0.8 of a wave.
  const auto f = kernelFeatures(KernelShape::linear(1024, 512, 1024), v100());
  const size_t tile128 = 4 + 3 + 2 * 2; // extents, roofline, then 32- and 64-edge waves
  EXPECT_NEAR(f[tile128], std::log(64.0 / 80.0), 1e-6);
  EXPECT_NEAR(f[tile128 + 1], 0.8, 1e-6);
}

TEST(Features, SoftmaxTellsTheOneWarpRowKernelApart) {
  // PyTorch keeps rows of up to 1024 elements in one warp; longer ones are re-read.
  EXPECT_EQ(kernelFeatures(KernelShape::softmax(4096, 1024), v100()).back(), 1.0f);
  EXPECT_EQ(kernelFeatures(KernelShape::softmax(4096, 1025), v100()).back(), 0.0f);
}

TEST(Shapes, InvalidShapesAreRejected) {
  EXPECT_FALSE(KernelShape::linear(0, 4, 4).valid());
  EXPECT_FALSE(KernelShape::bmm(2, -1, 4, 4).valid());
  EXPECT_FALSE(KernelShape::conv2d(1, 3, 8, 7, 5, 1, 0).valid()); // kernel larger than input
  EXPECT_TRUE(KernelShape::conv2d(1, 3, 8, 3, 5, 2, 1).valid());
  EXPECT_FALSE(KernelShape::softmax(4, 0).valid());
}

TEST(Names, FamiliesAndElementwiseFolders) {
  for (KernelFamily f : allKernelFamilies())
    EXPECT_EQ(kernelFamilyFromString(toString(f)), f);
  EXPECT_EQ(elementwiseOpFromFolder("powu"), ElementwiseOp::PowScalar);
  EXPECT_FALSE(elementwiseOpFromFolder("sin").has_value());
  EXPECT_EQ(inputTensorCount(ElementwiseOp::Div), 2);
  EXPECT_EQ(inputTensorCount(ElementwiseOp::DivScalar), 1);
}

TEST(GpuFeaturesTest, FromDeviceSpecUsesSpecSheetUnits) {
  DeviceSpec spec;
  spec.smCount = 132;
  spec.boostClockMHz = 1980;
  spec.fp32Tflops = 66.9;
  spec.memoryBandwidthGBs = 3350;
  spec.l2CacheMiB = 50;
  const GpuFeatures g = GpuFeatures::fromDeviceSpec(spec);
  EXPECT_EQ(g.smCount, 132);
  EXPECT_DOUBLE_EQ(g.fp32Gflops, 66900);
  EXPECT_TRUE(g.valid());
  EXPECT_FALSE(GpuFeatures{}.valid());
}

} // namespace
} // namespace wavecast::learned
