#include "wavecast/predictor/roofline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

namespace wavecast {
namespace {

// Output tiles a GEMM kernel may use, largest first, with the fraction of an SM's
// peak each reaches; the heuristic picks the one that keeps the GPU busiest, like
// cuBLAS's heuristics do between large and small tiles.
struct Tile {
  double rows;
  double cols;
  double efficiency;
};
constexpr std::array<Tile, 4> kGemmTiles{
    {{128, 128, 1.0}, {128, 64, 0.9}, {64, 64, 0.75}, {32, 32, 0.5}}};

// How well a GEMM's output tiles use the GPU: `occupancy`, the fraction of the SMs
// busy across ceil(waves) waves of one tile per SM (wave quantisation), and `useful`,
// that times the fraction of each tile inside the matrix (tile quantisation: an
// output of 50 x 50 in a 64 x 64 tile still costs the whole tile).
struct TileUse {
  double occupancy = 1;
  double useful = 1;
};

TileUse gemmTileUse(const GemmShape& g, int sms, double minSliceK) {
  if (g.m <= 0 || g.n <= 0)
    return {};
  TileUse best{0, 0};
  for (const Tile& tile : kGemmTiles) {
    const double rowTiles = std::ceil(g.m / tile.rows);
    const double colTiles = std::ceil(g.n / tile.cols);
    const double outputTiles = std::max(1.0, g.batch) * rowTiles * colTiles;
    const double slices =
        g.splitK
            ? std::max(1.0, std::min(std::floor(sms / outputTiles), std::floor(g.k / minSliceK)))
            : 1.0;
    const double tiles = outputTiles * slices;
    const double waves = std::ceil(tiles / sms);
    const double occupancy = tiles / (waves * sms);
    const double inside = (g.m / (rowTiles * tile.rows)) * (g.n / (colTiles * tile.cols));
    const double useful = tile.efficiency * occupancy * inside;
    if (useful > best.useful)
      best = {occupancy, useful};
  }
  return best;
}

// An op's GEMMs each at their own efficiency: the op's is their FLOP-weighted harmonic
// mean (occupancy: their FLOP-weighted mean).
TileUse matrixTileUse(const OpCost& cost, int sms, double minSliceK) {
  double weighted = 0, flops = 0, occupancy = 0;
  for (const GemmWork& work : cost.gemms) {
    const TileUse part = gemmTileUse(work.shape, sms, minSliceK);
    weighted += work.flops / part.useful;
    occupancy += work.flops * part.occupancy;
    flops += work.flops;
  }
  if (flops > 0 && weighted > 0)
    return {occupancy / flops, flops / weighted};
  return gemmTileUse(cost.gemm, sms, minSliceK);
}

// A fused attention kernel runs a thread block per (batch, head) and tile of queries
// (forward) or keys (backward), two to an SM. However short the sequence, a block takes a
// fixed time to load its tiles, keep the softmax statistics and write out: the recorded
// kernels of the transformers (bench/truth/data: 50 and 64 tokens, 2-15.5 waves of
// blocks) take the same time per wave on an H100 and an H200, whatever their FLOPs and
// bytes. SM cycles per wave, at the boost clock: cuDNN's (what torch 2.11 runs for bf16
// on sm90) 9 us forward and 14.3 us backward, priced for flash alike; the
// memory-efficient kernel's (float32) 14.5 us and 26 us.
struct FusedAttentionBlocks {
  double tile;
  double forwardCyclesPerWave, backwardCyclesPerWave;
};
constexpr FusedAttentionBlocks kFlashAttentionBlocks{128, 17800, 28300};
constexpr FusedAttentionBlocks kEfficientAttentionBlocks{64, 28700, 51500};
constexpr int kAttentionBlocksPerSm = 2;

double fusedAttentionLatencyMs(const AttentionWork& work, const DeviceSpec& gpu) {
  if (work.backend == AttentionBackend::None || work.backend == AttentionBackend::Math ||
      gpu.boostClockMHz <= 0)
    return 0;
  const FusedAttentionBlocks& kernel = work.backend == AttentionBackend::Efficient
                                           ? kEfficientAttentionBlocks
                                           : kFlashAttentionBlocks;
  const double tiled = work.backward ? work.keys : work.queries;
  const double blocks = work.batchHeads * std::ceil(tiled / kernel.tile);
  const double waves = std::ceil(blocks / (std::max(1, gpu.smCount) * kAttentionBlocksPerSm));
  const double cycles = work.backward ? kernel.backwardCyclesPerWave : kernel.forwardCyclesPerWave;
  return waves * cycles / (gpu.boostClockMHz * 1e6) * 1e3;
}

// Fused attention on Hopper's tensor cores (bf16 and fp16): its matmuls at a share of the
// dense peak, plus SM cycles per score computed for the softmax's exponentials and
// rescaling, which cost the same whatever the head size (a head of 64 runs at about half
// the FLOP rate of a head of 128). Fitted by bench/truth/fit_attention.py to the H100's
// calibration (flash, memory-efficient and cuDNN at 512-2,048 tokens, heads of 64 and 128):
// median error 9-16% per op there and 11-14% on the H200's, where the dense-peak pricing
// had them at 0.36 of their time. cuDNN's share is cuBLAS's (data/tensor_core_gemm.json):
// its time is the scores'. Torch's flash and memory-efficient kernels issue mma.sync,
// which reaches part of sm90's peak only; other architectures keep the roofline's matrix
// efficiency (FlashAttention-2 reached 0.72 of an A100's).
struct FusedAttentionRate {
  double peakShare;
  double cyclesPerScore;
};
struct FusedAttentionRates {
  FusedAttentionRate forward, backward;
};
constexpr FusedAttentionRates kHopperFlashAttention{{0.63, 0.2}, {0.53, 0.72}};
constexpr FusedAttentionRates kHopperEfficientAttention{{0.37, 0.43}, {0.21, 1.04}};
constexpr FusedAttentionRates kHopperCudnnAttention{{0.72, 0.09}, {0.72, 0.37}};

std::optional<FusedAttentionRate> fusedAttentionRate(const OpCost& cost, const DeviceSpec& gpu) {
  const bool halfPrecision =
      cost.dtype == ScalarType::BFloat16 || cost.dtype == ScalarType::Float16;
  if (!halfPrecision || gpu.computeCapabilityMajor != 9)
    return std::nullopt;
  const AttentionWork& work = cost.attention;
  const FusedAttentionRates* rates = nullptr;
  switch (work.backend) {
  case AttentionBackend::Flash:
    rates = &kHopperFlashAttention;
    break;
  case AttentionBackend::Efficient:
    rates = &kHopperEfficientAttention;
    break;
  case AttentionBackend::Cudnn:
    rates = &kHopperCudnnAttention;
    break;
  default:
    return std::nullopt;
  }
  return work.backward ? rates->backward : rates->forward;
}

// cuDNN's kernels for convolutions on fewer than 8 channels per filter tap (NarrowConvWork):
// a fixed time, SM cycles per position and the share of the CUDA cores' FP32 peak their
// multiply-adds reach, fitted by bench/truth/fit_narrow_conv.py to the first layers of
// ResNet-50, Inception-v3, the small CNN and DCGAN's discriminator and the last layer of its
// generator (bench/truth/data/h100, FP32 and bf16 autocast alike: these kernels take the
// same time in both). Forward and input gradient: median error 2.3% over 22 shapes on the
// H100, 5.3% on the H200; weight gradient: 7.7% and 7.2% over 16.
struct NarrowConvRate {
  double fixedUs;
  double cyclesPerPosition;
  double fp32PeakShare;
};
constexpr NarrowConvRate kNarrowConvData{4, 20, 0.39};
constexpr NarrowConvRate kNarrowConvWeightGradient{28, 36, 0.57};

double narrowConvMs(const std::vector<NarrowConvWork>& work, const DeviceSpec& gpu) {
  const double smCyclesPerSecond = std::max(1, gpu.smCount) * gpu.boostClockMHz * 1e6;
  double ms = 0;
  for (const NarrowConvWork& part : work) {
    const NarrowConvRate& rate =
        part.kernel == NarrowConvKernel::Data ? kNarrowConvData : kNarrowConvWeightGradient;
    ms += rate.fixedUs * 1e-3 + part.positions * rate.cyclesPerPosition / smCyclesPerSecond * 1e3 +
          2 * part.multiplyAdds / (gpu.fp32Tflops * 1e12 * rate.fp32PeakShare) * 1e3;
  }
  return ms;
}

// Elementwise-style kernels: 128 threads x 4 elements per block; the memory system is
// saturated once every SM has a block, compute once every wave is full.
constexpr double kElementsPerBlock = 512;

} // namespace

bool usesTf32Cores(const OpCost& cost, const DeviceSpec& gpu) {
  return cost.tf32 && gpu.tf32Tflops > 0;
}

bool usesTensorCores(const OpCost& cost, const DeviceSpec& gpu) {
  if (cost.unit != ComputeUnit::Matrix)
    return false;
  switch (cost.dtype) {
  case ScalarType::Float16:
    return gpu.fp16Tflops > 0;
  case ScalarType::BFloat16:
    return gpu.bf16Tflops > 0;
  case ScalarType::Float32:
    return usesTf32Cores(cost, gpu);
  default:
    return false;
  }
}

double peakTflops(const DeviceSpec& gpu, const OpCost& cost) {
  const ScalarType dtype = cost.dtype;
  if (cost.unit == ComputeUnit::Matrix) {
    if (dtype == ScalarType::Float16 && gpu.fp16Tflops > 0)
      return gpu.fp16Tflops;
    if (dtype == ScalarType::BFloat16 && gpu.bf16Tflops > 0)
      return gpu.bf16Tflops;
    if (dtype == ScalarType::Float32 && usesTf32Cores(cost, gpu))
      return gpu.tf32Tflops;
    if (gpu.fp32MatrixTflops > 0 && (dtype == ScalarType::Float32 || dtype == ScalarType::Float16 ||
                                     dtype == ScalarType::BFloat16))
      return gpu.fp32MatrixTflops;
  }
  // Elementwise math on fp16/bf16 runs in fp32 registers (PyTorch's opmath type).
  return gpu.fp32Tflops;
}

double fixedKernelMs(const OpCost& cost, const DeviceSpec& gpu, const RooflineOptions& options) {
  const bool cublasOnCudaCores = cost.family == CostFamily::Gemm &&
                                 cost.unit == ComputeUnit::Matrix && !usesTensorCores(cost, gpu);
  return cublasOnCudaCores ? cost.kernels * options.cublasFp32GemmLatencyUs * 1e-3 : 0;
}

AttentionBackend attentionBackendOn(const OpCost& cost, const DeviceSpec& gpu) {
  const int sm = gpu.computeCapabilityMajor * 10 + gpu.computeCapabilityMinor;
  AttentionBackend backend = cost.attention.backend;
  if (backend == AttentionBackend::Cudnn && sm < 90)
    backend = AttentionBackend::Flash;
  if (backend == AttentionBackend::Flash && sm < 80)
    backend = AttentionBackend::Efficient;
  if (backend == AttentionBackend::Efficient &&
      (sm < 50 || (cost.dtype == ScalarType::BFloat16 && sm < 80)))
    backend = AttentionBackend::Math;
  return backend;
}

OpCost asRunOn(const OpCost& cost, const DeviceSpec& gpu) {
  const AttentionBackend backend = attentionBackendOn(cost, gpu);
  if (backend == cost.attention.backend)
    return cost;
  OpCost run = cost;
  run.attention.backend = backend;
  if (backend != AttentionBackend::Math)
    return run; // the fused kernels are priced alike
  // Forward: Q.K^T writes the scores, softmax reads and writes them, dropout too (and
  // its mask), P.V reads them. Backward: dP written, dropout's backward, softmax's
  // backward (dP times P in a kernel of its own, then a kernel reading that and P and
  // writing dS), then dQ, dK and dV each read a score matrix.
  const AttentionWork& work = cost.attention;
  const double passes = work.backward ? 10 + (work.dropout ? 2 : 0) : 4 + (work.dropout ? 2 : 0);
  const double maskBytes = work.dropout ? work.scores : 0;
  run.flops = work.allScoresFlops;
  run.bytes = cost.bytes + passes * work.scores * elementSize(cost.dtype) + maskBytes;
  run.kernels = (work.backward ? 6 : 3) + (work.dropout ? 1 : 0);
  return run;
}

bool layoutTransformsOn(const DeviceSpec& gpu) {
  return gpu.computeCapabilityMajor < 9;
}

double hostTransferMs(const OpCost& cost, double gbs, const RooflineOptions& options) {
  const double dmaMs = gbs > 0 ? cost.bytes / (gbs * 1e9) * 1e3 : 0;
  return std::max(dmaMs, cost.kernels * options.launchFloorUs * 1e-3);
}

RooflineTime rooflineTime(const OpCost& cost, const DeviceSpec& gpu,
                          const RooflineOptions& options) {
  if (cost.attention.backend != AttentionBackend::None &&
      attentionBackendOn(cost, gpu) != cost.attention.backend)
    return rooflineTime(asRunOn(cost, gpu), gpu, options);
  RooflineTime t;
  if (cost.metadataOnly())
    return t;
  if (cost.family == CostFamily::HostTransfer) {
    // The copy engine's DMA at the host link's measured rate (docs/gpus.md, host_links).
    t.timeMs = hostTransferMs(cost, gpu.hostLink.gbs(cost.transfer.direction), options);
    t.memoryMs = t.timeMs;
    return t;
  }
  const int sms = std::max(1, gpu.smCount);
  if (options.tensorCoreGemm && cost.family == CostFamily::Gemm && usesTensorCores(cost, gpu)) {
    const GemmDevice device{peakTflops(gpu, cost) * 1e12,
                            gpu.memoryBandwidthGBs * 1e9 * options.memoryEfficiency, sms,
                            gpu.boostClockMHz * 1e6, gpu.computeCapabilityMajor};
    const TensorCoreGemmTime gemm =
        tensorCoreGemmTime(cost.gemm, cost.bytes, device, *options.tensorCoreGemm);
    t.computeMs = gemm.computeMs;
    t.memoryMs = gemm.memoryMs;
    t.waveEfficiency = gemm.occupancy;
    t.timeMs = std::max(gemm.timeMs, cost.kernels * options.launchFloorUs * 1e-3);
    return t;
  }
  const bool cudnnTensorCores = usesTensorCores(cost, gpu) && runsOnCudnn(cost);
  const double cudnnEfficiency = cost.family == CostFamily::Conv && usesTf32Cores(cost, gpu)
                                     ? options.cudnnTf32ConvEfficiency
                                     : options.cudnnTensorCoreEfficiency;
  const double efficiency = cost.unit != ComputeUnit::Matrix ? options.vectorEfficiency
                            : cudnnTensorCores               ? cudnnEfficiency
                                                             : options.matrixEfficiency;
  const double densePeak = peakTflops(gpu, cost) * 1e12;
  const double peak = densePeak * efficiency;
  const double bandwidth = gpu.memoryBandwidthGBs * 1e9 * options.memoryEfficiency;
  double computeEfficiency = 1;
  double memoryEfficiency = 1;
  if (cost.unit == ComputeUnit::Matrix) {
    // cuBLAS splits K by the same heuristics on CUDA cores as on tensor cores: the
    // shortest slice fitted on its tensor-core GEMMs; cuDNN keeps its slices long.
    const double minSliceK = runsOnCudnn(cost) || !options.tensorCoreGemm
                                 ? options.splitKMinSliceK
                                 : options.tensorCoreGemm->splitKMinSliceK;
    const TileUse use = matrixTileUse(cost, sms, minSliceK);
    computeEfficiency = use.useful;
    memoryEfficiency = std::min(1.0, use.occupancy * 4); // a few busy SMs stream well
  } else if (cost.parallelElements > 0 || cost.parallelBlocks > 0) {
    const double blocks = cost.parallelBlocks > 0
                              ? cost.parallelBlocks
                              : std::ceil(cost.parallelElements / kElementsPerBlock);
    const int blocksPerSm =
        cost.blocksPerSm > 0 ? cost.blocksPerSm : std::max(1, gpu.limits.maxThreadsPerSm / 128);
    const double wave = static_cast<double>(sms) * blocksPerSm;
    computeEfficiency = blocks / (std::ceil(blocks / wave) * wave);
    memoryEfficiency = std::min(1.0, blocks / sms);
  }
  t.waveEfficiency = computeEfficiency;
  if (!cost.narrowConvs.empty() && gpu.boostClockMHz > 0 && gpu.fp32Tflops > 0)
    t.computeMs = narrowConvMs(cost.narrowConvs, gpu);
  else if (const auto rate = fusedAttentionRate(cost, gpu);
           rate && densePeak > 0 && gpu.boostClockMHz > 0)
    t.computeMs = cost.attention.matmulFlops / (densePeak * rate->peakShare) * 1e3 +
                  cost.attention.scoresComputed * rate->cyclesPerScore /
                      (sms * gpu.boostClockMHz * 1e6) * 1e3;
  else
    t.computeMs = peak > 0 ? cost.flops / (peak * computeEfficiency) * 1e3 : 0;
  if (cost.smCycles > 0 && gpu.boostClockMHz > 0)
    t.computeMs += cost.smCycles / (sms * gpu.boostClockMHz * 1e6) * 1e3;
  t.computeMs = std::max(t.computeMs, fusedAttentionLatencyMs(cost.attention, gpu));
  t.computeMs += fixedKernelMs(cost, gpu, options);
  t.memoryMs = bandwidth > 0 ? cost.bytes / (bandwidth * memoryEfficiency) * 1e3 : 0;
  const bool transforms = layoutTransformsOn(gpu);
  const double helperBytes = cost.helperBytes + (transforms ? cost.layoutTransformBytes : 0);
  const int kernels = cost.kernels + (transforms ? cost.layoutTransformKernels : 0);
  double helperMs = bandwidth > 0 ? helperBytes / bandwidth * 1e3 : 0;
  if (cost.helperSmCycles > 0 && gpu.boostClockMHz > 0)
    helperMs = std::max(helperMs, cost.helperSmCycles / (sms * gpu.boostClockMHz * 1e6) * 1e3);
  const double serialMs = cost.serialUs * 1e-3;
  t.timeMs = std::max({t.computeMs + helperMs + serialMs, t.memoryMs + helperMs + serialMs,
                       kernels * options.launchFloorUs * 1e-3});
  return t;
}

} // namespace wavecast
