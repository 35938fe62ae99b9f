// What a single-GPU trace says of the model a layout splits: its repeated blocks (module
// paths with an index, "blocks.3", "transformer.h.3"), the Linear calls of each block and
// which pair up Megatron-style, the attention heads, and the parameters in registration
// order with the backward op that produces each gradient.
#include "family_costs.h"
#include "op_tables.h"
#include "parallel_ops.h"
#include "wavecast/predictor/parallel.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <unordered_map>

namespace wavecast {
namespace {

// Whether an op can make a gradient: any that computes, and a view only when it drops unit
// dimensions (a bias's gradient summed with keepdim). A reshaped activation ([B, L, h] as
// [B·L, h]) or a transposed weight can have a parameter's shape without being its gradient.
bool makesGradient(const OpRecord& op) {
  if (!isMetadata(op))
    return true;
  const auto squeezed = [](const std::vector<int64_t>& shape) {
    std::vector<int64_t> out;
    for (int64_t d : shape)
      if (d != 1)
        out.push_back(d);
    return out;
  };
  const auto* in = op.input(0);
  const auto& out = op.outputs.empty() ? std::nullopt : op.outputs.front();
  return in && out && squeezed(in->shape) == squeezed(out->shape);
}

bool allDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

// "blocks.3.attention.qkv" -> ("blocks", "blocks.3"); no indexed segment: empty.
std::pair<std::string, std::string> blockKey(const std::string& module) {
  size_t start = 0;
  while (start < module.size()) {
    size_t end = module.find('.', start);
    if (end == std::string::npos)
      end = module.size();
    if (allDigits(std::string_view(module).substr(start, end - start)))
      return {start == 0 ? std::string() : module.substr(0, start - 1), module.substr(0, end)};
    start = end + 1;
  }
  return {};
}

// A forward Linear's (K, N) when `op` is one: addmm(bias, x, W^T), mm(x, W^T), linear(x, W).
std::optional<std::pair<int64_t, int64_t>> linearShape(const OpRecord& op) {
  if (op.phase != Phase::Forward)
    return std::nullopt;
  const TensorMeta* weight = nullptr;
  bool transposed = false; // W as [N, K]
  if (op.name == "aten::addmm")
    weight = op.input(2);
  else if (op.name == "aten::mm")
    weight = op.input(1);
  else if (op.name == "aten::linear") {
    weight = op.input(1);
    transposed = true;
  }
  if (!weight || weight->shape.size() != 2)
    return std::nullopt;
  if (transposed)
    return std::make_pair(weight->shape[1], weight->shape[0]);
  return std::make_pair(weight->shape[0], weight->shape[1]);
}

int mostCommon(const std::map<int64_t, int>& counts) {
  int64_t best = 0;
  int bestCount = 0;
  for (const auto& [value, count] : counts)
    if (count > bestCount) {
      best = value;
      bestCount = count;
    }
  return static_cast<int>(best);
}

// A script that checkpoints its blocks runs each block's forward again in backward: the
// block's first op, by name and input, among its backward ops.
bool rerunsInBackward(const Trace& trace, const RepeatedBlock& block) {
  const OpRecord& first = trace.ops[block.firstForward];
  if (!block.firstBackward || !first.input(0))
    return false;
  for (size_t i = *block.firstBackward; i <= *block.lastBackward; ++i) {
    const OpRecord& op = trace.ops[i];
    if (op.phase == Phase::Backward && op.name == first.name && op.input(0) &&
        op.input(0)->shape == first.input(0)->shape)
      return true;
  }
  return false;
}

void findBlocks(const Trace& trace, ModelStructure& model) {
  std::map<std::string, std::vector<std::string>> containers; // prefix -> block keys in order
  std::unordered_map<std::string, int> blockIndex;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const auto& op = trace.ops[i];
    if (op.phase != Phase::Forward)
      continue;
    auto [prefix, key] = blockKey(op.module);
    if (key.empty())
      continue;
    auto& keys = containers[prefix];
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      keys.push_back(key);
  }
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const auto& op = trace.ops[i];
    if (op.phase != Phase::Forward)
      continue;
    auto [prefix, key] = blockKey(op.module);
    if (key.empty() || containers[prefix].size() < 2)
      continue;
    auto [it, fresh] = blockIndex.emplace(key, static_cast<int>(model.blocks.size()));
    if (fresh)
      model.blocks.push_back({key, i, i, std::nullopt, std::nullopt});
    model.blocks[it->second].lastForward = i;
    model.opBlock[i] = it->second;
  }
  // Backward ops belong to the block of the forward op they differentiate.
  std::unordered_map<int64_t, size_t> byId;
  for (size_t i = 0; i < trace.ops.size(); ++i)
    byId.emplace(trace.ops[i].id, i);
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const auto& op = trace.ops[i];
    if (op.phase != Phase::Backward || !op.forwardId)
      continue;
    const auto it = byId.find(*op.forwardId);
    if (it == byId.end())
      continue;
    model.opForward[i] = it->second;
    if (model.opBlock[it->second] < 0)
      continue;
    const int block = model.opBlock[it->second];
    model.opBlock[i] = block;
    auto& b = model.blocks[block];
    if (!b.firstBackward)
      b.firstBackward = i;
    b.lastBackward = i;
  }
  model.recomputesBlocks =
      std::any_of(model.blocks.begin(), model.blocks.end(),
                  [&](const RepeatedBlock& block) { return rerunsInBackward(trace, block); });
}

void findDimensions(const Trace& trace, ModelStructure& model) {
  std::map<int64_t, int> hidden;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const auto& op = trace.ops[i];
    if (op.phase == Phase::Forward && model.opBlock[i] >= 0 &&
        op_tables::isNormalization(op.name.substr(op.name.rfind(':') + 1)))
      if (const auto* x = op.input(0); x && !x->shape.empty())
        ++hidden[x->shape.back()];
  }
  for (const auto& linear : model.linears)
    if (linear.block >= 0 && hidden.empty())
      ++hidden[linear.in];
  model.hidden = mostCommon(hidden);
  // Heads: SDPA's query [B, H, L, D], else the [B, L, H, D] view of a block's attention.
  for (size_t i = 0; i < trace.ops.size() && model.heads == 0; ++i) {
    const auto& op = trace.ops[i];
    if (op.phase != Phase::Forward || model.opBlock[i] < 0)
      continue;
    if (op_tables::isAttention(op.name.substr(op.name.rfind(':') + 1))) {
      if (const auto* q = op.input(0); q && q->shape.size() == 4)
        model.heads = static_cast<int>(q->shape[1]);
      continue;
    }
    for (const auto& out : op.outputs)
      if (out && out->shape.size() == 4 && out->shape[0] == model.batch &&
          out->shape[2] * out->shape[3] == model.hidden && model.hidden > 0) {
        model.heads = static_cast<int>(out->shape[2]);
        break;
      }
  }
  // Sequence: the [B, L, hidden] hidden states.
  for (size_t i = 0; i < trace.ops.size() && model.sequence == 0; ++i) {
    const auto& op = trace.ops[i];
    if (op.phase != Phase::Forward || model.opBlock[i] < 0)
      continue;
    if (const auto* x = op.input(0);
        x && x->shape.size() == 3 && x->shape[0] == model.batch && x->shape[2] == model.hidden)
      model.sequence = x->shape[1];
  }
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const auto& op = trace.ops[i];
    if (op.phase == Phase::Forward && op.name == "aten::embedding")
      if (const auto* w = op.input(0); w && w->shape.size() == 2 && w->shape[0] > model.vocab) {
        model.vocab = w->shape[0];
        model.embeddingOp = i;
      }
  }
}

void findLinearPairs(const Trace& trace, ModelStructure& model) {
  for (size_t i = 0; i < trace.ops.size(); ++i)
    if (const auto shape = linearShape(trace.ops[i])) {
      model.opLinear[i] = static_cast<int>(model.linears.size());
      model.linears.push_back(
          {i, trace.ops[i].module, shape->first, shape->second, model.opBlock[i]});
    }
  for (size_t i = 0; i < trace.ops.size(); ++i)
    model.opLinear[i] = model.opLinear[model.opForward[i]];
  findDimensions(trace, model);
  if (model.hidden == 0)
    return;
  // Per block: a Linear from the hidden size opens a column-parallel group; one back to
  // the hidden size after some computation (attention, the activation) is its row-parallel
  // closer. Unclosed columns stay replicated.
  std::vector<size_t> open;
  int block = -2;
  size_t lastOpen = 0;
  auto drop = [&] {
    for (size_t c : open)
      model.linears[c].role = LinearRole::Replicated;
    open.clear();
  };
  for (size_t l = 0; l < model.linears.size(); ++l) {
    auto& linear = model.linears[l];
    if (linear.block != block) {
      drop();
      block = linear.block;
    }
    if (linear.block < 0) {
      if (model.vocab > 0 && linear.out == model.vocab && linear.in == model.hidden)
        model.headOp = linear.op;
      continue;
    }
    bool computedSince = false;
    if (!open.empty())
      for (size_t i = model.linears[lastOpen].op + 1; i < linear.op && !computedSince; ++i)
        computedSince = !isMetadata(trace.ops[i]) && trace.ops[i].phase == Phase::Forward;
    if (linear.out == model.hidden && !open.empty() && computedSince) {
      TensorParallelGroup group{block, open, l, model.linears[open.front()].op, linear.op};
      const int id = static_cast<int>(model.groups.size());
      for (size_t c : open)
        model.linears[c].group = id;
      linear.role = LinearRole::Row;
      linear.group = id;
      model.groups.push_back(std::move(group));
      open.clear();
    } else if (linear.in == model.hidden) {
      linear.role = LinearRole::Column;
      open.push_back(l);
      lastOpen = l;
    }
  }
  drop();
}

// The parameters in registration order: the first optimizer op listing `num_tensors`
// tensors. Each gradient is the first backward output of its shape, met in reverse
// registration order within a small window (a Linear yields its weight's gradient before
// its bias's); one never met (tied weights, accumulated last) is ready at the end.
void findParameters(const Trace& trace, ModelStructure& model) {
  for (const auto& op : trace.ops) {
    if (op.phase != Phase::Optimizer)
      continue;
    const auto count = op.intArg("num_tensors");
    if (!count || *count <= 0 || op.inputs.size() < static_cast<size_t>(*count))
      continue;
    const auto* first = op.input(0);
    if (!first || first->shape.empty())
      continue;
    for (int64_t i = 0; i < *count; ++i) {
      const auto* t = op.input(static_cast<size_t>(i));
      ParameterInfo p;
      if (t) {
        p.shape = t->shape;
        p.numel = t->numel();
        p.bytes = t->bytes();
      }
      model.parameters.push_back(std::move(p));
    }
    break;
  }
  constexpr size_t kWindow = 4;
  size_t next = model.parameters.size(); // reverse order: parameters[next - 1] is expected
  std::vector<bool> met(model.parameters.size(), false);
  for (size_t i = 0; i < trace.ops.size() && next > 0; ++i) {
    const auto& op = trace.ops[i];
    if (op.phase != Phase::Backward || !makesGradient(op))
      continue;
    for (const auto& out : op.outputs) {
      if (!out)
        continue;
      for (size_t k = 0, p = next; k < kWindow && p > 0; --p) {
        if (met[p - 1])
          continue;
        ++k;
        if (model.parameters[p - 1].shape == out->shape) {
          met[p - 1] = true;
          model.parameters[p - 1].gradientOp = i;
          model.parameters[p - 1].block = model.opBlock[i];
          break;
        }
      }
      while (next > 0 && met[next - 1])
        --next;
    }
  }
  // Which parameters tensor parallelism splits: those of paired Linears and the vocabulary.
  for (auto& p : model.parameters) {
    if (model.vocab > 0 && !p.shape.empty() && p.shape[0] == model.vocab) {
      p.tensorParallel = true;
      continue;
    }
    const int linear = p.gradientOp ? model.opLinear[*p.gradientOp] : -1;
    if (linear < 0 || model.linears[linear].role == LinearRole::Replicated)
      continue;
    // A row-parallel Linear's bias is added once, after the all-reduce: replicated.
    p.tensorParallel = model.linears[linear].role == LinearRole::Column || p.shape.size() == 2;
  }
}

// A grouped GEMM with offsets (the router's cut of its tokens): forward, its autograd
// gradient (itself a grouped GEMM) or transformers' fallback backward.
std::optional<int64_t> expertGroups(const OpRecord& op) {
  const std::string stem = op_tables::stemOf(op.name);
  if (!op_tables::isGroupedGemm(stem) && !op_tables::isGroupedGemmBackward(stem))
    return std::nullopt;
  const TensorMeta* offsets = family_costs::groupedGemmOffsets(op);
  return offsets ? std::optional<int64_t>(offsets->numel()) : std::nullopt;
}

// The mixture-of-experts layers: each module's forward grouped GEMMs (transformers'
// experts module, torchtitan's GroupedExperts), and the backward ops of those; the expert
// weights are the parameters of [experts, ...] shape of three dimensions.
void findExperts(const Trace& trace, ModelStructure& model) {
  model.opExpertLayer.assign(trace.ops.size(), -1);
  std::map<std::string, int> byModule;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const auto& op = trace.ops[i];
    const auto groups = expertGroups(op);
    if (!groups)
      continue;
    const std::string key = op.module + "#" + std::to_string(model.opBlock[i]);
    if (op.phase == Phase::Forward) {
      auto [it, fresh] = byModule.emplace(key, static_cast<int>(model.expertLayers.size()));
      if (fresh) {
        ExpertLayer layer;
        layer.experts = *groups;
        layer.firstForward = i;
        const auto* tokens = op.input(0);
        layer.dispatchBytes = tokens && tokens->shape.size() == 2 ? tokens->bytes() : 0;
        model.expertLayers.push_back(layer);
      }
      auto& layer = model.expertLayers[it->second];
      layer.lastForward = i;
      const auto* out = op.output(0);
      layer.combineBytes = out && out->shape.size() == 2 ? out->bytes() : layer.dispatchBytes;
      model.opExpertLayer[i] = it->second;
    } else if (op.phase == Phase::Backward) {
      // The layer of the forward op it differentiates, else of its module.
      int layer = model.opExpertLayer[model.opForward[i]];
      if (const auto it = byModule.find(key); layer < 0 && it != byModule.end())
        layer = it->second;
      if (layer < 0)
        continue;
      auto& l = model.expertLayers[layer];
      if (!l.firstBackward)
        l.firstBackward = i;
      l.lastBackward = i;
      model.opExpertLayer[i] = layer;
    }
  }
  for (auto& p : model.parameters)
    p.expert = p.shape.size() == 3 &&
               std::any_of(model.expertLayers.begin(), model.expertLayers.end(),
                           [&](const ExpertLayer& l) { return l.experts == p.shape[0]; });
}

} // namespace

int64_t ModelStructure::parameterBytes() const {
  int64_t total = 0;
  for (const auto& p : parameters)
    total += p.bytes;
  return parameters.empty() ? tracedParameterBytes : total;
}

ModelStructure analyzeModel(const Trace& trace) {
  ModelStructure model;
  model.batch = trace.batchSize;
  model.tracedParameterBytes = trace.memory.parametersBytes;
  model.opBlock.assign(trace.ops.size(), -1);
  model.opLinear.assign(trace.ops.size(), -1);
  model.opForward.resize(trace.ops.size());
  std::iota(model.opForward.begin(), model.opForward.end(), size_t{0});
  findBlocks(trace, model);
  findLinearPairs(trace, model);
  findParameters(trace, model);
  findExperts(trace, model);
  model.computeDtype = trace.precision && trace.precision->autocast ? *trace.precision->autocast
                                                                    : parameterDtype(model);
  return model;
}

std::optional<LayoutProblem> validateLayout(const ParallelConfig& config,
                                            const ModelStructure& model, int64_t batchPerReplica,
                                            const SystemSpec& system) {
  for (int degree :
       {config.dp, config.tp, config.pp, config.ep, config.microbatches, config.recomputeEvery})
    if (degree < 1)
      return LayoutProblem{LayoutProblemKind::BadDegree, degree, 1};
  if (config.tp > 1) {
    if (model.groups.empty())
      return LayoutProblem{LayoutProblemKind::TpWithoutHeads, config.tp, 0};
    if (model.heads > 0 && model.heads % config.tp != 0)
      return LayoutProblem{LayoutProblemKind::TpNotDividingHeads, config.tp, model.heads};
    if (model.hidden % config.tp != 0)
      return LayoutProblem{LayoutProblemKind::TpNotDividingHidden, config.tp, model.hidden};
    if (config.tp > system.gpusPerNode)
      return LayoutProblem{LayoutProblemKind::TpAcrossNodes, config.tp, system.gpusPerNode};
  }
  if (config.ep > 1) {
    if (model.expertLayers.empty())
      return LayoutProblem{LayoutProblemKind::EpWithoutExperts, config.ep, 0};
    if (config.dp % config.ep != 0)
      return LayoutProblem{LayoutProblemKind::EpNotDividingDp, config.ep, config.dp};
    for (const auto& layer : model.expertLayers)
      if (layer.experts % config.ep != 0)
        return LayoutProblem{LayoutProblemKind::EpNotDividingExperts, config.ep, layer.experts};
  }
  if (config.recompute && model.blocks.empty())
    return LayoutProblem{LayoutProblemKind::RecomputeWithoutBlocks, 0, 0};
  if (config.recompute && model.recomputesBlocks)
    return LayoutProblem{LayoutProblemKind::RecomputeAlready, 0, 0};
  if (config.recompute && config.recomputeEvery > static_cast<int>(model.blocks.size()))
    return LayoutProblem{LayoutProblemKind::RecomputeEveryExceedsBlocks, config.recomputeEvery,
                         static_cast<int64_t>(model.blocks.size())};
  if (config.pp > 1 && config.pp > static_cast<int>(model.blocks.size()))
    return LayoutProblem{LayoutProblemKind::PpExceedsLayers, config.pp,
                         static_cast<int64_t>(model.blocks.size())};
  if ((config.paramDtype || config.reduceDtype) &&
      (config.sharding != Sharding::Zero3 || config.dp == 1))
    return LayoutProblem{LayoutProblemKind::MixedPrecisionWithoutFsdp, 0, 0};
  // FSDP computes in the dtype it gathers: the trace must have computed in it too.
  if (config.paramDtype && *config.paramDtype != model.computeDtype)
    return LayoutProblem{LayoutProblemKind::ParamDtypeNotTraced,
                         static_cast<int64_t>(*config.paramDtype),
                         static_cast<int64_t>(model.computeDtype)};
  const int world = config.worldSize();
  if (world > system.gpusPerNode && world % system.gpusPerNode != 0)
    return LayoutProblem{LayoutProblemKind::WorldSizeNotFittingNodes, world, system.gpusPerNode};
  if (batchPerReplica % config.microbatches != 0)
    return LayoutProblem{LayoutProblemKind::BatchNotDivisible, config.microbatches,
                         batchPerReplica};
  return std::nullopt;
}

} // namespace wavecast
