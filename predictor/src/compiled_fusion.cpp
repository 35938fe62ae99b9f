#include "wavecast/predictor/compiled_fusion.h"

#include "inductor_ops.h"
#include "wavecast/predictor/host_model.h"
#include "wavecast/predictor/roofline.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace wavecast::compiled {

bool generated(CostFamily family) {
  switch (family) {
  case CostFamily::Norm:
  case CostFamily::Elementwise:
  case CostFamily::Reduction:
  case CostFamily::Softmax:
  case CostFamily::Embedding:
  case CostFamily::Pooling:
  case CostFamily::Loss:
  case CostFamily::Optimizer:
  case CostFamily::Copy:
    return true;
  default:
    return false;
  }
}

bool drawsRandom(const OpRecord& op) {
  static constexpr std::array<std::string_view, 9> kDraws = {
      "aten::native_dropout", "aten::bernoulli", "aten::bernoulli_",
      "aten::rand",           "aten::rand_like", "aten::randn",
      "aten::randn_like",     "aten::uniform_",  "aten::normal_"};
  if (op.name == "aten::native_dropout" && !op.boolArg("train").value_or(true))
    return false;
  return std::find(kDraws.begin(), kDraws.end(), op.name) != kDraws.end();
}

bool hasCompiledDataflow(const Trace& trace) {
  return std::any_of(trace.ops.begin(), trace.ops.end(), [](const OpRecord& op) {
    return op.compiled && std::any_of(op.inputs.begin(), op.inputs.end(),
                                      [](const auto& input) { return input && input->source; });
  });
}

namespace {

// Outputs below which Inductor splits a reduction in two kernels (partial results, then
// their sum), so that enough blocks run: 64 per SM (Reduction.num_splits) of a 128-SM GPU.
constexpr double kSplitBelowOutputs = 64 * 128;
// Elements per output up to which a reduction stays whole: four per thread of the shortest
// split, 32 (reduction_split_factor, torch/_inductor/choices.py; a reduction over the
// innermost dimension splits only past 8192, which the row-wise norms and softmax, whose
// outputs are many, never need).
constexpr double kSplitAboveElements = 128;

int reductionKernels(double outputs, double elements) {
  return outputs < kSplitBelowOutputs && elements / std::max(1.0, outputs) > kSplitAboveElements
             ? 2
             : 1;
}

// The kernels Inductor generates for an op's reductions and the passes that must wait
// for them (Reduction.num_splits, torch/_inductor/ir.py); 0 for pointwise work, which
// fuses into the kernels around it.
// - a batch norm: its statistics per channel (split: few outputs, many elements), then
//   the pass that applies them, in training also the running statistics' update;
// - a row-wise norm: one kernel per row block forward; backward, the input's gradient
//   per row and the weight's and bias's over rows (few outputs: split);
// - softmax, a loss, a sum: one reduction, split where its outputs are few.
int generatedKernels(const OpRecord& op, CostFamily family) {
  const TensorMeta* in = op.input(0);
  const double elements = in ? static_cast<double>(in->numel()) : 0;
  const bool backward = op.name.find("backward") != std::string::npos;
  switch (family) {
  case CostFamily::Norm: {
    if (op.name.find("batch_norm") != std::string::npos) {
      const double channels = in && in->shape.size() > 1 ? in->shape[1] : 1;
      return reductionKernels(channels, elements) + (backward ? 1 : 2);
    }
    if (!backward)
      return 1;
    const TensorMeta* out = op.output(0);
    const double features = out && !out->shape.empty() ? out->shape.back() : 1;
    return 1 + reductionKernels(features, elements);
  }
  case CostFamily::Softmax:
  case CostFamily::Reduction:
  case CostFamily::Loss: {
    if (backward && family != CostFamily::Softmax)
      return 0; // a gradient spread over the elements: pointwise
    const TensorMeta* out = op.output(0);
    const double outputs = out ? std::max<double>(1, static_cast<double>(out->numel())) : 1;
    return family == CostFamily::Softmax ? 1 : reductionKernels(outputs, elements);
  }
  default:
    return 0;
  }
}

// A member's arithmetic in a generated kernel: a norm's per-element math (the eager
// costs of batch norm price ATen's and cuDNN's own per-channel kernels, fitted to their
// times); any other op's as priced eagerly.
double generatedFlops(const OpRecord& op, const OpCost& cost) {
  if (cost.family != CostFamily::Norm)
    return cost.flops;
  const bool backward = op.name.find("backward") != std::string::npos;
  const TensorMeta* x = op.input(backward ? 1 : 0);
  return (backward ? 12.0 : 8.0) * (x ? static_cast<double>(x->numel()) : 0);
}

// A random draw in a generated kernel runs Triton's tl.rand: a Philox4x32 of 10 rounds per
// element, one of its four words kept (triton/language/random.py; curand's kernels keep all
// four). A round is two 32-bit high and two low multiplies and two three-input XORs per
// element (the key's additions are uniform across a block): 60 integer instructions, at 64
// per SM per clock.
constexpr double kRandomDrawSmCycles = 10 * 6 / 64.0;

// Bytes a kernel reads of `t`: a broadcast (stride 0) dimension once.
double footprint(const TensorMeta& t) {
  if (t.strides.size() != t.shape.size())
    return static_cast<double>(t.bytes());
  double elements = 1;
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (t.strides[d] != 0)
      elements *= static_cast<double>(std::max<int64_t>(0, t.shape[d]));
  return elements * t.elementSize();
}

struct UnionFind {
  std::vector<size_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t find(size_t x) {
    while (parent[x] != x)
      x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(size_t a, size_t b) { parent[find(a)] = find(b); }
};

} // namespace

void fuseRegions(const Trace& trace, std::vector<OpCost>& costs) {
  if (!hasCompiledDataflow(trace))
    return;
  const size_t count = std::min(trace.ops.size(), costs.size());
  std::unordered_map<int64_t, size_t> indexOf;
  for (size_t i = 0; i < count; ++i)
    indexOf.emplace(trace.ops[i].id, i);

  // Fusion happens between two library calls of one compiled run: a segment.
  std::vector<int64_t> segment(count, -1); // -1: not fused
  int64_t current = 0;
  std::optional<Phase> phase;
  for (size_t i = 0; i < count; ++i) {
    const OpRecord& op = trace.ops[i];
    const OpCost& cost = costs[i];
    if (cost.metadataOnly())
      continue;
    const bool fuses = op.compiled && !op.onHost && generated(cost.family) &&
                       !synchronizesHost(op) && op.batchShare == 1.0;
    if (!fuses || op.phase != phase)
      ++current;
    phase = op.phase;
    if (fuses)
      segment[i] = current;
  }

  // Groups: the fused ops of a segment joined by what one reads of another.
  UnionFind groups(count);
  for (size_t i = 0; i < count; ++i) {
    if (segment[i] < 0)
      continue;
    for (const auto& input : trace.ops[i].inputs)
      if (input && input->source)
        if (const auto it = indexOf.find(input->source->op);
            it != indexOf.end() && segment[it->second] == segment[i])
          groups.unite(i, it->second);
  }
  // Outputs read outside their group (or by no op of the trace: kept past the iteration).
  std::map<std::pair<size_t, int>, bool> readOutside; // (op, output) -> read outside
  for (size_t j = 0; j < count; ++j)
    for (const auto& input : trace.ops[j].inputs)
      if (input && input->source)
        if (const auto it = indexOf.find(input->source->op); it != indexOf.end()) {
          const size_t i = it->second;
          if (segment[i] < 0)
            continue;
          bool& outside = readOutside[{i, input->source->output}];
          outside = outside || segment[j] < 0 || groups.find(j) != groups.find(i);
        }

  std::map<size_t, std::vector<size_t>> members; // root -> ops in trace order
  for (size_t i = 0; i < count; ++i)
    if (segment[i] >= 0)
      members[groups.find(i)].push_back(i);

  for (const auto& [root, ops] : members) {
    // Each member's own traffic: inputs from outside the group (each once), outputs
    // used outside it.
    std::set<std::pair<int64_t, int>> readOnce;
    std::vector<double> bytes(ops.size(), 0), flops(ops.size(), 0), elements(ops.size(), 0),
        cycles(ops.size(), 0);
    for (size_t m = 0; m < ops.size(); ++m) {
      const size_t i = ops[m];
      const OpRecord& op = trace.ops[i];
      for (const auto& input : op.inputs) {
        if (!input || input->sameAs >= 0)
          continue;
        if (input->source) {
          const auto it = indexOf.find(input->source->op);
          if (it != indexOf.end() && segment[it->second] >= 0 && groups.find(it->second) == root)
            continue;
          if (!readOnce.insert({input->source->op, input->source->output}).second)
            continue;
        }
        bytes[m] += footprint(*input);
      }
      // A generated kernel spreads the largest tensor it touches over the GPU (Inductor
      // splits a reduction with few outputs to that end).
      for (const auto& input : op.inputs)
        if (input)
          elements[m] = std::max(elements[m], static_cast<double>(input->numel()));
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        if (!op.outputs[k])
          continue;
        elements[m] = std::max(elements[m], static_cast<double>(op.outputs[k]->numel()));
        const auto use = readOutside.find({i, static_cast<int>(k)});
        if (use == readOutside.end() || use->second)
          bytes[m] += static_cast<double>(op.outputs[k]->bytes());
      }
      // An in-place op that returns nothing (a foreach step) writes its first operands.
      if (op.outputs.empty() && !op.name.empty() && op.name.back() == '_') {
        const size_t written =
            static_cast<size_t>(std::max<int64_t>(1, op.intArg("num_tensors").value_or(1)));
        for (size_t k = 0; k < std::min(written, op.inputs.size()); ++k)
          if (op.inputs[k])
            bytes[m] += static_cast<double>(op.inputs[k]->bytes());
      }
      flops[m] = generatedFlops(op, costs[i]);
      if (drawsRandom(op) && op.output(0))
        cycles[m] = kRandomDrawSmCycles * static_cast<double>(op.output(0)->numel());
    }
    // Kernels: one per reduction (their traffic the members' after them), else the first
    // member's.
    std::vector<int> kernels(ops.size(), 0);
    for (size_t m = 0; m < ops.size(); ++m)
      kernels[m] = generatedKernels(trace.ops[ops[m]], costs[ops[m]].family);
    if (std::all_of(kernels.begin(), kernels.end(), [](int k) { return k == 0; }))
      kernels[0] = 1;
    const size_t first =
        std::find_if(kernels.begin(), kernels.end(), [](int k) { return k > 0; }) - kernels.begin();
    std::vector<size_t> carrier(ops.size());
    size_t last = first;
    for (size_t m = 0; m < ops.size(); ++m) {
      if (kernels[m] > 0)
        last = m;
      carrier[m] = m < first ? first : last;
    }
    std::vector<OpCost> fused(ops.size());
    for (size_t m = 0; m < ops.size(); ++m) {
      OpCost& out = fused[m];
      out.family = costs[ops[m]].family;
      out.dtype = costs[ops[m]].dtype;
      out.kernels = kernels[m];
      out.note = kernels[m] > 0 ? CostNote::GeneratedKernel : CostNote::FusedIntoKernel;
      out.fused = true;
    }
    for (size_t m = 0; m < ops.size(); ++m) {
      OpCost& to = fused[carrier[m]];
      to.bytes += bytes[m];
      to.flops += flops[m];
      to.smCycles += cycles[m];
      to.parallelElements = std::max(to.parallelElements, elements[m]);
    }
    for (size_t m = 0; m < ops.size(); ++m)
      costs[ops[m]] = std::move(fused[m]);
  }
}

namespace {

TensorMeta plainContiguous(TensorMeta t) {
  t.strides.clear();
  t.contiguous = true;
  t.source.reset();
  return t;
}

std::optional<InductorVariant> paddedGemm(const OpRecord& op, const OpCost& cost) {
  if (cost.family != CostFamily::Gemm || cost.grouped.groups > 0)
    return std::nullopt;
  // Operand positions and their (m, k) / (k, n) dimensions from the end.
  size_t a = 0;
  if (op.name == "aten::addmm")
    a = 1;
  else if (op.name != "aten::mm" && op.name != "aten::bmm")
    return std::nullopt;
  const TensorMeta* mat1 = op.input(a);
  const TensorMeta* mat2 = op.input(a + 1);
  if (!mat1 || !mat2 || mat1->shape.size() < 2 || mat2->shape.size() < 2 ||
      mat1->dtype != mat2->dtype)
    return std::nullopt;
  const int64_t alignment = mat1->elementSize() == 2 ? 8 : mat1->elementSize() == 4 ? 4 : 0;
  if (alignment == 0)
    return std::nullopt;
  const auto padded = [&](int64_t d) {
    return d <= 1 || d % alignment == 0 ? d : (d / alignment + 1) * alignment;
  };
  const size_t r1 = mat1->shape.size(), r2 = mat2->shape.size();
  const int64_t m = mat1->shape[r1 - 2], k = mat1->shape[r1 - 1], n = mat2->shape[r2 - 1];
  if (padded(m) == m && padded(k) == k && padded(n) == n)
    return std::nullopt;
  InductorVariant out;
  out.kind = InductorVariant::Kind::PaddedGemm;
  out.op = op;
  TensorMeta p1 = plainContiguous(*mat1), p2 = plainContiguous(*mat2);
  p1.shape[r1 - 2] = padded(m);
  p1.shape[r1 - 1] = padded(k);
  p2.shape[r2 - 2] = padded(k);
  p2.shape[r2 - 1] = padded(n);
  out.op.inputs[a] = p1;
  out.op.inputs[a + 1] = p2;
  if (a == 1 && op.input(0)) { // addmm's bias, padded along n
    TensorMeta bias = plainContiguous(*op.input(0));
    if (!bias.shape.empty())
      bias.shape.back() = padded(n);
    out.op.inputs[0] = bias;
  }
  for (auto& t : out.op.outputs)
    if (t && t->shape.size() >= 2) {
      t = plainContiguous(*t);
      t->shape[t->shape.size() - 2] = padded(m);
      t->shape.back() = padded(n);
    }
  out.cost = estimateOpCost(out.op);
  out.cost.tf32 = cost.tf32;
  for (const auto& [before, after] : {std::pair{mat1, &p1}, std::pair{mat2, &p2}})
    if (after->shape != before->shape) {
      out.copyBytes += static_cast<double>(before->bytes() + after->bytes());
      ++out.copyKernels;
    }
  return out;
}

bool isConvolution(const OpRecord& op, const OpCost& cost) {
  return cost.family == CostFamily::Conv &&
         (op.name == "aten::convolution" || op.name == "aten::convolution_backward");
}

// decide_layout_opt for a training graph: not with a grouped convolution of more than one
// input channel per group, a spatial one with at least twice the input channels of its
// output, or only convolutions of at most 64 channels each way.
bool layoutOptimized(const Trace& trace, const std::vector<OpCost>& costs) {
  bool any = false, allSmall = true;
  for (size_t i = 0; i < std::min(trace.ops.size(), costs.size()); ++i) {
    const OpRecord& op = trace.ops[i];
    if (!op.compiled || op.name != "aten::convolution" || op.phase != Phase::Forward)
      continue;
    const TensorMeta* weight = op.input(1);
    if (!weight || weight->shape.size() < 4)
      return false;
    any = true;
    const int64_t out = weight->shape[0], in = weight->shape[1];
    if (op.intArg("groups").value_or(1) > 1 && in > 1)
      return false;
    if (out * 2 <= in && weight->shape[2] > 1)
      return false;
    allSmall = allSmall && out <= 64 && in <= 64;
  }
  return any && !allSmall;
}

// `t` as channels_last (NHWC, NDHWC) strides give it.
TensorMeta channelsLast(TensorMeta t) {
  const size_t rank = t.shape.size();
  if (rank != 4 && rank != 5)
    return t;
  std::vector<int64_t> strides(rank);
  int64_t stride = 1;
  strides[1] = stride;
  stride *= std::max<int64_t>(1, t.shape[1]);
  for (size_t d = rank - 1; d >= 2; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(1, t.shape[d]);
  }
  strides[0] = stride;
  t.strides = strides;
  t.contiguous = t.shape[1] == 1;
  if (t.contiguous)
    t.strides.clear();
  t.source.reset();
  return t;
}

std::optional<InductorVariant> channelsLastConvolution(const OpRecord& op, const OpCost& cost) {
  InductorVariant out;
  out.kind = InductorVariant::Kind::ChannelsLast;
  out.op = op;
  bool changed = false;
  for (auto* tensors : {&out.op.inputs, &out.op.outputs})
    for (auto& t : *tensors)
      if (t && (t->shape.size() == 4 || t->shape.size() == 5) && t->contiguous) {
        t = channelsLast(*t);
        changed = true;
      }
  if (!changed)
    return std::nullopt;
  out.cost = estimateOpCost(out.op);
  out.cost.tf32 = cost.tf32;
  return out;
}

} // namespace

std::vector<std::optional<InductorVariant>> inductorVariants(const Trace& trace,
                                                             const std::vector<OpCost>& costs) {
  const size_t count = std::min(trace.ops.size(), costs.size());
  std::vector<std::optional<InductorVariant>> variants(count);
  const bool nhwc = layoutOptimized(trace, costs);
  for (size_t i = 0; i < count; ++i) {
    const OpRecord& op = trace.ops[i];
    if (!op.compiled || costs[i].metadataOnly())
      continue;
    if (nhwc && isConvolution(op, costs[i]))
      variants[i] = channelsLastConvolution(op, costs[i]);
    else
      variants[i] = paddedGemm(op, costs[i]);
  }
  return variants;
}

bool runsOn(const InductorVariant& variant, const OpCost& traced, const DeviceSpec& gpu) {
  if (variant.kind == InductorVariant::Kind::ChannelsLast)
    return true;
  if (!usesTensorCores(traced, gpu) || gpu.memoryBandwidthGBs <= 0)
    return false;
  const GemmShape& g = traced.gemm;
  const double denominator = g.m * g.k + g.n * g.k + g.m * g.n;
  if (denominator <= 0)
    return false;
  const double intensity = g.m * g.n * g.k / denominator;
  const double balance = peakTflops(gpu, traced) * 1e3 / gpu.memoryBandwidthGBs;
  return intensity > 0.5 * balance;
}

} // namespace wavecast::compiled
