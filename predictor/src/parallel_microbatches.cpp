// A rank's iteration over the microbatches of its batch: each microbatch's forward and
// backward ops again on its share of the batch, gradients accumulated between them.
#include "parallel_ops.h"

#include <algorithm>
#include <unordered_map>

namespace wavecast {
namespace {

// Gradients' collectives, run once per iteration: every parameter's over dp, an expert's
// over its replicas.
bool dataParallel(const OpRecord& op) {
  const std::string_view group = collectiveGroup(op);
  return group == "dp" || group == "edp";
}

// AccumulateGrad adding a later microbatch's gradient of `param` to the one kept.
OpRecord accumulateGradient(const OpRecord& gradientOp, const ParameterInfo& param,
                            const ParallelConfig& config, int64_t id) {
  const int64_t numel = rankElements(param, config);
  TensorMeta grad{{numel}, dtypeOf(param)};
  for (const auto& t : gradientOp.outputs)
    if (t && t->numel() == numel) {
      grad = *t;
      break;
    }
  OpRecord op = insertedOp("aten::add_", gradientOp, Phase::Backward);
  op.id = id;
  op.inputs = {grad, grad};
  op.outputs = {grad};
  op.forwardId = gradientOp.forwardId;
  return op;
}

} // namespace

Trace runMicrobatches(const Trace& stage, const std::vector<size_t>& origin, const Trace& single,
                      const ModelStructure& model, const ParallelConfig& config,
                      Microbatches microbatches) {
  const int m = microbatches.count;
  size_t first = stage.ops.size(), last = 0;
  for (size_t i = 0; i < stage.ops.size(); ++i)
    if (stage.ops[i].phase != Phase::Optimizer) {
      first = std::min(first, i);
      last = i;
    }
  if (m <= 1 || first > last)
    return stage;
  std::unordered_map<size_t, std::vector<size_t>> parametersOf; // gradient op -> parameters
  for (size_t p = 0; p < model.parameters.size(); ++p)
    if (const auto& op = model.parameters[p].gradientOp)
      parametersOf[*op].push_back(p);
  int64_t nextId = 0;
  for (const auto& op : stage.ops)
    nextId = std::max(nextId, op.id + 1);

  Trace out = stage;
  out.ops.assign(stage.ops.begin(), stage.ops.begin() + static_cast<long>(first));
  for (int k = 0; k < m; ++k) {
    std::unordered_map<int64_t, int64_t> ids; // the traced op's id -> its copy's
    for (size_t i = first; i <= last; ++i)
      ids[stage.ops[i].id] = k == 0 ? stage.ops[i].id : nextId++;
    const auto renamed = [&](int64_t id) {
      const auto it = ids.find(id);
      return it == ids.end() ? id : it->second;
    };
    for (const Phase phase : {Phase::Forward, Phase::Backward, Phase::Optimizer})
      for (size_t i = first; i <= last; ++i) {
        const OpRecord& op = stage.ops[i];
        const bool collective = op.args.count("collective") > 0;
        if (op.phase != phase || (phase == Phase::Optimizer && k + 1 < m) ||
            (collective && dataParallel(op) && k != (phase == Phase::Forward ? 0 : m - 1)))
          continue;
        OpRecord copy = op;
        copy.id = renamed(op.id);
        if (op.forwardId)
          copy.forwardId = renamed(*op.forwardId);
        if (const auto wait = op.intArg("wait_op"))
          copy.args["wait_op"] = renamed(*wait);
        if (microbatches.tracedPerMicrobatch) {
          // Shapes, activations and their sends are already one microbatch's.
        } else if (!collective && phase != Phase::Optimizer) {
          copy.batchShare = op.batchShare / m;
        } else if (!dataParallel(op)) {
          copy.args["bytes"] = op.intArg("bytes").value_or(0) / m;
        }
        out.ops.push_back(std::move(copy));
        const size_t traced = origin[i];
        if (k == 0 || phase != Phase::Backward || traced == kNoOrigin ||
            op.name != single.ops[traced].name)
          continue;
        const size_t made = out.ops.size() - 1;
        if (const auto it = parametersOf.find(traced); it != parametersOf.end())
          for (size_t p : it->second) {
            OpRecord add = accumulateGradient(out.ops[made], model.parameters[p], config, nextId++);
            out.ops.push_back(std::move(add));
          }
      }
  }
  out.ops.insert(out.ops.end(), stage.ops.begin() + static_cast<long>(last) + 1, stage.ops.end());
  return out;
}

} // namespace wavecast
