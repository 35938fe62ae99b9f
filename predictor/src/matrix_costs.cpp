#include "cost_shapes.h"
#include "family_costs.h"

#include <algorithm>
#include <cmath>

namespace wavecast::family_costs {

using namespace cost_shapes;

namespace {

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

// Whether PyTorch runs the convolution on its own depthwise kernel (_conv_depthwise2d)
// rather than cuDNN: NCHW depthwise convolutions, except float16 ones
// (ConvParams::use_cudnn_depthwise). That kernel adds the bias itself and reads NCHW.
bool runsOwnDepthwiseKernel(const TensorMeta& input, double groups, bool transposed) {
  const bool depthwise = !transposed && groups > 1 && rank(&input) == 4 && dim(&input, 1) == groups;
  return depthwise && input.contiguous && input.dtype != ScalarType::Float16;
}

// cuDNN's half-precision (tensor-core) convolutions run on NHWC: an NCHW tensor is
// transformed on the way in and out, one read and one write each.
bool transposesLayout(const TensorMeta& input, double groups, bool transposed) {
  return input.contiguous &&
         (input.dtype == ScalarType::Float16 || input.dtype == ScalarType::BFloat16) &&
         (rank(&input) == 4 || rank(&input) == 5) &&
         !runsOwnDepthwiseKernel(input, groups, transposed);
}

// Whether cuDNN's tensor-core implicit GEMM cannot take the convolution: fewer than 8
// channels per filter tap on the image side (NarrowConvWork). Grouped and depthwise
// convolutions have kernels of their own.
bool narrowChannels(const TensorMeta& weight, double groups) {
  return groups == 1 && rank(&weight) >= 3 && dim(&weight, 1) < 8;
}

} // namespace

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
    cost.note = CostNote::ConvWithoutShapes;
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
  cost.bytes = bytesOf(input) + bytesOf(weight) + bytesOf(&output);
  const double groups = std::max<double>(1, op.intArg("groups").value_or(1));
  if (bias || op.boolArg("bias").value_or(false)) {
    cost.flops += numel(&output);
    if (runsOwnDepthwiseKernel(*input, groups, transposed)) {
      cost.bytes += bytesOf(bias);
    } else {
      // cuDNN's path calls output.add_(bias): a broadcast add that reads and writes the
      // whole output.
      cost.helperBytes += 2 * bytesOf(&output) + bytesOf(bias);
      cost.helperSmCycles += numel(&output) * kElementRateCycles;
      ++cost.kernels;
    }
  }
  // Implicit GEMM: M = N * positions, N = output channels, K = receptive field.
  const double positions = numel(positionsSide) / std::max(1.0, dim(positionsSide, 1));
  cost.gemm = {groups, positions, dim(weight, 0) / (transposed ? 1 : groups),
               numel(weight) / std::max(1.0, dim(weight, 0))};
  if (narrowChannels(*weight, groups))
    cost.narrowConvs.push_back({NarrowConvKernel::Data,
                                numel(&output) / std::max(1.0, dim(&output, 1)),
                                convolutionMacPositions(positionsSide, weight)});
  if (transposesLayout(*input, groups, transposed)) {
    cost.layoutTransformBytes += 2 * (bytesOf(input) + bytesOf(weight) + bytesOf(&output));
    cost.layoutTransformKernels += 3;
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
    cost.note = CostNote::ConvBackwardWithoutShapes;
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
  const double groups = std::max<double>(1, op.intArg("groups").value_or(1));
  const bool layouts = transposesLayout(*input, groups, transposed);
  const double layoutPerCall = 2 * (gradOutBytes + bytesOf(weight) + bytesOf(input));
  // weight: (Cout, Cin / groups, R, S); transposed: (Cin, Cout / groups, R, S).
  const double w0 = dim(weight, 0) / groups, w1 = dim(weight, 1);
  const double taps = numel(weight) / std::max(1.0, dim(weight, 0) * w1);
  const TensorMeta* positionsSide = transposed ? input : gradOutput;
  const double positions = numel(positionsSide) / std::max(1.0, dim(positionsSide, 1));
  const double inputPositions = numel(input) / std::max(1.0, dim(input, 1));
  const bool narrow = narrowChannels(*weight, groups);
  if (mask[0]) { // grad_input = conv_transpose(grad_output, weight)
    // Implicit GEMM over the input's positions: M = N x input positions, N = Cin,
    // K = Cout x R x S (of a transposed convolution: its forward's shape).
    const GemmShape shape = transposed ? GemmShape{groups, inputPositions, w0, w1 * taps}
                                       : GemmShape{groups, inputPositions, w1, w0 * taps};
    cost.gemms.push_back({shape, gemmFlops});
    if (narrow)
      cost.narrowConvs.push_back({NarrowConvKernel::Data, inputPositions, gemmFlops / 2});
    cost.flops += gemmFlops;
    cost.bytes += gradOutBytes + bytesOf(weight) + bytesOf(input);
    ++cost.kernels;
    if (layouts) {
      cost.layoutTransformBytes += layoutPerCall;
      cost.layoutTransformKernels += 3;
    }
  }
  if (mask[1]) { // grad_weight = correlate(input, grad_output)
    // M = Cout, N = Cin x R x S, K = N x output positions: a small output over a
    // long K, split into slices when its tiles cannot fill the GPU.
    GemmShape shape{groups, w0, w1 * taps, positions};
    shape.splitK = true;
    cost.gemms.push_back({shape, gemmFlops});
    if (narrow)
      cost.narrowConvs.push_back({NarrowConvKernel::WeightGradient, positions, gemmFlops / 2});
    cost.flops += gemmFlops;
    cost.bytes += gradOutBytes + bytesOf(input) + bytesOf(weight);
    ++cost.kernels;
    if (layouts) {
      cost.layoutTransformBytes += layoutPerCall;
      cost.layoutTransformKernels += 3;
    }
  }
  if (mask[2]) { // grad_bias = grad_output.sum over N and positions, a reduction of its own
    cost.flops += numel(gradOutput);
    cost.helperBytes += gradOutBytes + dim(gradOutput, 1) * gradOutput->elementSize();
    ++cost.kernels;
  }
  cost.kernels = std::max(cost.kernels, 1);
  cost.gemm = {groups, positions, dim(weight, 0) / (transposed ? 1 : groups),
               numel(weight) / std::max(1.0, dim(weight, 0))};
  return cost;
}

namespace {

// Batch dims of a (broadcast) matmul operand: all but the last two.
double batchOf(const TensorMeta* t) {
  double b = 1;
  for (int d = 0; d + 2 < rank(t); ++d)
    b *= dim(t, d);
  return b;
}

// The largest power of two, up to 16, dividing `elements` elements of `elementBytes`.
int alignmentBytes(double elements, int elementBytes) {
  const auto bytes = static_cast<int64_t>(elements) * elementBytes;
  int alignment = 16;
  while (alignment > 1 && bytes % alignment != 0)
    alignment /= 2;
  return alignment;
}

// A matrix operand's leading dimension as cuBLAS gets it: the last dim when its rows are
// contiguous, else the one before (a transposed view, as F.linear's weight.t() or a
// gradient's .t() in mm's backward). The trace keeps no strides, so a broadcast operand
// (contiguous rows, a zero batch stride) is taken for a transposed one.
double leadingDim(const TensorMeta* t) {
  return t->contiguous || rank(t) < 2 ? dim(t, -1) : dim(t, -2);
}

// GemmShape's leadingDimAlignmentBytes and elementBytes for a matrix-by-matrix product with
// output width n; aligned (16) when an operand is missing or not a matrix.
void alignOperands(GemmShape& g, const TensorMeta* a, const TensorMeta* b, double n) {
  if (a)
    g.elementBytes = a->elementSize();
  if (!a || !b || rank(a) < 2 || rank(b) < 2)
    return;
  const int bytes = a->elementSize();
  g.leadingDimAlignmentBytes =
      std::min({alignmentBytes(leadingDim(a), bytes), alignmentBytes(leadingDim(b), bytes),
                alignmentBytes(n, bytes)});
}

} // namespace

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
    alignOperands(g, a, b, g.n);
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
    alignOperands(g, a, b, g.n);
  }
  // cuBLAS cuts K into slices when the output tiles cannot fill the GPU.
  g.splitK = true;
  cost.gemm = g;
  if (g.loadsElementByElement())
    cost.note = CostNote::OddLeadingDimension;
  cost.flops = 2 * g.batch * g.m * g.n * g.k;
  if (hasBias || (stem == "linear" && op.input(2)))
    cost.flops += g.batch * g.m * g.n;
  cost.bytes = inputBytes(op) + outputBytes(op);
  // Not tiled GEMMs (GemmKernel): on the H100 and the H200 (CUDA 13), GNMT's score layer's
  // GEMVs streamed their matrix at 86-93% of the bandwidth at 0.6-2.6 GB, in FP32 and bf16,
  // 1.44x faster on the H200 as its bandwidth is; its outer products ran at the SMs' rate.
  const double outputs = std::max(1.0, g.batch) * g.m * g.n;
  if ((g.m == 1 || g.n == 1) && g.k > 1) {
    cost.gemmKernel = GemmKernel::MatrixVector;
    cost.unit = ComputeUnit::Vector;
    cost.parallelElements = std::max(1.0, g.batch) * std::max(g.m, g.n) * g.k;
  } else if (g.k == 1 && outputs > 1) {
    cost.gemmKernel = GemmKernel::OuterProduct;
    cost.unit = ComputeUnit::Vector;
    cost.parallelElements = outputs;
    cost.smCycles = outputs * kOuterProductCycles;
  }
  if (!a || !b) {
    cost.approximate = true;
    cost.note = CostNote::MatrixOperandsMissing;
  }
  return cost;
}

const TensorMeta* groupedGemmOffsets(const OpRecord& op) {
  const TensorMeta* offsets = op.input(2);
  return offsets && offsets->shape.size() == 1 && offsets->numel() > 0 ? offsets : nullptr;
}

OpCost groupedGemm(const OpRecord& op, const std::string& stem) {
  OpCost cost;
  cost.family = CostFamily::Gemm;
  cost.unit = ComputeUnit::Matrix;
  cost.bytes = inputBytes(op) + outputBytes(op);
  // Schema: (mat_a, mat_b, offs, bias). The offsets cut the 2-D operand's rows (2-D x 3-D),
  // its K (2-D x 2-D: the weight gradient, one matrix per group) or its columns (3-D x
  // 2-D); without them both are batches of matrices.
  const TensorMeta* a = op.input(0);
  const TensorMeta* b = op.input(1);
  const TensorMeta* offsets = groupedGemmOffsets(op);
  if (!a || !b || rank(a) < 2 || rank(b) < 2) {
    cost.approximate = true;
    cost.note = CostNote::MatrixOperandsMissing;
    return cost;
  }
  const bool a2d = rank(a) == 2, b2d = rank(b) == 2;
  const double groups = std::max(1.0, offsets ? numel(offsets) : dim(a2d ? b : a, 0));
  GemmShape g;
  g.batch = groups;
  // Where offsets cut a dimension, each group's share of it is unknown until the router
  // has run: an even split, as a load-balancing loss aims for.
  g.m = a2d && !b2d ? dim(a, 0) / groups : dim(a, -2);
  g.k = a2d && b2d ? dim(a, 1) / groups : dim(a, -1);
  g.n = !a2d && b2d ? dim(b, 1) / groups : dim(b, -1);
  alignOperands(g, a, b, dim(b, -1));
  g.splitK = true;
  cost.gemm = g;
  cost.flops = 2 * g.batch * g.m * g.n * g.k;
  if (op.input(3))
    cost.flops += g.batch * g.m * g.n;
  const bool bf16 = a->dtype == ScalarType::BFloat16 && b->dtype == ScalarType::BFloat16;
  cost.grouped = {static_cast<int>(groups), stem == "_grouped_mm" && bf16};
  if (!cost.grouped.groupedKernel)
    cost.kernels = cost.grouped.groups; // one mm per group on every GPU
  if (stem == "grouped_mm_fallback")
    ++cost.kernels; // and the zeros the output starts as
  if (offsets)
    cost.note = CostNote::EvenExpertGroups;
  return cost;
}

OpCost groupedGemmBackward(const OpRecord& op) {
  // transformers::grouped_mm_fallback_backward(input, weight, offs, grad_output): per
  // expert, grad_input = grad_output @ weight^T and grad_weight = input^T @ grad_output,
  // into zeroed gradients.
  OpRecord forward = op;
  forward.inputs.resize(std::min<size_t>(3, op.inputs.size()));
  forward.outputs = {op.input(3) ? std::optional<TensorMeta>(*op.input(3)) : std::nullopt};
  OpCost cost = groupedGemm(forward, "grouped_mm_fallback");
  cost.flops *= 2;
  cost.bytes = inputBytes(op) + outputBytes(op);
  cost.kernels = 2 * cost.grouped.groups + 2;
  return cost;
}

namespace {

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

} // namespace

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
    cost.note = CostNote::AttentionWithoutShapes;
    cost.bytes = inputBytes(op) + outputBytes(op);
    return cost;
  }
  const double batch = batchOf(q);
  const double l = dim(q, -2), s = dim(k, -2), e = dim(q, -1), ev = dim(v, -1);
  // The math fallback (and the un-fused composite) computes every score; the fused
  // kernels skip the blocks a causal mask hides.
  const bool fused =
      contains(stem, "flash") || contains(stem, "efficient") || contains(stem, "cudnn");
  const double causalShare = fused && op.boolArg("is_causal").value_or(false)
                                 ? causalBlockShare(l, s, contains(stem, "efficient") ? 64 : 128)
                                 : 1.0;
  const double forwardMatmuls = 2 * batch * l * s * (e + ev) * causalShare;
  const double softmaxFlops = 5 * batch * l * s * causalShare;
  // Backward recomputes Q.K^T and runs four more GEMMs (dV, dP, dQ, dK).
  const auto flopsOf = [&](double matmuls, double softmax) {
    return backward ? 2.5 * matmuls + 2 * softmax : matmuls + softmax;
  };
  cost.flops = flopsOf(forwardMatmuls, softmaxFlops);
  // Fused (flash / memory-efficient) kernels: no L x S matrix in DRAM.
  cost.bytes = inputBytes(op) + outputBytes(op);
  cost.gemm = {batch, l, s, e};
  if (fused) {
    cost.attention.backend = contains(stem, "flash")       ? AttentionBackend::Flash
                             : contains(stem, "efficient") ? AttentionBackend::Efficient
                                                           : AttentionBackend::Cudnn;
    cost.attention.backward = backward;
    cost.attention.dropout = op.floatArg("dropout_p").value_or(0.0) > 0;
    cost.attention.scores = batch * l * s;
    cost.attention.batchHeads = batch;
    cost.attention.queries = l;
    cost.attention.keys = s;
    cost.attention.allScoresFlops =
        flopsOf(forwardMatmuls / causalShare, softmaxFlops / causalShare);
    cost.attention.matmulFlops = backward ? 2.5 * forwardMatmuls : forwardMatmuls;
    cost.attention.scoresComputed = batch * l * s * causalShare;
  }
  return cost;
}

namespace {

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

} // namespace

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
    // A packed sequence: [tokens, features], the sequences sorted by length. Its steps are
    // the longest sequence's (`seq_len`), each over the sequences still running: tokens /
    // steps rows on average, and every step is a kernel launch whatever its rows.
    const double tokens = dim(input, 0);
    seq = static_cast<double>(op.intArg("seq_len").value_or(0));
    batch = seq > 0 ? tokens / seq : 1;
    if (seq <= 0)
      seq = tokens; // a trace without seq_len: one sequence
  }
  double hidden = static_cast<double>(op.intArg("hidden_size").value_or(0));
  if (hidden <= 0 && op.output(0))
    hidden = dim(op.output(0), -1) / directions;
  if (hidden <= 0) {
    cost.approximate = true;
    cost.note = CostNote::RecurrentWithoutHidden;
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
  cost.note = CostNote::RecurrentSerial;
  return cost;
}

} // namespace wavecast::family_costs
