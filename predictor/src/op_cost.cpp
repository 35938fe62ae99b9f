#include "wavecast/predictor/op_cost.h"

#include "op_tables.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace wavecast {
namespace {

using op_tables::copyOps;
using op_tables::elementwiseFlops;
using op_tables::elementwiseOps;
using op_tables::metadataOps;
using op_tables::reductionOps;

// --- shapes -----------------------------------------------------------------

double numel(const TensorMeta* t) {
  if (!t)
    return 0;
  double n = 1;
  for (const auto d : t->shape)
    n *= d < 0 ? 0 : static_cast<double>(d);
  return n;
}

double bytesOf(const TensorMeta* t) {
  return t ? numel(t) * t->elementSize() : 0;
}

double dim(const TensorMeta* t, int index) {
  if (!t || t->shape.empty())
    return 0;
  const int rank = static_cast<int>(t->shape.size());
  const int i = index < 0 ? rank + index : index;
  if (i < 0 || i >= rank)
    return 1;
  return std::max<double>(0, static_cast<double>(t->shape[i]));
}

int rank(const TensorMeta* t) {
  return t ? static_cast<int>(t->shape.size()) : 0;
}

double inputBytes(const OpRecord& op) {
  double total = 0;
  for (const auto& t : op.inputs)
    total += t ? bytesOf(&*t) : 0;
  return total;
}

double outputBytes(const OpRecord& op) {
  double total = 0;
  for (const auto& t : op.outputs)
    total += t ? bytesOf(&*t) : 0;
  return total;
}

double largestNumel(const std::vector<std::optional<TensorMeta>>& tensors) {
  double largest = 0;
  for (const auto& t : tensors)
    largest = std::max(largest, t ? numel(&*t) : 0.0);
  return largest;
}

// The dtype arithmetic runs in: that of the first floating-point tensor.
ScalarType computeDtype(const OpRecord& op) {
  for (const auto* list : {&op.inputs, &op.outputs})
    for (const auto& t : *list)
      if (t && isFloatingPoint(t->dtype))
        return t->dtype;
  return ScalarType::Float32;
}

std::string stemOf(const std::string& name) {
  std::string stem = name.rfind("aten::", 0) == 0 ? name.substr(6) : name;
  const auto ns = stem.find("::"); // other namespaces (torchvision::, prims::)
  if (ns != std::string::npos)
    stem = stem.substr(ns + 2);
  return stem;
}

// "add_" -> "add" (in place); "_foreach_add_" -> "_foreach_add"; "__and__" stays.
std::string withoutInplaceSuffix(const std::string& stem, bool& inplace) {
  inplace = stem.size() > 1 && stem.back() == '_' && stem[stem.size() - 2] != '_';
  return inplace ? stem.substr(0, stem.size() - 1) : stem;
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// --- families -----------------------------------------------------------------

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
  // Out of place, ATen clones self and fills the clone in place: the copy, then a pass
  // reading and writing the whole result.
  if (!inplace && (stem == "masked_fill" || stem == "masked_scatter")) {
    cost.bytes += 2 * outputBytes(op);
    cost.kernels = 2;
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
    cost.note = "device-to-host copy of a scalar; synchronises the GPU";
  cost.bytes = in + out;
  cost.parallelElements = std::max(outElems, largestNumel(op.inputs));
  cost.flops = 0;
  return cost;
}

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
  return cost;
}

OpCost softmax(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Softmax;
  const bool backward = contains(stem, "backward");
  const double elements = std::max(largestNumel(op.inputs), largestNumel(op.outputs));
  cost.bytes = inputBytes(op) + outputBytes(op);
  // max, subtract, exp, sum, divide (log_softmax: log instead of divide).
  cost.flops = elements * (backward ? 4 : 5);
  cost.parallelElements = elements;
  return cost;
}

// Convolution FLOPs for one direction: 2 * N * (positions of the non-transposed output
// side) * numel(weight). Output shape already reflects stride, padding and dilation.
double convolutionMacPositions(const TensorMeta* batchSide, const TensorMeta* weight) {
  if (!batchSide || !weight)
    return 0;
  double positions = dim(batchSide, 0);
  for (int d = 2; d < rank(batchSide); ++d)
    positions *= dim(batchSide, d);
  return positions * numel(weight);
}

// Spatial output size of a convolution from the arguments, when the trace lacks it.
std::vector<int64_t> convolutionOutputShape(const OpRecord& op, const TensorMeta& input,
                                            const TensorMeta& weight, bool transposed) {
  const int spatial = static_cast<int>(input.shape.size()) - 2;
  const auto listArg = [&](const char* key, int64_t fallback) {
    std::vector<int64_t> values = op.intListArg(key).value_or(std::vector<int64_t>{});
    if (values.empty())
      values.assign(spatial, fallback);
    while (static_cast<int>(values.size()) < spatial)
      values.push_back(values.back());
    return values;
  };
  const auto stride = listArg("stride", 1);
  const auto padding = listArg("padding", 0);
  const auto dilation = listArg("dilation", 1);
  const auto outputPadding = listArg("output_padding", 0);
  const int64_t groups = std::max<int64_t>(1, op.intArg("groups").value_or(1));
  std::vector<int64_t> shape{input.shape[0],
                             transposed ? weight.shape[1] * groups : weight.shape[0]};
  for (int d = 0; d < spatial; ++d) {
    const int64_t in = input.shape[d + 2];
    const int64_t k = weight.shape.size() > static_cast<size_t>(d + 2) ? weight.shape[d + 2] : 1;
    const int64_t out =
        transposed
            ? (in - 1) * stride[d] - 2 * padding[d] + dilation[d] * (k - 1) + outputPadding[d] + 1
            : (in + 2 * padding[d] - dilation[d] * (k - 1) - 1) / stride[d] + 1;
    shape.push_back(std::max<int64_t>(0, out));
  }
  return shape;
}

// cuDNN's half-precision (tensor-core) convolutions run on NHWC: an NCHW tensor is
// transformed on the way in and out, one read and one write each.
bool transposesLayout(const TensorMeta* input) {
  return input && input->contiguous && (input->dtype == ScalarType::Float16 || input->dtype == ScalarType::BFloat16) &&
         (rank(input) == 4 || rank(input) == 5);
}

OpCost convolution(const OpRecord& op) {
  OpCost cost;
  cost.family = CostFamily::Conv;
  cost.unit = ComputeUnit::Matrix;
  const TensorMeta* input = op.input(0);
  const TensorMeta* weight = op.input(1);
  const TensorMeta* bias = op.input(2);
  const bool transposed = op.boolArg("transposed").value_or(false);
  if (!input || !weight || rank(input) < 3 || rank(weight) < 3) {
    cost.approximate = true;
    cost.note = "convolution without input/weight shapes: counted as a copy of its tensors";
    cost.bytes = inputBytes(op) + outputBytes(op);
    return cost;
  }
  TensorMeta output;
  if (const TensorMeta* traced = op.output(0)) {
    output = *traced;
  } else {
    output = *input;
    output.shape = convolutionOutputShape(op, *input, *weight, transposed);
  }
  // Non-transposed: positions of the output; transposed: of the input.
  const TensorMeta* positionsSide = transposed ? input : &output;
  cost.flops = 2 * convolutionMacPositions(positionsSide, weight);
  if (bias || op.boolArg("bias").value_or(false))
    cost.flops += numel(&output);
  cost.bytes = bytesOf(input) + bytesOf(weight) + bytesOf(bias) + bytesOf(&output);
  // Implicit GEMM: M = N * positions, N = output channels, K = receptive field.
  const double positions = numel(positionsSide) / std::max(1.0, dim(positionsSide, 1));
  const double groups = std::max<double>(1, op.intArg("groups").value_or(1));
  cost.gemm = {groups, positions, dim(weight, 0) / (transposed ? 1 : groups),
               numel(weight) / std::max(1.0, dim(weight, 0))};
  if (transposesLayout(input)) {
    cost.layoutBytes = 2 * (bytesOf(input) + bytesOf(weight) + bytesOf(&output));
    cost.kernels += 3;
  }
  return cost;
}

OpCost convolutionBackward(const OpRecord& op) {
  OpCost cost;
  cost.family = CostFamily::Conv;
  cost.unit = ComputeUnit::Matrix;
  const TensorMeta* gradOutput = op.input(0);
  const TensorMeta* input = op.input(1);
  const TensorMeta* weight = op.input(2);
  if (!gradOutput || !input || !weight) {
    cost.approximate = true;
    cost.note = "convolution_backward without grad_output/input/weight shapes";
    cost.bytes = inputBytes(op) + outputBytes(op);
    return cost;
  }
  const bool transposed = op.boolArg("transposed").value_or(false);
  std::vector<int64_t> mask = op.intListArg("output_mask").value_or(std::vector<int64_t>{});
  if (mask.size() != 3) {
    mask.assign(3, 1);
    for (size_t i = 0; i < 3 && !op.outputs.empty(); ++i)
      mask[i] = i < op.outputs.size() && op.outputs[i].has_value();
  }
  const double gemmFlops = 2 * convolutionMacPositions(transposed ? input : gradOutput, weight);
  const double gradOutBytes = bytesOf(gradOutput);
  cost.kernels = 0;
  // Each of the two cuDNN calls transforms its three operands when they are NCHW halves.
  const bool layouts = transposesLayout(input);
  const double layoutPerCall = 2 * (gradOutBytes + bytesOf(weight) + bytesOf(input));
  const double groups = std::max<double>(1, op.intArg("groups").value_or(1));
  // weight: (Cout, Cin / groups, R, S); transposed: (Cin, Cout / groups, R, S).
  const double w0 = dim(weight, 0) / groups, w1 = dim(weight, 1);
  const double taps = numel(weight) / std::max(1.0, dim(weight, 0) * w1);
  const TensorMeta* positionsSide = transposed ? input : gradOutput;
  const double positions = numel(positionsSide) / std::max(1.0, dim(positionsSide, 1));
  const double inputPositions = numel(input) / std::max(1.0, dim(input, 1));
  if (mask[0]) { // grad_input = conv_transpose(grad_output, weight)
    // Implicit GEMM over the input's positions: M = N x input positions, N = Cin,
    // K = Cout x R x S (of a transposed convolution: its forward's shape).
    const GemmShape shape = transposed ? GemmShape{groups, inputPositions, w0, w1 * taps}
                                       : GemmShape{groups, inputPositions, w1, w0 * taps};
    cost.gemms.push_back({shape, gemmFlops});
    cost.flops += gemmFlops;
    cost.bytes += gradOutBytes + bytesOf(weight) + bytesOf(input);
    ++cost.kernels;
    if (layouts) {
      cost.layoutBytes += layoutPerCall;
      cost.kernels += 3;
    }
  }
  if (mask[1]) { // grad_weight = correlate(input, grad_output)
    // M = Cout, N = Cin x R x S, K = N x output positions: a small output over a
    // long K, split into slices when its tiles cannot fill the GPU.
    GemmShape shape{groups, w0, w1 * taps, positions};
    shape.splitK = true;
    cost.gemms.push_back({shape, gemmFlops});
    cost.flops += gemmFlops;
    cost.bytes += gradOutBytes + bytesOf(input) + bytesOf(weight);
    ++cost.kernels;
    if (layouts) {
      cost.layoutBytes += layoutPerCall;
      cost.kernels += 3;
    }
  }
  if (mask[2]) { // grad_bias = sum of grad_output over N and positions
    cost.flops += numel(gradOutput);
    cost.bytes += gradOutBytes + dim(gradOutput, 1) * gradOutput->elementSize();
    ++cost.kernels;
  }
  cost.kernels = std::max(cost.kernels, 1);
  cost.gemm = {groups, positions, dim(weight, 0) / (transposed ? 1 : groups),
               numel(weight) / std::max(1.0, dim(weight, 0))};
  return cost;
}

// Batch dims of a (broadcast) matmul operand: all but the last two.
double batchOf(const TensorMeta* t) {
  double b = 1;
  for (int d = 0; d + 2 < rank(t); ++d)
    b *= dim(t, d);
  return b;
}

OpCost gemm(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Gemm;
  cost.unit = ComputeUnit::Matrix;
  // Operand positions by schema: addmm/baddbmm/addbmm/addmv(self, a, b), others (a, b).
  const bool hasBias = stem == "addmm" || stem == "baddbmm" || stem == "addbmm" ||
                       stem == "addmv" || stem == "_addmm_activation" || stem == "addr";
  const TensorMeta* a = op.input(hasBias ? 1 : 0);
  const TensorMeta* b = op.input(hasBias ? 2 : 1);
  GemmShape g;
  if (stem == "linear") {
    g.m = a ? numel(a) / std::max(1.0, dim(a, -1)) : 0;
    g.k = dim(a, -1);
    g.n = dim(b, 0);
  } else if (stem == "mv" || stem == "addmv") {
    g.m = dim(a, 0);
    g.k = dim(a, 1);
    g.n = 1;
  } else if (stem == "dot" || stem == "vdot" || stem == "inner") {
    g.m = 1;
    g.n = 1;
    g.k = dim(a, -1);
  } else if (stem == "outer" || stem == "ger" || stem == "addr") {
    g.m = dim(a, 0);
    g.n = dim(b, 0);
    g.k = 1;
  } else { // mm, bmm, baddbmm, addbmm, matmul (1-D operands promoted like torch.matmul)
    const int ra = rank(a), rb = rank(b);
    g.m = ra >= 2 ? dim(a, -2) : 1;
    g.k = ra >= 1 ? dim(a, -1) : 0;
    g.n = rb >= 2 ? dim(b, -1) : 1;
    g.batch = std::max(batchOf(a), batchOf(b));
    if (stem == "addbmm")
      g.batch = dim(a, 0);
  }
  cost.gemm = g;
  cost.flops = 2 * g.batch * g.m * g.n * g.k;
  if (hasBias || (stem == "linear" && op.input(2)))
    cost.flops += g.batch * g.m * g.n;
  cost.bytes = inputBytes(op) + outputBytes(op);
  if (!a || !b) {
    cost.approximate = true;
    cost.note = "matrix operands missing from the trace; counted by its tensors' bytes only";
  }
  return cost;
}

// Share of the L x S score blocks a fused causal kernel computes: it skips the key
// blocks wholly after a query block's last row (torch's is_causal is top-left aligned).
// Blocks of 128 x 128 (FlashAttention-2's forward on sm80+) or 64 x 64 (the
// memory-efficient kernel's for head sizes up to 128); a short sequence fits one
// block and gains nothing.
double causalBlockShare(double l, double s, double block) {
  const double queryBlocks = std::ceil(l / block);
  const double keyBlocks = std::ceil(s / block);
  if (queryBlocks <= 0 || keyBlocks <= 0)
    return 1;
  double computed = 0;
  for (double i = 0; i < queryBlocks; ++i)
    computed += std::min(keyBlocks, std::ceil(std::min(s, (i + 1) * block) / block));
  return computed / (queryBlocks * keyBlocks);
}

OpCost attention(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Attention;
  cost.unit = ComputeUnit::Matrix;
  const bool backward = contains(stem, "backward");
  // Forward schema: (query, key, value, ...); backward: (grad_out, query, key, value, ...).
  const size_t q0 = backward ? 1 : 0;
  const TensorMeta* q = op.input(q0);
  const TensorMeta* k = op.input(q0 + 1);
  const TensorMeta* v = op.input(q0 + 2);
  if (!q || !k || !v) {
    cost.approximate = true;
    cost.note = "attention without query/key/value shapes";
    cost.bytes = inputBytes(op) + outputBytes(op);
    return cost;
  }
  const double batch = batchOf(q);
  const double l = dim(q, -2), s = dim(k, -2), e = dim(q, -1), ev = dim(v, -1);
  // The math fallback (and the un-fused composite) computes every score; the fused
  // kernels skip the blocks a causal mask hides.
  const bool fused = contains(stem, "flash") || contains(stem, "efficient") || contains(stem, "cudnn");
  const double causalShare =
      fused && op.boolArg("is_causal").value_or(false)
          ? causalBlockShare(l, s, contains(stem, "efficient") ? 64 : 128)
          : 1.0;
  const double forwardMatmuls = 2 * batch * l * s * (e + ev) * causalShare;
  const double softmaxFlops = 5 * batch * l * s * causalShare;
  // Backward recomputes Q.K^T and runs four more GEMMs (dV, dP, dQ, dK).
  cost.flops = backward ? 2.5 * forwardMatmuls + 2 * softmaxFlops : forwardMatmuls + softmaxFlops;
  // Fused (flash / memory-efficient) kernels: no L x S matrix in DRAM.
  cost.bytes = inputBytes(op) + outputBytes(op);
  cost.gemm = {batch, l, s, e};
  return cost;
}

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
  // cuDNN's batch norm on NCHW (CUDNN_BATCHNORM_SPATIAL, which PyTorch uses unless the
  // input is channels_last) reduces each channel in one thread block, in forward and
  // backward: a layer with fewer channels than SMs leaves SMs without work.
  const bool batchNorm = contains(stem, "batch_norm") && !contains(stem, "elemt") &&
                         !contains(stem, "stats") && !contains(stem, "gather") &&
                         !contains(stem, "reduce");
  const bool perChannel = batchNorm && training && x && x->contiguous && x->shape.size() >= 3;
  if (perChannel)
    cost.parallelBlocks = static_cast<double>(std::max<int64_t>(1, x->shape[1]));
  // PyTorch sends bfloat16 batch norm to its own kernels, not cuDNN's
  // (_select_batch_norm_backend): one block per channel too, reading element by
  // element into float32 math, so they take as long as on float32 data.
  const double widen =
      perChannel && x->dtype == ScalarType::BFloat16 ? 4.0 / x->elementSize() : 1.0;
  const double xBytes = bytesOf(x);
  const double paramBytes = inputBytes(op) - (backward ? bytesOf(op.input(0)) + xBytes : xBytes);
  const double outBytes = outputBytes(op) + (widen - 1) * bytesOf(op.output(0));
  if (!backward) {
    // Batch/group norm in training read x for the statistics and again to normalise;
    // layer norm keeps a row on chip. Eval batch norm is a single elementwise pass.
    const double reads = (layerNorm || !training) ? 1 : 2;
    cost.bytes = reads * xBytes * widen + outBytes + std::max(0.0, paramBytes);
    cost.flops = 8 * elements;
  } else {
    // Reduction pass over (dy, x) for the weight/statistics gradients, then an
    // elementwise pass reading (dy, x) and writing dx.
    const double dyBytes = bytesOf(op.input(0));
    cost.bytes = 2 * (dyBytes + xBytes) * widen + outBytes + std::max(0.0, paramBytes);
    cost.flops = 12 * elements;
    cost.kernels = layerNorm ? 2 : 1;
  }
  cost.parallelElements = elements;
  return cost;
}

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
    // Zero the weight gradient, sort indices, accumulate rows.
    cost.bytes = bytesOf(grad) + 2 * bytesOf(op.input(1)) + 2 * outBytes;
    cost.flops = gradElems;
    cost.parallelElements = gradElems;
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
    cost.flops = windowed ? outElems * (kPoolingIndexOps + kPoolingWindowOps * window)
                          : outElems * window;
    cost.parallelElements = outElems;
  } else {
    const double gradInElems = largestNumel(op.outputs);
    const bool maxPool = contains(stem, "max");
    // Max pooling backward zero-fills grad_input then scatters through the indices.
    cost.bytes = inputBytes(op) + outputBytes(op) * (maxPool ? 2 : 1);
    cost.flops = windowed ? gradInElems * (kPoolingIndexOps + kPoolingWindowOps * covering)
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
  return cost;
}

// Gates per hidden unit: LSTM 4, GRU 3, plain RNN 1.
int rnnGates(const OpRecord& op, const std::string& stem) {
  if (contains(stem, "lstm"))
    return 4;
  if (contains(stem, "gru"))
    return 3;
  if (contains(stem, "rnn_tanh") || contains(stem, "rnn_relu"))
    return 1;
  if (const auto mode = op.intArg("mode")) // cuDNN: 0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU
    return *mode == 2 ? 4 : *mode == 3 ? 3 : 1;
  return 4;
}

OpCost recurrent(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Rnn;
  cost.unit = ComputeUnit::Matrix;
  const bool backward = contains(stem, "backward");
  const int gates = rnnGates(op, stem);
  const bool cell = contains(stem, "cell");
  const TensorMeta* input = op.input(0);
  if (cell) {
    // *_cell(input [B, I], hx, w_ih [G*H, I], w_hh [G*H, H]) or the fused pointwise
    // part (_thnn_fused_*: gate pre-activations [B, G*H]).
    const bool fusedPointwise = contains(stem, "_thnn_fused");
    const double elements = largestNumel(op.inputs);
    if (fusedPointwise) {
      cost.unit = ComputeUnit::Vector;
      cost.flops = elements * 10;
    } else {
      const double batch = dim(input, 0), in = dim(input, -1);
      const double hidden = dim(op.input(2), 0) / gates;
      cost.flops = 2 * batch * gates * hidden * (in + hidden) + 10 * batch * hidden * gates;
      cost.gemm = {1, batch, gates * hidden, in + hidden};
    }
    cost.bytes = inputBytes(op) + outputBytes(op);
    cost.parallelElements = elements;
    if (backward)
      cost.flops *= 2;
    return cost;
  }
  // Full sequence: lstm/gru/rnn_tanh(input, hx, params, has_biases, num_layers, dropout,
  // train, bidirectional, batch_first) and _cudnn_rnn(input, weights..., hx, cx, mode,
  // hidden_size, proj_size, num_layers, batch_first, dropout, train, bidirectional, ...).
  const bool batchFirst = op.boolArg("batch_first").value_or(false);
  const bool bidirectional = op.boolArg("bidirectional").value_or(false);
  const double directions = bidirectional ? 2 : 1;
  const double layers = std::max<int64_t>(1, op.intArg("num_layers").value_or(1));
  double seq = 1, batch = 1, in = dim(input, -1);
  if (rank(input) == 3) {
    seq = dim(input, batchFirst ? 1 : 0);
    batch = dim(input, batchFirst ? 0 : 1);
  } else if (rank(input) == 2) {
    seq = dim(input, 0); // packed sequence: total steps x features
  }
  double hidden = static_cast<double>(op.intArg("hidden_size").value_or(0));
  if (hidden <= 0 && op.output(0))
    hidden = dim(op.output(0), -1) / directions;
  if (hidden <= 0) {
    cost.approximate = true;
    cost.note = "recurrent op without hidden size: counted by its tensors' bytes";
    cost.bytes = inputBytes(op) + outputBytes(op);
    return cost;
  }
  double flops = 0;
  for (int layer = 0; layer < layers; ++layer) {
    const double layerIn = layer == 0 ? in : hidden * directions;
    flops += directions * seq *
             (2 * batch * gates * hidden * (layerIn + hidden) + 10 * batch * gates * hidden);
  }
  // Gate activations are written and re-read every step (kept for backward in training).
  const int elementSize = input ? input->elementSize() : 4;
  const double gateTraffic = 2 * layers * directions * seq * batch * gates * hidden * elementSize;
  cost.flops = backward ? 2 * flops : flops;
  cost.bytes = inputBytes(op) + outputBytes(op) + gateTraffic * (backward ? 2 : 1);
  // Each step is a small GEMM; the sequence is serial. cuDNN's standard algorithm runs,
  // per layer and direction, one GEMM for the input projection of every step, then per
  // step the recurrent GEMM and the pointwise gate kernel; backward runs two kernels
  // per step (pointwise, recurrent data gradient) and two weight-gradient GEMMs.
  cost.gemm = {1, batch, gates * hidden, in + hidden};
  cost.kernels =
      static_cast<int>(std::min(1e6, layers * directions * (2 * seq + (backward ? 2 : 1))));
  cost.note = "recurrent: per-step GEMMs are serial, so small batches are latency bound";
  return cost;
}

// _foreach_* (multi-tensor apply) and _fused_adam(w) optimizer kernels.
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
    cost.flops = elements * elementwiseFlops(stem.substr(std::string("_foreach_").size()));
  }
  cost.parallelElements = elements;
  // multi_tensor_apply launches one kernel per ~64 tensors or 320 chunks of 64Ki elements.
  cost.kernels = static_cast<int>(
      std::max({1.0, std::ceil(tensorsPerList / 64.0), std::ceil(elements / (320.0 * 65536.0))}));
  return cost;
}

bool isConvolution(const std::string& stem) {
  return stem == "convolution" || stem == "_convolution" || stem == "conv1d" || stem == "conv2d" ||
         stem == "conv3d" || stem == "cudnn_convolution" || stem == "cudnn_convolution_transpose" ||
         stem == "conv_transpose1d" || stem == "conv_transpose2d" || stem == "conv_transpose3d" ||
         stem == "mkldnn_convolution" || stem == "_slow_conv2d_forward" ||
         stem == "slow_conv_transpose2d" || stem == "thnn_conv2d" || stem == "_convolution_mode" ||
         stem == "conv_depthwise2d" || stem == "_conv_depthwise2d" ||
         stem == "cudnn_convolution_relu" || stem == "cudnn_convolution_add_relu";
}

bool isGemm(const std::string& stem) {
  static const std::unordered_set<std::string> ops = {"linear",       "addmm",
                                                      "mm",           "bmm",
                                                      "matmul",       "baddbmm",
                                                      "addbmm",       "addmv",
                                                      "mv",           "dot",
                                                      "vdot",         "inner",
                                                      "outer",        "ger",
                                                      "addr",         "_addmm_activation",
                                                      "einsum",       "tensordot",
                                                      "_scaled_mm",   "_int_mm",
                                                      "chain_matmul", "linalg_multi_dot"};
  return ops.count(stem) > 0;
}

bool isAttention(const std::string& stem) {
  return contains(stem, "scaled_dot_product") || contains(stem, "flash_attention") ||
         contains(stem, "efficient_attention") || stem == "_native_multi_head_attention";
}

bool isNormalization(const std::string& stem) {
  return contains(stem, "batch_norm") || contains(stem, "layer_norm") ||
         contains(stem, "group_norm") || contains(stem, "instance_norm") ||
         contains(stem, "rms_norm") || stem == "_batch_norm_impl_index" ||
         stem == "_batch_norm_impl_index_backward";
}

bool isPooling(const std::string& stem) {
  return contains(stem, "pool");
}

bool isLoss(const std::string& stem) {
  return contains(stem, "nll_loss") || contains(stem, "mse_loss") || contains(stem, "l1_loss") ||
         contains(stem, "huber_loss") || contains(stem, "binary_cross_entropy") ||
         contains(stem, "kl_div") || contains(stem, "cross_entropy") ||
         contains(stem, "soft_margin") || contains(stem, "hinge") || contains(stem, "ctc_loss") ||
         contains(stem, "poisson_nll");
}

bool isRecurrent(const std::string& stem) {
  return stem == "lstm" || stem == "gru" || stem == "rnn_tanh" || stem == "rnn_relu" ||
         contains(stem, "cudnn_rnn") || contains(stem, "lstm_cell") || contains(stem, "gru_cell") ||
         contains(stem, "rnn_tanh_cell") || contains(stem, "rnn_relu_cell") ||
         contains(stem, "miopen_rnn") || stem == "_lstm_mps";
}

bool isEmbedding(const std::string& stem) {
  return stem == "embedding" || stem == "embedding_dense_backward" ||
         stem == "embedding_backward" || stem == "_embedding_bag" ||
         stem == "_embedding_bag_backward" || stem == "embedding_renorm";
}

OpCost exactFamily(const OpRecord& op, const std::string& stem, bool inplace, bool& known) {
  known = true;
  if (stem == "convolution_backward" || stem == "cudnn_convolution_backward" ||
      stem == "convolution_backward_overrideable" || stem == "mkldnn_convolution_backward" ||
      stem == "cudnn_convolution_transpose_backward")
    return convolutionBackward(op);
  if (isConvolution(stem))
    return convolution(op);
  if (isAttention(stem))
    return attention(op, stem);
  if (isGemm(stem))
    return gemm(op, stem);
  if (isNormalization(stem))
    return normalization(op, stem);
  if (contains(stem, "softmax"))
    return softmax(op, stem);
  if (isEmbedding(stem)) {
    const bool backward = contains(stem, "backward");
    OpCost cost = embedding(op, backward ? "embedding_dense_backward" : "embedding");
    if (stem != "embedding" && stem != "embedding_dense_backward") {
      cost.approximate = true;
      cost.note = "predicted as embedding / embedding_dense_backward";
    }
    return cost;
  }
  if (isPooling(stem))
    return pooling(op, stem);
  if (isRecurrent(stem))
    return recurrent(op, stem);
  if (isLoss(stem))
    return loss(op, stem);
  if (stem.rfind("_foreach_", 0) == 0 || contains(stem, "_fused_adam") ||
      contains(stem, "_fused_sgd"))
    return optimizerForeach(op, stem, inplace);
  if (reductionOps().count(stem))
    return reduction(op, stem);
  if (copyOps().count(stem))
    return copyLike(op, stem);
  if (elementwiseOps().count(stem) || contains(stem, "upsample"))
    return elementwise(op, stem, inplace);
  known = false;
  return {};
}

// No formula of its own: the family its name suggests, else elementwise over its tensors.
OpCost closestFamily(const OpRecord& op, const std::string& stem, bool inplace) {
  OpCost cost;
  if (contains(stem, "conv")) {
    cost = convolution(op);
  } else if (contains(stem, "mm") || contains(stem, "matmul") || contains(stem, "linear")) {
    cost = gemm(op, "matmul");
  } else if (contains(stem, "norm")) {
    cost = normalization(op, stem);
  } else if (contains(stem, "attention")) {
    cost = attention(op, stem);
  } else if (contains(stem, "sum") || contains(stem, "mean") || contains(stem, "reduce")) {
    cost = reduction(op, stem);
  } else if (contains(stem, "copy") || contains(stem, "index") || contains(stem, "scatter") ||
             contains(stem, "gather") || contains(stem, "pad")) {
    cost = copyLike(op, stem);
  } else {
    cost = elementwise(op, stem, inplace);
  }
  cost.approximate = true;
  cost.note = "no formula for " + op.name + "; predicted as its closest family (" + toString(cost.family) +
              ") from its tensors";
  return cost;
}

} // namespace

OpCost estimateOpCost(const OpRecord& op) {
  const std::string stem = stemOf(op.name);
  bool inplace = false;
  const std::string base = withoutInplaceSuffix(stem, inplace);

  OpCost cost;
  if (metadataOps().count(stem) || metadataOps().count(base)) {
    cost.family = CostFamily::Metadata;
    cost.kernels = 0;
    cost.note = "view or allocation: no kernel, no memory traffic";
  } else {
    bool known = false;
    cost = exactFamily(op, base, inplace, known);
    if (!known)
      cost = closestFamily(op, base, inplace);
    if (op.phase == Phase::Optimizer && cost.family == CostFamily::Elementwise)
      cost.family = CostFamily::Optimizer;
  }
  cost.dtype = computeDtype(op);

  // Shapes the profiler should never emit; predict as empty, flag, and say so.
  for (const auto* list : {&op.inputs, &op.outputs})
    for (const auto& t : *list)
      if (t && std::any_of(t->shape.begin(), t->shape.end(), [](int64_t d) { return d < 0; })) {
        cost.approximate = true;
        cost.note = "negative dimension in a tensor shape of " + op.name +
                    "; its dimensions count as 0 (re-trace the script)";
      }
  if (op.onHost && !cost.metadataOnly()) {
    cost.kernels = 0;
    cost.note = "runs on the CPU (host work, no GPU kernel)";
  }
  if (!cost.metadataOnly() && cost.bytes <= 0 && cost.flops <= 0) {
    cost.kernels = 0; // PyTorch launches nothing for empty tensors
    if (cost.note.empty())
      cost.note = "empty tensors (a zero-sized dimension): no work";
  }
  return cost;
}

} // namespace wavecast

namespace wavecast {

const char* toString(CostFamily family) {
  switch (family) {
  case CostFamily::Conv:
    return "conv";
  case CostFamily::Gemm:
    return "gemm";
  case CostFamily::Attention:
    return "attention";
  case CostFamily::Norm:
    return "norm";
  case CostFamily::Elementwise:
    return "elementwise";
  case CostFamily::Reduction:
    return "reduction";
  case CostFamily::Softmax:
    return "softmax";
  case CostFamily::Embedding:
    return "embedding";
  case CostFamily::Pooling:
    return "pooling";
  case CostFamily::Loss:
    return "loss";
  case CostFamily::Rnn:
    return "rnn";
  case CostFamily::Optimizer:
    return "optimizer";
  case CostFamily::Copy:
    return "copy";
  case CostFamily::Metadata:
    return "metadata";
  }
  return "unknown";
}

bool runsOnCudnn(const OpCost& cost) { return cost.family == CostFamily::Conv || cost.family == CostFamily::Rnn; }

bool runsInTf32(const OpCost& cost, const FloatPrecision& precision) {
  if (cost.unit != ComputeUnit::Matrix || cost.dtype != ScalarType::Float32)
    return false;
  return runsOnCudnn(cost) ? precision.cudnnTf32 : precision.matmulTf32;
}

std::string mathPrecision(const OpCost& cost) {
  return cost.tf32 ? "tf32" : toString(cost.dtype);
}

} // namespace wavecast
