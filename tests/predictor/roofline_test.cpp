#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/roofline.h"

#include <gtest/gtest.h>

namespace wavecast {
namespace {

DeviceSpec gpu() {
  DeviceSpec spec;
  spec.id = "test";
  spec.smCount = 100;
  spec.memoryBandwidthGBs = 2000;
  spec.fp32Tflops = 20;
  spec.tf32Tflops = 150;
  spec.fp16Tflops = 300;
  spec.bf16Tflops = 300;
  return spec;
}

OpCost gemm(double batch, double m, double n, double k, ScalarType dtype = ScalarType::Float32) {
  OpCost cost;
  cost.family = CostFamily::Gemm;
  cost.unit = ComputeUnit::Matrix;
  cost.dtype = dtype;
  cost.gemm = {batch, m, n, k};
  cost.flops = 2 * batch * m * n * k;
  return cost;
}

TEST(Roofline, AFullWaveOfWholeTilesRunsAtTheMatrixEfficiency) {
  const RooflineOptions options;
  // 100 tiles of 128 x 128 on 100 SMs, float32 on CUDA cores: cuBLAS's fixed time besides.
  const RooflineTime t = rooflineTime(gemm(100, 128, 128, 4096), gpu(), options);
  EXPECT_DOUBLE_EQ(t.waveEfficiency, 1.0);
  EXPECT_NEAR(t.computeMs,
              2 * 100 * 128 * 128 * 4096.0 / (20e12 * options.matrixEfficiency) * 1e3 +
                  options.cublasFp32GemmLatencyUs * 1e-3,
              1e-12);
  // On tensor cores (bf16) it has none.
  const RooflineTime bf16 =
      rooflineTime(gemm(100, 128, 128, 4096, ScalarType::BFloat16), gpu(), options);
  EXPECT_NEAR(bf16.computeMs,
              2 * 100 * 128 * 128 * 4096.0 / (300e12 * options.matrixEfficiency) * 1e3, 1e-12);
}

// A cuBLAS GEMM on CUDA cores has a fixed time per kernel; tensor-core GEMMs, TF32 ones and
// cuDNN's convolutions do not (theirs are in their own fits).
TEST(Roofline, OnlyCublasGemmsOnCudaCoresHaveAFixedTime) {
  const RooflineOptions options;
  OpCost mm = gemm(1, 2048, 128, 128);
  EXPECT_DOUBLE_EQ(fixedKernelMs(mm, gpu(), options), options.cublasFp32GemmLatencyUs * 1e-3);
  mm.kernels = 8; // a loop of mm, one per group
  EXPECT_DOUBLE_EQ(fixedKernelMs(mm, gpu(), options), 8 * options.cublasFp32GemmLatencyUs * 1e-3);
  OpCost tf32 = gemm(1, 2048, 128, 128);
  tf32.tf32 = true;
  EXPECT_EQ(fixedKernelMs(tf32, gpu(), options), 0);
  EXPECT_EQ(fixedKernelMs(gemm(1, 2048, 128, 128, ScalarType::BFloat16), gpu(), options), 0);
  OpCost conv = gemm(1, 2048, 128, 128);
  conv.family = CostFamily::Conv;
  EXPECT_EQ(fixedKernelMs(conv, gpu(), options), 0);
}

TEST(Roofline, APartLastWaveCostsAWholeWave) {
  const RooflineOptions options;
  // 101 tiles of 128 x 128: two waves, the second with one tile (0.505). Smaller
  // tiles fill their last wave better: 202 of 128 x 64 in three waves at 0.9.
  const RooflineTime t = rooflineTime(gemm(101, 128, 128, 4096), gpu(), options);
  EXPECT_NEAR(t.waveEfficiency, 202.0 / 300 * 0.9, 1e-12);
}

TEST(Roofline, AnOutputSmallerThanItsTileStillCostsTheTile) {
  const RooflineOptions options;
  // 50 x 50 outputs: a 64 x 64 tile is 61% inside the matrix, a 32 x 32 tile (four
  // per output) 61% too at a lower efficiency; 100 of them fill one wave.
  const RooflineTime padded = rooflineTime(gemm(100, 50, 50, 4096), gpu(), options);
  EXPECT_NEAR(padded.waveEfficiency, 0.75 * (50.0 * 50) / (64 * 64), 1e-12);
  // The same tiles, full: the padded GEMM takes as long for 61% of the FLOPs.
  const RooflineTime full = rooflineTime(gemm(100, 64, 64, 4096), gpu(), options);
  EXPECT_NEAR(padded.computeMs, full.computeMs, 1e-12);
}

TEST(Roofline, ASmallOutputOverALongKIsSplitIntoSlicesOfAtLeastTheMinimumK) {
  RooflineOptions options;
  options.splitKMinSliceK = 1000;
  // A 128 x 128 output on 100 SMs: at best sixteen 32 x 32 tiles (0.16 x 0.5).
  OpCost cost = gemm(1, 128, 128, 20000);
  EXPECT_DOUBLE_EQ(rooflineTime(cost, gpu(), options).waveEfficiency, 0.08);
  // Split into at most 20 slices of 1000: four 64 x 64 tiles x 20 slices (0.8 x 0.75)
  // beat one 128 x 128 tile x 20 (0.2) and sixteen 32 x 32 x 6 (0.96 x 0.5).
  cost.gemm.splitK = true;
  EXPECT_DOUBLE_EQ(rooflineTime(cost, gpu(), options).waveEfficiency, 0.6);
  // A K shorter than two slices stays whole.
  cost.gemm.k = 1500;
  EXPECT_DOUBLE_EQ(rooflineTime(cost, gpu(), options).waveEfficiency, 0.08);
}

TEST(Roofline, AnOpOfSeveralGemmsTakesTheirFlopWeightedEfficiency) {
  const RooflineOptions options;
  OpCost cost = gemm(100, 128, 128, 4096); // one full wave: efficiency 1
  const double full = cost.flops;
  // The second GEMM: a 128 x 128 output, 0.08 (above).
  cost.gemms = {{cost.gemm, full}, {GemmShape{1, 128, 128, 4096}, full / 100}};
  cost.flops = full * 1.01;
  const RooflineTime t = rooflineTime(cost, gpu(), options);
  EXPECT_NEAR(t.waveEfficiency, 1.01 / (1 + 0.01 / 0.08), 1e-12);
}

TEST(Roofline, CudnnReachesItsShareOfTheTensorCorePeakOfEachDtype) {
  const RooflineOptions options;
  OpCost conv = gemm(1, 128 * 100, 128, 4096);
  conv.family = CostFamily::Conv;
  conv.tf32 = true;
  const double tf32 = rooflineTime(conv, gpu(), options).computeMs;
  EXPECT_NEAR(tf32, conv.flops / (150e12 * options.cudnnTf32ConvEfficiency) * 1e3, 1e-12);
  // cuDNN's TF32 LSTMs keep the tensor cores' share.
  OpCost rnn = conv;
  rnn.family = CostFamily::Rnn;
  EXPECT_NEAR(rooflineTime(rnn, gpu(), options).computeMs,
              conv.flops / (150e12 * options.cudnnTensorCoreEfficiency) * 1e3, 1e-12);
  conv.tf32 = false;
  conv.dtype = ScalarType::BFloat16;
  const double bf16 = rooflineTime(conv, gpu(), options).computeMs;
  EXPECT_NEAR(bf16, conv.flops / (300e12 * options.cudnnTensorCoreEfficiency) * 1e3, 1e-12);
  conv.dtype = ScalarType::Float16;
  EXPECT_NEAR(rooflineTime(conv, gpu(), options).computeMs, bf16, 1e-12);
  // cuBLAS's bf16 GEMM of the same shape reaches the matrix efficiency.
  conv.dtype = ScalarType::BFloat16;
  conv.family = CostFamily::Gemm;
  EXPECT_NEAR(rooflineTime(conv, gpu(), options).computeMs,
              conv.flops / (300e12 * options.matrixEfficiency) * 1e3, 1e-12);
}

TEST(Roofline, AHelperKernelTakesTheLongerOfItsBytesAndItsElementCycles) {
  // A convolution's bias add after cuDNN, a broadcast add bound by its element rate: 1e8
  // cycles over 100 SMs at 1 GHz (1 ms), against 1 ms of streaming at 4e9 bytes.
  RooflineOptions options;
  options.launchFloorUs = 0;
  DeviceSpec device = gpu();
  device.boostClockMHz = 1000;
  OpCost conv = gemm(1, 128 * 100, 128, 4096);
  conv.family = CostFamily::Conv;
  const double convolutionMs = rooflineTime(conv, device, options).timeMs;
  conv.helperBytes = 2000e9 * options.memoryEfficiency * 1e-3;
  EXPECT_NEAR(rooflineTime(conv, device, options).timeMs - convolutionMs, 1.0, 1e-9);
  conv.helperSmCycles = 2e8;
  EXPECT_NEAR(rooflineTime(conv, device, options).timeMs - convolutionMs, 2.0, 1e-9);
  conv.helperSmCycles = 0.5e8;
  EXPECT_NEAR(rooflineTime(conv, device, options).timeMs - convolutionMs, 1.0, 1e-9);
}

TEST(Roofline, NarrowConvolutionsRunAtTheirOwnRatesInEveryDtype) {
  // 1e6 positions of a first layer's forward, 1e9 multiply-adds, on 100 SMs at 1 GHz with
  // 20 TFLOP/s of FP32 CUDA cores: 4 us, 20 cycles a position and 39% of the FP32 peak
  // (bench/truth/fit_narrow_conv.py), whatever the dtype and tensor cores.
  DeviceSpec device = gpu();
  device.boostClockMHz = 1000;
  OpCost conv = gemm(1, 1e6, 64, 27);
  conv.family = CostFamily::Conv;
  conv.flops = 2e9;
  conv.narrowConvs = {{NarrowConvKernel::Data, 1e6, 1e9}};
  const double expected = 4e-3 + 1e6 * 20 / 1e11 * 1e3 + 2e9 / (20e12 * 0.39) * 1e3;
  EXPECT_NEAR(rooflineTime(conv, device, RooflineOptions()).computeMs, expected, 1e-12);
  conv.tf32 = true;
  EXPECT_NEAR(rooflineTime(conv, device, RooflineOptions()).computeMs, expected, 1e-12);
  conv.tf32 = false;
  conv.dtype = ScalarType::BFloat16;
  EXPECT_NEAR(rooflineTime(conv, device, RooflineOptions()).computeMs, expected, 1e-12);
  // The weight gradient over the same positions: 28 us, 36 cycles a position, 57%.
  conv.narrowConvs = {{NarrowConvKernel::WeightGradient, 1e6, 1e9}};
  EXPECT_NEAR(rooflineTime(conv, device, RooflineOptions()).computeMs,
              28e-3 + 1e6 * 36 / 1e11 * 1e3 + 2e9 / (20e12 * 0.57) * 1e3, 1e-12);
}

DeviceSpec withComputeCapability(int major, int minor) {
  DeviceSpec spec = gpu();
  spec.computeCapabilityMajor = major;
  spec.computeCapabilityMinor = minor;
  return spec;
}

// A flash-attention forward of (2 x 8) heads, 1,024 x 1,024 scores, with dropout.
OpCost flashForward(ScalarType dtype) {
  OpCost cost;
  cost.family = CostFamily::Attention;
  cost.unit = ComputeUnit::Matrix;
  cost.dtype = dtype;
  cost.flops = 1e11;
  cost.bytes = 4e6;
  cost.gemm = {16, 1024, 1024, 64};
  cost.attention = {AttentionBackend::Flash, false, true, 16.0 * 1024 * 1024, 1.6e11};
  return cost;
}

TEST(Roofline, EachGpuRunsTheAttentionKernelItHas) {
  const OpCost flash = flashForward(ScalarType::Float16);
  EXPECT_EQ(attentionBackendOn(flash, withComputeCapability(9, 0)), AttentionBackend::Flash);
  EXPECT_EQ(attentionBackendOn(flash, withComputeCapability(7, 5)), AttentionBackend::Efficient);
  // Memory-efficient bfloat16 needs sm80 too: what is left is the math decomposition.
  EXPECT_EQ(attentionBackendOn(flashForward(ScalarType::BFloat16), withComputeCapability(7, 0)),
            AttentionBackend::Math);
  OpCost cudnn = flash;
  cudnn.attention.backend = AttentionBackend::Cudnn;
  EXPECT_EQ(attentionBackendOn(cudnn, withComputeCapability(9, 0)), AttentionBackend::Cudnn);
  EXPECT_EQ(attentionBackendOn(cudnn, withComputeCapability(8, 0)), AttentionBackend::Flash);
  // The fused kernels are priced alike; non-attention work is left as it is.
  const RooflineOptions options;
  EXPECT_DOUBLE_EQ(rooflineTime(flash, withComputeCapability(7, 5), options).timeMs,
                   rooflineTime(flash, withComputeCapability(8, 0), options).timeMs);
  EXPECT_EQ(attentionBackendOn(gemm(1, 64, 64, 64), withComputeCapability(7, 5)),
            AttentionBackend::None);
}

TEST(Roofline, FusedAttentionOnHopperTakesItsMatmulsShareAndCyclesPerScore) {
  // bf16 on an sm90 GPU: the matmuls at each backend's share of the dense peak plus SM
  // cycles per score computed (bench/truth/fit_attention.py); long enough that the
  // per-wave latency is shorter.
  DeviceSpec hopper = withComputeCapability(9, 0);
  hopper.boostClockMHz = 2000;
  OpCost flash = flashForward(ScalarType::BFloat16);
  flash.attention.matmulFlops = 1e11;
  flash.attention.scoresComputed = 16.0 * 1024 * 1024;
  const RooflineOptions options;
  const double cycles = 100 * 2000e6; // the test GPU's SMs at its clock
  EXPECT_NEAR(rooflineTime(flash, hopper, options).computeMs,
              (1e11 / (300e12 * 0.63) + flash.attention.scoresComputed * 0.2 / cycles) * 1e3,
              1e-12);
  OpCost backward = flash;
  backward.attention.backward = true;
  backward.attention.matmulFlops = 2.5e11;
  EXPECT_NEAR(rooflineTime(backward, hopper, options).computeMs,
              (2.5e11 / (300e12 * 0.53) + flash.attention.scoresComputed * 0.72 / cycles) * 1e3,
              1e-12);
  OpCost cudnn = flash;
  cudnn.attention.backend = AttentionBackend::Cudnn;
  EXPECT_NEAR(rooflineTime(cudnn, hopper, options).computeMs,
              (1e11 / (300e12 * 0.72) + flash.attention.scoresComputed * 0.09 / cycles) * 1e3,
              1e-12);
  // Another architecture, or float32 on CUDA cores: the matrix efficiency of the rest.
  DeviceSpec ampere = withComputeCapability(8, 0);
  ampere.boostClockMHz = 2000;
  const double ampereMs = rooflineTime(flash, ampere, options).computeMs;
  EXPECT_LT(ampereMs, 1e11 / (300e12 * 0.63) * 1e3);
  EXPECT_GE(ampereMs, 1e11 / (300e12 * options.matrixEfficiency) * 1e3);
}

TEST(Roofline, TheMathDecompositionWritesAndRereadsTheScores) {
  const OpCost flash = flashForward(ScalarType::BFloat16);
  const OpCost math = asRunOn(flash, withComputeCapability(7, 5));
  EXPECT_EQ(math.attention.backend, AttentionBackend::Math);
  // Every score computed (no causal block skipped), 4 passes over them plus dropout's
  // read and write in bfloat16, and dropout's 1-byte mask.
  const double scores = 16.0 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(math.flops, 1.6e11);
  EXPECT_DOUBLE_EQ(math.bytes, 4e6 + 6 * scores * 2 + scores);
  EXPECT_EQ(math.kernels, 4);
  OpCost backward = flash;
  backward.attention.backward = true;
  backward.attention.dropout = false;
  // Backward: 10 passes, softmax's gradient-times-output kernel among them.
  const OpCost mathBackward = asRunOn(backward, withComputeCapability(7, 5));
  EXPECT_DOUBLE_EQ(mathBackward.bytes, 4e6 + 10 * scores * 2);
  EXPECT_EQ(mathBackward.kernels, 6);
  const RooflineOptions options;
  EXPECT_GT(rooflineTime(flash, withComputeCapability(7, 5), options).memoryMs,
            10 * rooflineTime(flash, withComputeCapability(8, 0), options).memoryMs);
}

TEST(Roofline, FusedAttentionOnShortSequencesTakesAFixedTimePerWaveOfBlocks) {
  // The transformer's attention (8 heads, 50 tokens, head size 64) as recorded on an H100
  // (bench/truth/data/h100): batch 256 is 2,048 blocks, eight waves of two per SM; batch
  // 16 is one wave. cuDNN's kernel (bf16) took 69.6 and 9.1 us forward; the
  // memory-efficient one (float32) 116.8 and 12.4 us.
  const DeviceSpec h100 = GpuDatabase::fromFile(WAVECAST_GPUS_JSON).resolve({"H100"})[0];
  const auto attention = [](AttentionBackend backend, double batch) {
    OpCost cost;
    cost.family = CostFamily::Attention;
    cost.unit = ComputeUnit::Matrix;
    cost.dtype =
        backend == AttentionBackend::Efficient ? ScalarType::Float32 : ScalarType::BFloat16;
    cost.flops = 4 * batch * 8 * 50 * 50 * 64;
    cost.bytes = 4 * batch * 8 * 50 * 64 * elementSize(cost.dtype);
    cost.gemm = {batch * 8, 50, 50, 64};
    cost.attention.backend = backend;
    cost.attention.scores = batch * 8 * 50 * 50;
    cost.attention.batchHeads = batch * 8;
    cost.attention.queries = cost.attention.keys = 50;
    return cost;
  };
  const RooflineOptions options;
  const auto us = [&](AttentionBackend backend, double batch) {
    return rooflineTime(attention(backend, batch), h100, options).timeMs * 1e3;
  };
  EXPECT_NEAR(us(AttentionBackend::Flash, 256), 69.6, 69.6 * 0.1);
  EXPECT_NEAR(us(AttentionBackend::Flash, 16), 9.1, 9.1 * 0.1);
  EXPECT_NEAR(us(AttentionBackend::Efficient, 256), 116.8, 116.8 * 0.1);
  EXPECT_NEAR(us(AttentionBackend::Efficient, 16), 12.4, 12.4 * 0.2);
}

TEST(Roofline, AHostTransferRunsAtItsGpusHostLinkRate) {
  const GpuDatabase db = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  OpCost copy;
  copy.family = CostFamily::HostTransfer;
  copy.bytes = 38535168; // ResNet's batch of 64 images
  const RooflineOptions options;
  // PCIe 5.0 (nvbandwidth on an H100: 57.1 GB/s) against PCIe 3.0 (a P100's 12.2 GB/s).
  EXPECT_NEAR(rooflineTime(copy, *db.find("H100-SXM"), options).timeMs, 38535168 / 57.1e9 * 1e3,
              1e-12);
  EXPECT_NEAR(rooflineTime(copy, *db.find("T4"), options).timeMs, 38535168 / 12.2e9 * 1e3, 1e-12);
  // Back to the host at the link's rate that way (nvbandwidth's device to host: 52.8 GB/s).
  copy.transfer.direction = TransferDirection::ToHost;
  EXPECT_NEAR(rooflineTime(copy, *db.find("H100-SXM"), options).timeMs, 38535168 / 52.8e9 * 1e3,
              1e-12);
  copy.transfer.direction = TransferDirection::ToDevice;
  copy.bytes = 8;
  EXPECT_DOUBLE_EQ(rooflineTime(copy, *db.find("T4"), options).timeMs,
                   options.launchFloorUs * 1e-3);
}

} // namespace
} // namespace wavecast
