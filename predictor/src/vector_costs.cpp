#include "cost_shapes.h"
#include "family_costs.h"
#include "op_tables.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace wavecast::family_costs {

using namespace cost_shapes;

using op_tables::elementwiseFlops;

OpCost elementwise(const OpRecord& op, const std::string& stem, bool inplace) {
  OpCost cost;
  cost.family = CostFamily::Elementwise;
  cost.bytes = inputBytes(op) + outputBytes(op);
  double elements = std::max(largestNumel(op.outputs), largestNumel(op.inputs));
  // In-place ops that report no output still write their first operand.
  if (inplace && op.outputs.empty() && op.input(0))
    cost.bytes += bytesOf(op.input(0));
  cost.flops = elements * elementwiseFlops(stem);
  cost.parallelElements = elements;
  if (op.broadcastsAnInput())
    cost.smCycles = elements * kElementRateCycles;
  // Out of place, ATen clones self (a contiguous copy of its own) and fills the clone in
  // place: that pass reads and writes the whole result.
  if (!inplace && (stem == "masked_fill" || stem == "masked_scatter")) {
    cost.helperBytes = 2 * outputBytes(op);
    cost.kernels = 2;
  }
  return cost;
}

OpCost fft(const OpRecord& op, const std::string& stem) {
  // torch.fft on CUDA is cuFFT: _fft_r2c (a real input, its onesided complex spectrum),
  // _fft_c2r (back) and _fft_c2c, over args.dim. A complex transform of n points takes
  // 5 n log2 n FLOPs (the radix-2 count cuFFT's benchmarks quote), a real one half that.
  // cuFFT runs a multi-dimensional transform as a pass per dimension, each reading and
  // writing the whole spectrum; torch scales a normalized one in a kernel of its own.
  OpCost cost;
  cost.family = CostFamily::Fft;
  cost.bytes = inputBytes(op) + outputBytes(op);
  const TensorMeta* in = op.input(0);
  const TensorMeta* out = op.outputs.empty() || !op.outputs[0] ? nullptr : &*op.outputs[0];
  if (!in || !out) {
    cost.approximate = true;
    cost.note = CostNote::NoFormula;
    return cost;
  }
  const TensorMeta* spectrum = stem == "_fft_r2c" ? out : in;
  const TensorMeta* signal = stem == "_fft_c2r" ? out : in; // its sizes are the points
  std::vector<int64_t> dims = op.intListArg("dim").value_or(std::vector<int64_t>{-1});
  double points = 1;
  for (int64_t d : dims)
    points *= dim(signal, static_cast<int>(d));
  const double transforms = points > 0 ? numel(signal) / points : 0;
  const double perPoint = stem == "_fft_c2c" ? 5.0 : 2.5;
  cost.flops = points > 1 ? perPoint * points * std::log2(points) * transforms : 0;
  cost.parallelElements = numel(spectrum);
  const int passes = std::max<int>(1, static_cast<int>(dims.size()));
  cost.kernels = passes;
  cost.bytes += (passes - 1) * 2 * bytesOf(spectrum);
  if (op.intArg("normalization").value_or(0) != 0) {
    cost.helperBytes = 2 * bytesOf(out);
    ++cost.kernels;
  }
  return cost;
}

OpCost copyLike(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Copy;
  double in = inputBytes(op);
  double out = outputBytes(op);
  const double outElems = largestNumel(op.outputs);
  if (stem == "slice_backward" || stem == "select_backward" || stem == "index_select_backward" ||
      stem == "unfold_backward" || stem == "diagonal_backward" || stem == "scatter_add" ||
      stem == "index_add" || stem == "index_put" || stem == "_index_put_impl") {
    out *= 2; // zero-fill of the full result, then the copy/scatter into it
  }
  if (stem == "index_select" || stem == "gather" || stem == "index" || stem == "take" ||
      stem == "_unsafe_index") {
    // Reads only the gathered rows of the source, not all of it.
    const TensorMeta* source = op.input(0);
    if (source && numel(source) > outElems)
      in = in - bytesOf(source) + outElems * source->elementSize();
  }
  if (stem == "_local_scalar_dense" || stem == "item")
    cost.note = CostNote::DeviceToHostScalar;
  // copy_(self, src) reads src into self.
  const bool intoSelf = stem == "copy";
  const TensorMeta* source = intoSelf ? op.input(1) : op.input(0);
  const TensorMeta* destination = intoSelf ? op.input(0) : op.output(0);
  const bool castFrom16Bit = source && destination && source->elementSize() == 2 &&
                             isFloatingPoint(source->dtype) && destination->dtype != source->dtype;
  // FSDP2's chunk_cat copies the gradients into the reduce-scatter's buffer in its dtype.
  const bool casts = intoSelf || stem == "_to_copy" || stem == "to" || stem == "chunk_cat" ||
                     stem == "_chunk_cat";
  if (casts && (castFrom16Bit || op.broadcastsAnInput()))
    cost.smCycles = std::max(outElems, largestNumel(op.inputs)) * kElementRateCycles;
  cost.bytes = in + out;
  cost.parallelElements = std::max(outElems, largestNumel(op.inputs));
  cost.flops = 0;
  return cost;
}

namespace {

constexpr double kOuterReductionRowCycles = 225;
constexpr double kOuterReductionSerialUs = 7.25;

// The rows of a reduction over the input's leading dims, when there are enough of them
// for PyTorch's reduce kernel to split them over several blocks per output.
std::optional<double> outerReductionRows(const OpRecord& op) {
  const TensorMeta* x = op.input(0);
  const auto dims = op.intListArg("dim");
  if (!x || !dims || dims->empty())
    return std::nullopt;
  const int r = rank(x);
  std::vector<bool> reduced(static_cast<size_t>(std::max(0, r)), false);
  for (int64_t d : *dims) {
    if (d < 0)
      d += r;
    if (d < 0 || d >= r)
      return std::nullopt;
    reduced[static_cast<size_t>(d)] = true;
  }
  int prefix = 0;
  while (prefix < r && reduced[static_cast<size_t>(prefix)])
    ++prefix;
  if (prefix == 0 || prefix == r ||
      std::any_of(reduced.begin() + prefix, reduced.end(), [](bool b) { return b; }))
    return std::nullopt;
  double rows = 1;
  for (int i = 0; i < prefix; ++i)
    rows *= dim(x, i);
  if (rows < 1000)
    return std::nullopt;
  return rows;
}

} // namespace

OpCost reduction(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Reduction;
  const double inElems = largestNumel(op.inputs);
  cost.bytes = inputBytes(op) + outputBytes(op);
  const bool twoPass = stem == "var" || stem == "std" || stem == "var_mean" || stem == "std_mean" ||
                       contains(stem, "norm") || stem == "logsumexp";
  double flopsPerElement = twoPass ? 3 : 1;
  if (stem == "sort" || stem == "argsort" || stem == "topk" || stem == "median" ||
      stem == "kthvalue" || stem == "unique" || stem == "_unique2" || stem == "mode") {
    flopsPerElement = std::max(1.0, std::log2(std::max(2.0, dim(op.input(0), -1))));
    cost.bytes *= 2; // sorting networks pass over the data several times
  }
  cost.flops = inElems * flopsPerElement;
  cost.parallelElements = inElems;
  if (const auto rows = stem == "sum" || stem == "mean" ? outerReductionRows(op) : std::nullopt) {
    // Summing over leading dims (a Linear's bias gradient): each thread walks its
    // columns down the rows in blocks that split the rows, and the last block to finish
    // sums every block's partial results. The rows cost SM cycles, the bytes stream
    // after them and the last block adds a fixed time: fitted to the column sums of
    // bench/truth/data (1,023-16,368 rows of 128-32,000), the same on an H100 and an
    // H200 but for the streaming.
    cost.smCycles = *rows * kOuterReductionRowCycles;
    cost.helperBytes = cost.bytes;
    cost.bytes = 0;
    cost.serialUs = kOuterReductionSerialUs;
  }
  return cost;
}

namespace {

// How many times PyTorch's softmax kernels read their input from DRAM
// (aten/src/ATen/native/cuda/SoftMax.cu): rows of up to 1,024 elements and 4 KB are held
// in registers; longer rows are read into the block's 48 KB of shared memory, or re-read
// from cache (NeuSight's A100 softmax kernels of 4-16 KB rows stream at the bandwidth of
// a single read). Rows past 48 KB are read from memory for the maximum, again for the
// sum of exponentials and again for the result; backward reads the incoming gradient
// for its sum, then again with the output for the result.
int softmaxRowReads(double rowElements, double elementSize, bool backward) {
  constexpr double kSharedMemoryBytes = 48 * 1024, kReductionBytes = 32 * 4;
  if (rowElements * elementSize < kSharedMemoryBytes - kReductionBytes)
    return 1;
  return backward ? 2 : 3;
}

} // namespace

OpCost softmax(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Softmax;
  const bool backward = contains(stem, "backward");
  const double elements = std::max(largestNumel(op.inputs), largestNumel(op.outputs));
  cost.bytes = inputBytes(op) + outputBytes(op);
  // max, subtract, exp, sum, divide (log_softmax: log instead of divide).
  cost.flops = elements * (backward ? 4 : 5);
  cost.parallelElements = elements;
  const bool aten = stem == "_softmax" || stem == "_log_softmax" ||
                    stem == "_softmax_backward_data" || stem == "_log_softmax_backward_data";
  const TensorMeta* x = op.input(0); // the input, or backward's incoming gradient
  if (!aten || !x)
    return cost;
  if (stem == "_softmax_backward_data") {
    // softmax_backward_cuda_out multiplies the gradient by the output in a kernel of its
    // own (aten::mul) before the reduction, whatever the dimension: two reads and a write.
    cost.bytes += bytesOf(x) + bytesOf(op.input(1)) + bytesOf(x);
    cost.flops += elements;
    cost.kernels = 2;
  }
  // The reduced dimension's length; over an inner dimension (cunn_SpatialSoftMax*) the
  // kernels read each slice as often, strided.
  const auto axis = op.intArg("dim");
  const int rank = static_cast<int>(x->shape.size());
  if (!axis || rank == 0)
    return cost;
  const int reduced = static_cast<int>(*axis < 0 ? *axis + rank : *axis);
  if (reduced < 0 || reduced >= rank)
    return cost;
  const int extraReads = softmaxRowReads(dim(x, reduced), x->elementSize(), backward) - 1;
  cost.bytes += extraReads * bytesOf(x);
  return cost;
}

// Training batch norm on NCHW runs a per-channel reduction, one thread block per
// channel (cuDNN's CUDNN_BATCHNORM_SPATIAL, and PyTorch's own kernels that bfloat16 goes
// to, _select_batch_norm_backend), then an elementwise pass over the whole GPU. The
// reduction's blocks stream slowly: on an H100 and an H200 alike each takes the same
// time, whatever their bandwidth, so it is priced as work per element at blocks per SM,
// fitted by bench/truth/fit_batch_norm.py to the per-shape kernel times of
// bench/truth/data/h100 (ResNet-50, Inception-v3, DCGAN; FP32 and bf16 autocast).
struct PerChannelReduction {
  int blocksPerSm;
  double opsPerElement; // FP32-operation units
};
struct BatchNormKernels {
  PerChannelReduction forward, backward;
};
constexpr BatchNormKernels kCudnnBatchNorm{{2, 90}, {6, 90}};
constexpr BatchNormKernels kNativeBatchNorm{{1, 380}, {3, 240}};

// PyTorch's layer norm runs one 128-thread block per row (vectorized_layer_norm_kernel;
// backward adds a kernel reducing the weight and bias gradients over the rows). On an H100
// and an H200 alike a row takes the same time, whatever their bandwidth: the blocks wait
// on their row's loads and reductions. So a row costs SM cycles, fixed plus per element,
// fitted by bench/truth/fit_layer_norm.py to the per-shape kernel times of
// bench/truth/data/h100 (GPT-2, the transformers; FP32 and bf16 autocast, which keeps
// layer norm in fp32).
struct RowCycles {
  double perRow, perElement;
};
constexpr RowCycles kLayerNormForward{317, 0.662};
constexpr RowCycles kLayerNormBackward{725, 1.914};

// Batch/group/instance norm (statistics over all but the channel dim) and layer norm.
OpCost normalization(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Norm;
  const bool backward = contains(stem, "backward");
  const TensorMeta* x = backward ? op.input(1) : op.input(0);
  if (!x)
    x = op.input(0);
  const double elements = numel(x);
  const bool layerNorm = contains(stem, "layer_norm") || contains(stem, "rms_norm");
  const bool training = op.boolArg("training").value_or(op.boolArg("train").value_or(true));
  const bool batchNorm = contains(stem, "batch_norm") && !contains(stem, "elemt") &&
                         !contains(stem, "stats") && !contains(stem, "gather") &&
                         !contains(stem, "reduce");
  const bool perChannel = batchNorm && training && x && x->contiguous && x->shape.size() >= 3;
  const double xBytes = bytesOf(x);
  const double paramBytes = inputBytes(op) - (backward ? bytesOf(op.input(0)) + xBytes : xBytes);
  const double outBytes = outputBytes(op);
  cost.parallelElements = elements;
  if (perChannel) {
    const BatchNormKernels& kernels =
        x->dtype == ScalarType::BFloat16 ? kNativeBatchNorm : kCudnnBatchNorm;
    const PerChannelReduction& reduction = backward ? kernels.backward : kernels.forward;
    const double dyBytes = backward ? bytesOf(op.input(0)) : 0;
    // The reduction reads x (backward: dy and x); the elementwise pass reads them again
    // and writes y (dx).
    cost.bytes = dyBytes + xBytes + std::max(0.0, paramBytes);
    cost.helperBytes = dyBytes + xBytes + outBytes;
    cost.flops = reduction.opsPerElement * elements;
    cost.parallelBlocks = static_cast<double>(std::max<int64_t>(1, x->shape[1]));
    cost.blocksPerSm = reduction.blocksPerSm;
    cost.kernels = backward ? 2 : 1;
    return cost;
  }
  if (layerNorm && x && !x->shape.empty()) {
    double rowLength = dim(x, -1);
    if (const auto normalized = op.intListArg("normalized_shape");
        normalized && !normalized->empty()) {
      rowLength = 1;
      for (const int64_t d : *normalized)
        rowLength *= static_cast<double>(std::max<int64_t>(1, d));
    }
    const RowCycles& row = backward ? kLayerNormBackward : kLayerNormForward;
    cost.smCycles = elements / std::max(1.0, rowLength) * row.perRow + elements * row.perElement;
  }
  if (!backward) {
    // Batch/group norm in training read x for the statistics and again to normalise;
    // layer norm keeps a row on chip. Eval batch norm is a single elementwise pass.
    const double reads = (layerNorm || !training) ? 1 : 2;
    cost.bytes = reads * xBytes + outBytes + std::max(0.0, paramBytes);
    cost.flops = 8 * elements;
  } else {
    // Reduction pass over (dy, x) for the weight/statistics gradients, then an
    // elementwise pass reading (dy, x) and writing dx.
    const double dyBytes = bytesOf(op.input(0));
    cost.bytes = 2 * (dyBytes + xBytes) + outBytes + std::max(0.0, paramBytes);
    cost.flops = 12 * elements;
    cost.kernels = layerNorm ? 2 : 1;
  }
  return cost;
}

// embedding_dense_backward_cuda's sort and segment kernels: a fixed time and SM cycles per
// gradient element, fitted by bench/truth/fit_embedding_backward.py to the embeddings of
// GPT-2, GNMT, the two transformers and the mixture of experts (bench/truth/data/h100:
// median error 17.3% over 28 shapes, 16.3% on the H200), where a stream of its bytes was
// 2-7x fast.
struct EmbeddingBackwardCost {
  double fixedUs;
  double cyclesPerElement;
};
constexpr EmbeddingBackwardCost kEmbeddingBackward{30, 5.95};

OpCost embedding(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Embedding;
  if (stem == "embedding") { // (weight, indices): gather rows
    const TensorMeta* weight = op.input(0);
    const TensorMeta* indices = op.input(1);
    const double rowElems = dim(weight, -1);
    const double outElems = numel(indices) * rowElems;
    const int elementSize = weight ? weight->elementSize() : 4;
    cost.bytes = bytesOf(indices) + 2 * outElems * elementSize;
    cost.parallelElements = outElems;
  } else { // embedding_dense_backward(grad_output, indices, num_weights, ...): scatter-add
    const TensorMeta* grad = op.input(0);
    const double gradElems = numel(grad);
    const double rowElems = dim(grad, -1);
    const double numWeights = static_cast<double>(op.intArg("num_weights").value_or(0)) * rowElems;
    const double outBytes =
        op.output(0) ? bytesOf(op.output(0)) : numWeights * (grad ? grad->elementSize() : 4);
    // Zero the weight gradient (a fill of its own, before), then sort the indices, find
    // each index's run of tokens and sum each run's rows: a fixed time for the small
    // kernels, then work per gradient element well below the bandwidth.
    cost.helperBytes = outBytes;
    cost.bytes = bytesOf(grad) + 2 * bytesOf(op.input(1)) + outBytes;
    cost.flops = gradElems;
    cost.parallelElements = gradElems;
    cost.smCycles = gradElems * kEmbeddingBackward.cyclesPerElement;
    cost.serialUs = kEmbeddingBackward.fixedUs;
    cost.kernels = 3;
  }
  return cost;
}

// PyTorch's windowed pooling kernels run one thread per output (forward) or per input
// gradient (backward); each decodes its N, C, H, W from a 64-bit linear index (integer
// division, emulated in software on GPUs) and walks the windows that touch it. Their
// time is that arithmetic, not DRAM traffic. Work per thread in FP32-operation units,
// calibrated on the max and average pooling of ResNet-50, Inception-v3 and the small CNN
// on an H100 (../shared/truth/h100, docs/predictor.md).
constexpr double kPoolingIndexOps = 350;
constexpr double kPoolingWindowOps = 55;
// Average pooling's backward thread also works out each window's bounds and divisor
// before dividing by it: fitted on Inception-v3's 3x3 and 5x5 average pools (the
// per-shape kernels of bench/truth/data, FP32 and bf16 alike, H100 and H200 alike), which
// took twice the time of the max-pool figures above.
constexpr double kAvgPoolBackwardIndexOps = 845;
constexpr double kAvgPoolBackwardWindowOps = 93;

OpCost pooling(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Pooling;
  const bool backward = contains(stem, "backward");
  double window = 1;
  double covering = 1; // windows that touch one input element (backward's loop)
  const auto kernel = op.intListArg("kernel_size");
  const bool windowed = kernel && !kernel->empty();
  if (windowed) {
    const auto stride = op.intListArg("stride");
    const size_t dims = kernel->size() == 1 && rank(op.input(0)) >= 4 ? 2 : kernel->size();
    for (size_t d = 0; d < dims; ++d) {
      const int64_t k = std::max<int64_t>(1, (*kernel)[std::min(d, kernel->size() - 1)]);
      int64_t s = k; // PyTorch's default stride is the kernel size
      if (stride && !stride->empty())
        s = std::max<int64_t>(1, (*stride)[std::min(d, stride->size() - 1)]);
      window *= k;
      covering *= (k + s - 1) / s;
    }
  } else if (op.input(0) && op.output(0) && numel(op.output(0)) > 0) {
    window = std::max(1.0, numel(op.input(0)) / numel(op.output(0))); // adaptive pooling
  }
  if (!backward) {
    const double outElems = largestNumel(op.outputs);
    cost.bytes = inputBytes(op) + outputBytes(op);
    cost.flops =
        windowed ? outElems * (kPoolingIndexOps + kPoolingWindowOps * window) : outElems * window;
    cost.parallelElements = outElems;
  } else {
    const double gradInElems = largestNumel(op.outputs);
    const bool maxPool = contains(stem, "max");
    // Max pooling backward zero-fills grad_input then scatters through the indices.
    cost.bytes = inputBytes(op) + outputBytes(op) * (maxPool ? 2 : 1);
    const double indexOps = maxPool ? kPoolingIndexOps : kAvgPoolBackwardIndexOps;
    const double windowOps = maxPool ? kPoolingWindowOps : kAvgPoolBackwardWindowOps;
    cost.flops = windowed ? gradInElems * (indexOps + windowOps * covering)
                          : std::max(gradInElems, numel(op.input(0)) * window);
    cost.parallelElements = gradInElems;
    if (maxPool)
      cost.kernels = 2;
  }
  return cost;
}

OpCost loss(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Loss;
  const bool backward = contains(stem, "backward");
  if (contains(stem, "nll_loss")) {
    const TensorMeta* input = backward ? op.input(1) : op.input(0);
    const TensorMeta* target = backward ? op.input(2) : op.input(1);
    const double rows = numel(target);
    const int elementSize = input ? input->elementSize() : 4;
    if (!backward) { // gathers one log-probability per row, reduces them
      cost.bytes = bytesOf(target) + 2 * rows * elementSize + outputBytes(op);
      cost.flops = rows;
    } else { // grad_input is zero-filled then one element per row is written
      cost.bytes = bytesOf(target) + bytesOf(input) + rows * elementSize;
      cost.flops = rows;
      cost.kernels = 2;
    }
    cost.parallelElements = std::max(rows, numel(input));
    return cost;
  }
  // mse, l1, smooth_l1, huber, bce(_with_logits), kl_div, ...: elementwise + reduction.
  const double elements = largestNumel(op.inputs);
  cost.bytes = inputBytes(op) + outputBytes(op);
  cost.flops = elements * (contains(stem, "binary_cross_entropy") ? 8 : 3);
  cost.parallelElements = elements;
  if (contains(stem, "ctc_loss")) {
    // aten/src/ATen/native/cuda/LossCTC.cu: a synchronised step per frame, a latency the
    // bytes do not show; said rather than guessed until a calibration measures it.
    cost.approximate = true;
    cost.note = CostNote::SerialOverFrames;
  }
  return cost;
}

// _foreach_* (multi-tensor apply) and _fused_adam(w) optimizer kernels, and GradScaler's
// unscale (_amp_foreach_non_finite_check_and_unscale_: each gradient times the inverse
// scale, in place, noting any that is not finite).
OpCost optimizerForeach(const OpRecord& op, const std::string& stem, bool inplace) {
  OpCost cost;
  cost.family = CostFamily::Optimizer;
  const double tensorsPerList = std::max<double>(
      1, op.intArg("num_tensors").value_or(static_cast<int64_t>(op.inputs.size())));
  double elements = 0;
  double firstListBytes = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!op.inputs[i])
      continue;
    if (i < tensorsPerList) {
      elements += numel(&*op.inputs[i]);
      firstListBytes += bytesOf(&*op.inputs[i]);
    }
  }
  cost.bytes = inputBytes(op) + outputBytes(op);
  if (contains(stem, "_fused_adam")) {
    // Reads param, grad, exp_avg, exp_avg_sq; writes param, exp_avg, exp_avg_sq.
    cost.bytes = inputBytes(op) + 3 * firstListBytes;
    cost.flops = 16 * elements;
  } else {
    if (inplace && op.outputs.empty())
      cost.bytes += firstListBytes;
    const std::string perElement =
        stem.rfind("_foreach_", 0) == 0 ? stem.substr(std::string("_foreach_").size()) : stem;
    cost.flops = elements * elementwiseFlops(perElement);
  }
  cost.parallelElements = elements;
  // multi_tensor_apply launches one kernel per ~64 tensors or 320 chunks of 64Ki elements.
  cost.kernels = static_cast<int>(
      std::max({1.0, std::ceil(tensorsPerList / 64.0), std::ceil(elements / (320.0 * 65536.0))}));
  return cost;
}

} // namespace wavecast::family_costs
