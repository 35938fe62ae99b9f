// Dtype-aware roofline for one op on one GPU: max(compute, memory) time with wave
// quantisation and a kernel-launch floor (docs/predictor.md).
#pragma once

#include "wavecast/predictor/device_spec.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/predictor/tensor_core_gemm.h"

#include <optional>
#include <string>

namespace wavecast {

struct RooflineOptions {
  // Fractions of the spec-sheet peaks real kernels reach (typical of public
  // micro-benchmarks: STREAM-like copies, cuBLAS SGEMM/HGEMM); not fitted to any data.
  double memoryEfficiency = 0.85;
  double vectorEfficiency = 0.85;
  double matrixEfficiency = 0.75;
  // cuDNN's convolutions and RNNs on tensor cores stay far from the dense peak: implicit
  // GEMM is bound by moving operands through shared memory. Calibrated on ResNet-50,
  // Inception-v3, DCGAN and the small CNN's convolutions (bench/truth/data/h100 and h200,
  // torch 2.11; the first layers, priced apart since they run other kernels, left out):
  // fp16/bf16 at 0.25 of their peak (the conv family at 0.96 and 1.01 of its real time),
  // TF32 convolutions at 0.28 of theirs (0.25 had them at 1.10 and 1.20). GNMT's TF32
  // LSTMs keep 0.25: at 0.77 of their kernel sum, but 0.88-1.46 of the time the GPU was
  // busy with them, since cuDNN overlaps their kernels on its own streams (docs/accuracy.md).
  // One value per dtype for every GPU and shape.
  double cudnnTensorCoreEfficiency = 0.25;
  double cudnnTf32ConvEfficiency = 0.28;
  // Shortest K a split-K slice gets: a weight gradient's output (Cout x Cin.R.S) is
  // small and its K (N x positions) long, and cuDNN splits K only where each slice
  // stays long. Calibrated on the convolution backward of ResNet-50, Inception-v3,
  // DCGAN and small_cnn on an H100 (../shared/truth/h100: 16K and 64K do worse).
  double splitKMinSliceK = 32768;
  // Shortest a kernel runs: the truth's tiny elementwise, copy and fill kernels take
  // 1.0-2.5 us each in CUPTI's times on the H100 and the H200 (bench/truth/data, per shape).
  double launchFloorUs = 2.0;
  // What a cuBLAS GEMM on CUDA cores (float32 without TF32) takes beside its arithmetic, per
  // kernel: the small transformer's 48 FP32 GEMMs of 67 MFLOP to 2.1 GFLOP ran at 6.4 us
  // plus their FLOPs at 43.5 TFLOP/s on both the H100 and the H200 (bench/truth/data, per
  // shape; 9.5% mean error), so the smallest take several times what their FLOPs need.
  double cublasFp32GemmLatencyUs = 6.0;
  // cuBLAS's GEMMs on tensor cores (bf16, fp16, TF32), fitted to measured GEMMs
  // (data/tensor_core_gemm.json); absent: `matrixEfficiency` and the tile table.
  std::optional<TensorCoreGemmModel> tensorCoreGemm;
};

// Whether `cost`'s TF32 work finds TF32 units on `gpu` (GPUs before Ampere have
// none: their float32 stays on CUDA cores).
bool usesTf32Cores(const OpCost& cost, const DeviceSpec& gpu);

// Whether `cost`'s matrix work runs on `gpu`'s tensor cores (TF32, fp16 or bf16).
bool usesTensorCores(const OpCost& cost, const DeviceSpec& gpu);

// The part of `cost`'s time on `gpu` that does not grow with its work (ms): a cuBLAS GEMM's
// fixed time on CUDA cores (RooflineOptions::cublasFp32GemmLatencyUs), 0 for the rest.
double fixedKernelMs(const OpCost& cost, const DeviceSpec& gpu, const RooflineOptions& options);

// Peak TFLOP/s that runs this work (unit, dtype, TF32) on `gpu` (falls back to FP32
// when the GPU has no unit for the dtype).
double peakTflops(const DeviceSpec& gpu, const OpCost& cost);

// The attention kernel `cost` runs on `gpu`: the traced backend where the GPU has it
// (flash needs sm80+, cuDNN's sm90+, memory-efficient bfloat16 sm80+), else the next
// torch would pick, down to the math decomposition.
AttentionBackend attentionBackendOn(const OpCost& cost, const DeviceSpec& gpu);

// `cost` as `gpu` runs it: an attention kernel the GPU lacks becomes its fallback (the
// math decomposition writes the L x S scores to DRAM and reads them back).
OpCost asRunOn(const OpCost& cost, const DeviceSpec& gpu);

// Whether cuDNN transforms an NCHW half-precision convolution's tensors to NHWC and back
// on `gpu` (OpCost::layoutTransformBytes). Not on sm90 and later: on an H100 and an H200
// (cuDNN 9.19) an NCHW bf16 ResNet-50's convolutions take the time of their own traffic
// (bench/truth/data). Earlier GPUs keep the transforms cuDNN documented; none measured.
bool layoutTransformsOn(const DeviceSpec& gpu);

struct RooflineTime {
  double computeMs = 0;
  double memoryMs = 0;
  double waveEfficiency = 1; // fraction of the GPU the op's blocks keep busy
  double timeMs = 0;         // max(compute, memory), at least the launch floor
};

RooflineTime rooflineTime(const OpCost& cost, const DeviceSpec& gpu,
                          const RooflineOptions& options);

// A copy over the host link (CostFamily::HostTransfer): its bytes at `gbs` (10^9 B/s; none at 0),
// at least a launch.
double hostTransferMs(const OpCost& cost, double gbs, const RooflineOptions& options);

} // namespace wavecast
