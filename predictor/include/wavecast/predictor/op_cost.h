// The analytic work of one traced op: FLOPs, DRAM bytes, which units run it and how
// much parallelism it exposes (docs/predictor.md lists the formula of each family).
#pragma once

#include "wavecast/predictor/collectives.h"
#include "wavecast/predictor/cost_family.h"
#include "wavecast/predictor/device_spec.h"
#include "wavecast/trace.h"

#include <optional>
#include <string>
#include <string_view>

namespace wavecast {

// Vector: CUDA cores (elementwise, reductions, norms). Matrix: GEMM-like work that
// cuBLAS/cuDNN run on tensor cores when the dtype allows.
enum class ComputeUnit { Vector, Matrix };

// The GEMM a matrix op lowers to (batch x [m x k] . [k x n]), for tile/wave quantisation.
struct GemmShape {
  double batch = 1;
  double m = 0;
  double n = 0;
  double k = 0;
  // Whether the kernel may cut K into slices when its output tiles cannot fill the
  // GPU (split-K: each slice sums part of K, a reduction adds them), as cuDNN's
  // weight-gradient kernels do.
  bool splitK = false;
  // The largest power of two, up to 16, dividing every operand's leading dimension in
  // bytes. cuBLAS's fast tensor-core kernels load 16-byte vectors (Hopper's TMA
  // requires 16-byte strides); an odd leading dimension leaves it kernels that load one
  // element at a time ("align1"), in TF32 as in 16 bits.
  int leadingDimAlignmentBytes = 16;
  int elementBytes = 2; // of the operands

  bool loadsElementByElement() const { return leadingDimAlignmentBytes <= elementBytes; }
};

// What cuBLAS runs for a GEMM-shaped op. A product with one output row or column per
// batch (a Linear to one feature, its weight gradient, dot and mv) goes to a GEMV kernel
// that streams the matrix once, at the bandwidth; a K of 1 (an outer product, that
// Linear's input gradient) to a kernel bound by writing each output element. Neither
// is a tiled GEMM: tile and wave quantisation do not apply, nor the models fitted on
// tiled ones.
enum class GemmKernel { Tiled, MatrixVector, OuterProduct };

// One GEMM an op runs and its share of the op's FLOPs.
struct GemmWork {
  GemmShape shape;
  double flops = 0;
};

// Convolution work with fewer than 8 channels per filter tap on the image side (the
// weight's dim 1: an image model's first layer reads 1 or 3 channels, a generator's last,
// transposed one writes 3). cuDNN's tensor-core implicit GEMM reduces over channel vectors
// of 8 per tap, so it runs other kernels, priced by their own rates (roofline.cpp).
enum class NarrowConvKernel {
  Data,           // forward or input gradient (cuDNN's fprop and dgrad)
  WeightGradient, // wgrad: the image correlated with the output's gradient
};
struct NarrowConvWork {
  NarrowConvKernel kernel = NarrowConvKernel::Data;
  // Data: positions of the tensor written; WeightGradient: of the convolution's
  // (non-transposed) output.
  double positions = 0;
  double multiplyAdds = 0;
};

// The fused scaled-dot-product-attention kernels of torch 2.x on CUDA, and the math
// decomposition it falls back to (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp).
// What an SDPA kernel computes, to price it again where a GPU lacks its backend.
struct AttentionWork {
  AttentionBackend backend = AttentionBackend::None; // None: not an SDPA kernel
  bool backward = false;
  bool dropout = false;
  double scores = 0;         // batch x heads x L x S
  double allScoresFlops = 0; // FLOPs with every score computed (no causal block skipped)
  // What the kernel computes, the blocks a causal mask hides skipped: its matmuls' FLOPs
  // (backward: 2.5x forward's) and its scores.
  double matmulFlops = 0;
  double scoresComputed = 0;
  double batchHeads = 0;        // batch x heads
  double queries = 0, keys = 0; // L and S
};

// What a collective op moves and how the script waits for it (docs/trace-format.md,
// "Collective ops"): the trace's args.collective, bytes, group_size, async and wait_op.
struct CollectiveWork {
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t bytes = 0;             // as nccl-tests counts
  int groupSize = 1;             // ranks in the process group
  int ranksPerNode = 0;          // of the group on one node; 0: as many as the node holds
  bool async = false;            // runs on NCCL's stream until its wait point
  std::optional<int64_t> waitOp; // the op that first needs its result; absent: phase end
  // Issued on a stream of its caller's own (FSDP's all-gather streams), which does not
  // wait for the compute issued before it.
  bool sideStream = false;
};

// A mixture of experts' grouped GEMM: one GEMM per group (expert), `gemm` being one of
// them. torch._grouped_mm runs as one grouped kernel for bf16 on sm90/sm100, elsewhere as
// a loop of mm after copying the group offsets to the host
// (aten/src/ATen/native/cuda/GroupedBlas.cpp); transformers' own fallback always loops
// (groupedGemmLoops).
struct GroupedGemmWork {
  int groups = 0;             // 0: not a grouped GEMM
  bool groupedKernel = false; // a bf16 torch._grouped_mm: one kernel where the GPU has it
};

// The ops the tracer records for work no ATen op shows (docs/trace-format.md): copies over
// the host link, and the script's torch.cuda.synchronize().
inline constexpr std::string_view kHostToDeviceOp = "wavecast::host_to_device";
inline constexpr std::string_view kDeviceToHostOp = "wavecast::device_to_host";
inline constexpr std::string_view kSynchronizeOp = "wavecast::synchronize";

// A copy between host memory and the GPU: the copy engine moves `bytes` over the host link
// in stream order. Pageable memory goes through page-locked staging buffers that the CUDA
// driver copies on the CPU chunk by chunk: before the DMA drains them to the GPU, after it
// fills them from the GPU. It holds the CPU until the last chunk is staged.
struct HostTransferWork {
  TransferDirection direction = TransferDirection::ToDevice;
  bool pageable = false;
  bool blocking = false; // non_blocking=False: PyTorch synchronizes the stream after it
  double stagingMs = 0;  // the staging copies, timed on the CPU that traced (pageable only)
  // Issued on a stream the script made (a prefetcher's): the copy engine runs it beside the
  // compute stream.
  bool sideStream = false;
};

struct OpCost {
  CostFamily family = CostFamily::Elementwise;
  double flops = 0;
  double bytes = 0; // DRAM traffic of the main kernel, streamed beside its compute
  ComputeUnit unit = ComputeUnit::Vector;
  ScalarType dtype = ScalarType::Float32; // compute dtype (first floating input)
  bool tf32 = false; // float32 matrix work on TF32 tensor cores (set by the predictor)
  GemmShape gemm;    // matrix ops only
  GemmKernel gemmKernel = GemmKernel::Tiled; // GEMMs only
  // Ops that run several GEMMs of different shapes (a convolution's backward: the
  // input and the weight gradients); empty: `gemm` runs all of `flops`.
  std::vector<GemmWork> gemms;
  // A convolution's work on narrow channels (priced instead of its GEMMs); empty: none.
  std::vector<NarrowConvWork> narrowConvs;
  double parallelElements = 0; // independent output elements (vector ops)
  // Thread blocks the kernel runs when its parallelism is not per element but per
  // reduction (one block per channel); 0: from parallelElements.
  double parallelBlocks = 0;
  // Blocks of this kernel one SM runs at once, where its block size or resources say
  // so; 0: as many 128-thread blocks as the SM holds threads.
  int blocksPerSm = 0;
  // Work bound by each thread block's latency or issue rather than by arithmetic or
  // bandwidth (a block per row that waits on its row's loads and reductions, a broadcast
  // elementwise kernel's per-element offsets): SM cycles summed over the blocks, spread
  // over the SMs at the boost clock; added to the FLOPs' time.
  double smCycles = 0;
  // Time a kernel spends in serial phases whatever its size (us): a split reduction's
  // last block summing every block's partial results.
  double serialUs = 0;
  int kernels = 1; // kernel launches; 0 for metadata-only ops
  // DRAM traffic that streams serially, before or after the main kernel's compute: helper
  // kernels (the bias PyTorch adds to a cuDNN convolution's output and sums out of its
  // gradient, batch norm's elementwise pass) or a phase of its own (a split reduction's
  // stream after its rows' latency).
  double helperBytes = 0;
  // SM cycles of helper kernels bound by their element rate rather than their bytes (the
  // bias added to a cuDNN convolution's output, a broadcast add): they take the longer
  // of their cycles and their helperBytes' streaming.
  double helperSmCycles = 0;
  // cuDNN's NCHW <-> NHWC transforms around a half-precision convolution, in kernels of
  // their own, on the GPUs that still run them (layoutTransformsOn); not in helperBytes.
  double layoutTransformBytes = 0;
  int layoutTransformKernels = 0;
  AttentionWork attention;   // scaled-dot-product-attention kernels only
  CollectiveWork collective; // CostFamily::Collective only
  GroupedGemmWork grouped;   // torch._grouped_mm only
  HostTransferWork transfer; // CostFamily::HostTransfer only
  // One of the kernels Inductor generates for a compiled region (compiled_fusion.h): its
  // fused group's traffic, priced by the roofline, never by eager kernels' measurements.
  bool fused = false;
  bool approximate = false;       // no formula of its own: closest family used
  CostNote note = CostNote::None; // why approximate, zero or unusual

  bool metadataOnly() const { return kernels == 0; }
  // All its DRAM traffic, what the results report (layout transforms, which depend on
  // the GPU, aside).
  double dramBytes() const { return bytes + helperBytes; }
};

// FLOPs and bytes of `op` from its shapes, dtypes and arguments. Never throws on odd
// input: negative dimensions count as empty and set `approximate` with a note.
OpCost estimateOpCost(const OpRecord& op);

// Whether `gpu` runs the grouped GEMM `cost` as a loop of mm, one kernel per group, after
// a device-to-host copy of the group offsets that makes the CPU wait for the GPU; false
// for one grouped kernel, and for any other op.
bool groupedGemmLoops(const OpCost& cost, const DeviceSpec& gpu);

// Convolutions and RNNs go to cuDNN; other matrix work to cuBLAS.
bool runsOnCudnn(const OpCost& cost);

// Whether CUDA runs `cost` on TF32 tensor cores under `precision`: float32
// matrix work, through cuDNN (convolutions, RNNs) or cuBLAS (everything else).
bool runsInTf32(const OpCost& cost, const FloatPrecision& precision);

// The arithmetic `cost` runs in, for display: "tf32", "bfloat16", "float32", ...
std::string mathPrecision(const OpCost& cost);

} // namespace wavecast
