// The formula of each cost family (docs/predictor.md's table): `stem` is the ATen
// name without namespace or in-place suffix. estimateOpCost picks the family.
#pragma once

#include "wavecast/predictor/op_cost.h"

#include <string>

namespace wavecast::family_costs {

// Elementwise kernels that run at an element rate rather than at the bandwidth.
// TensorIterator loads whole vectors only when every operand is contiguous over the whole
// iteration (gpu_kernel_impl's vectorized path). An operand broadcast along some dims (a
// bias, a causal mask, a per-channel scale) sends the op down the legacy path: an element
// per load, each operand's offset worked out dim by dim. Those kernels are bound by that
// work, not by DRAM: on an H100 a bf16 masked_fill_ with a broadcast mask runs at the
// element rate of its fp32 twin, where a contiguous bf16 add streams twice as many
// elements. SM cycles per element, fitted by bench/truth/fit_broadcast.py to the per-shape
// kernel times of bench/truth/data/h100 (GPT-2's causal masks, the biases and per-channel
// adds of the transformers, GNMT and the small CNN; FP32 and bf16 autocast). Casts from a
// 16-bit float run at the same rate (the H100's calibration: bf16 to fp32 at 0.84-0.85
// cycles per element over 6 and 25 million elements, to fp16 at 0.66-0.77), where casts
// down from fp32 stream at the bandwidth. The bias PyTorch adds to a cuDNN convolution's
// output after it is such a broadcast add (the small CNN's: 0.84-0.93 cycles per element).
inline constexpr double kElementRateCycles{0.861};

// SM cycles per output element of cuBLAS's kernel for a K = 1 product (an outer
// product; GemmKernel::OuterProduct): GNMT's attention score layer's input gradient
// ([B*L*S, 1] x [1, 1024], 41-655 million elements) ran at 0.385-0.43 cycles per element
// on both the H100 and the H200 (bench/truth/data, per-shape kernel times), in FP32 and
// bf16 alike: the same SMs and clock, 1.4x apart in bandwidth, so the SMs bind it.
inline constexpr double kOuterProductCycles{0.40};

// Matrix work (cuBLAS, cuDNN, fused attention): convolutions forward and backward,
// GEMMs, scaled-dot-product attention and recurrent layers.
OpCost convolution(const OpRecord& op);
OpCost convolutionBackward(const OpRecord& op);
OpCost gemm(const OpRecord& op, const std::string& stem);
// torch._grouped_mm and transformers' grouped_mm_fallback (stem), and the fallback's
// backward.
OpCost groupedGemm(const OpRecord& op, const std::string& stem);
// A grouped GEMM's offsets (schema: mat_a, mat_b, offs, bias): where the router cut its
// tokens, one per group; null without them (batches of matrices).
const TensorMeta* groupedGemmOffsets(const OpRecord& op);
OpCost groupedGemmBackward(const OpRecord& op);
OpCost fft(const OpRecord& op, const std::string& stem);
OpCost attention(const OpRecord& op, const std::string& stem);
OpCost recurrent(const OpRecord& op, const std::string& stem);

// Vector work (CUDA cores, bound by DRAM traffic): elementwise ops, copies,
// reductions, softmax, norms, embeddings, pooling, losses and multi-tensor optimizers.
OpCost elementwise(const OpRecord& op, const std::string& stem, bool inplace);
OpCost copyLike(const OpRecord& op, const std::string& stem);
OpCost reduction(const OpRecord& op, const std::string& stem);
OpCost softmax(const OpRecord& op, const std::string& stem);
OpCost normalization(const OpRecord& op, const std::string& stem);
OpCost embedding(const OpRecord& op, const std::string& stem);
OpCost pooling(const OpRecord& op, const std::string& stem);
OpCost loss(const OpRecord& op, const std::string& stem);
OpCost optimizerForeach(const OpRecord& op, const std::string& stem, bool inplace);

} // namespace wavecast::family_costs
