// A GPT-like training trace built op by op, as the tracer would record it: a vocabulary
// embedding, blocks of (norm, QKV Linear, attention as two bmm and a softmax, out
// projection, residual, norm, MLP up, GELU, MLP down, residual), a final norm, an untied
// head onto the vocabulary, log-softmax and NLL; every forward op's backward (Linears as
// their input- and weight-gradient GEMMs and bias sum) and one multi-tensor optimizer op
// over the parameters in registration order. float32. For tests and benches that need a
// transformer whose every figure can be worked out by hand. With `experts`, each block's
// MLP is a mixture of experts instead: a router Linear onto the experts, then the experts'
// up and down projections as grouped GEMMs (torch._grouped_mm) over the 2 tokens each
// token is routed to.
#pragma once

#include "wavecast/trace.h"

#include <string>
#include <vector>

namespace wavecast {

struct TransformerShape {
  int64_t batch = 2;
  int64_t sequence = 8;
  int64_t hidden = 16;
  int64_t heads = 4;
  int64_t vocab = 64;
  int64_t blocks = 4;
  int64_t experts = 0; // 0: dense MLPs
};

class TransformerTraceBuilder {
public:
  explicit TransformerTraceBuilder(const TransformerShape& shape)
      : batch_(shape.batch), seq_(shape.sequence), hidden_(shape.hidden), heads_(shape.heads),
        vocab_(shape.vocab), blocks_(shape.blocks), experts_(shape.experts) {}

  Trace build() {
    Trace trace;
    trace.batchSize = batch_;
    const int64_t B = batch_, L = seq_, h = hidden_, H = heads_, d = h / H, T = B * L;
    fwd("aten::embedding", "tok", {{vocab_, h}, {B, L}}, {{B, L, h}});
    for (int b = 0; b < blocks_; ++b) {
      const std::string p = "blocks." + std::to_string(b);
      fwd("aten::native_layer_norm", p + ".ln1", {{B, L, h}, {h}, {h}}, {{B, L, h}});
      linear(p + ".attn.qkv", h, 3 * h);
      fwd("aten::view", p + ".attn", {{B, L, h}}, {{B, L, H, d}});
      fwd("aten::bmm", p + ".attn", {{B * H, L, d}, {B * H, d, L}}, {{B * H, L, L}});
      fwd("aten::_softmax", p + ".attn", {{B, H, L, L}}, {{B, H, L, L}});
      fwd("aten::bmm", p + ".attn", {{B * H, L, L}, {B * H, L, d}}, {{B * H, L, d}});
      linear(p + ".attn.proj", h, h);
      fwd("aten::add", p, {{B, L, h}, {B, L, h}}, {{B, L, h}});
      fwd("aten::native_layer_norm", p + ".ln2", {{B, L, h}, {h}, {h}}, {{B, L, h}});
      if (experts_ > 0) {
        const int64_t E = experts_, R = 2 * T; // top-2 routing
        linear(p + ".mlp.router", h, E);
        grouped(p + ".mlp.experts", {R, h}, {E, h, 4 * h});
        fwd("aten::gelu", p + ".mlp.experts", {{R, 4 * h}}, {{R, 4 * h}});
        grouped(p + ".mlp.experts", {R, 4 * h}, {E, 4 * h, h});
      } else {
        linear(p + ".mlp.0", h, 4 * h);
        fwd("aten::gelu", p + ".mlp.1", {{B, L, 4 * h}}, {{B, L, 4 * h}});
        linear(p + ".mlp.2", 4 * h, h);
      }
      fwd("aten::add", p, {{B, L, h}, {B, L, h}}, {{B, L, h}});
    }
    fwd("aten::native_layer_norm", "ln", {{B, L, h}, {h}, {h}}, {{B, L, h}});
    fwd("aten::mm", "head", {{T, h}, {h, vocab_}}, {{T, vocab_}});
    fwd("aten::_log_softmax", "", {{T, vocab_}}, {{T, vocab_}});
    fwd("aten::nll_loss_forward", "", {{T, vocab_}, {T}}, {{}});
    // Backward: each forward op in reverse, Linears as their two GEMMs and bias sum.
    const std::vector<OpRecord> forward = ops_;
    for (auto it = forward.rbegin(); it != forward.rend(); ++it)
      backwardOf(*it);
    // The optimizer's list: parameters in registration order.
    std::vector<std::vector<int64_t>> params = {{vocab_, h}};
    const std::vector<std::vector<int64_t>> mlp =
        experts_ > 0 ? std::vector<std::vector<int64_t>>{{experts_, h},
                                                         {experts_},
                                                         {experts_, h, 4 * h},
                                                         {experts_, 4 * h, h}}
                     : std::vector<std::vector<int64_t>>{{4 * h, h}, {4 * h}, {h, 4 * h}, {h}};
    for (int b = 0; b < blocks_; ++b) {
      for (auto shape :
           std::vector<std::vector<int64_t>>{{h}, {h}, {3 * h, h}, {3 * h}, {h, h}, {h}, {h}, {h}})
        params.push_back(shape);
      params.insert(params.end(), mlp.begin(), mlp.end());
    }
    params.push_back({h});
    params.push_back({h});
    params.push_back({vocab_, h});
    OpRecord step;
    step.id = nextId_++;
    step.name = "aten::_foreach_add_";
    step.phase = Phase::Optimizer;
    step.args["num_tensors"] = static_cast<int64_t>(params.size());
    for (auto& shape : params) {
      step.inputs.push_back(TensorMeta{shape});
      trace.memory.parametersBytes += TensorMeta{shape}.bytes();
    }
    ops_.push_back(step);
    trace.memory.gradientsBytes = trace.memory.parametersBytes;
    trace.memory.optimizerStateBytes = 0;
    trace.ops = ops_;
    return trace;
  }

private:
  OpRecord& fwd(const std::string& name, const std::string& module,
                std::vector<std::vector<int64_t>> in, std::vector<std::vector<int64_t>> out) {
    OpRecord op;
    op.id = nextId_++;
    op.name = name;
    op.module = module;
    op.phase = Phase::Forward;
    op.forwardId = op.id;
    op.loc = {"/p/model.py", 10 + static_cast<int>(op.id % 50), ""};
    for (auto& s : in)
      op.inputs.push_back(TensorMeta{s});
    for (auto& s : out)
      op.outputs.push_back(TensorMeta{s});
    op.savedBytes = op.outputs.empty() || !op.outputs[0] ? 0 : op.outputs[0]->bytes();
    ops_.push_back(op);
    return ops_.back();
  }
  void linear(const std::string& module, int64_t in, int64_t out) {
    const int64_t T = batch_ * seq_;
    fwd("aten::addmm", module, {{out}, {T, in}, {in, out}}, {{T, out}});
  }
  // A grouped GEMM of the routed tokens [R, K] with the experts' weights [E, K, N], cut by
  // E offsets.
  void grouped(const std::string& module, std::vector<int64_t> tokens,
               std::vector<int64_t> weight) {
    const int64_t E = weight[0];
    fwd("aten::_grouped_mm", module, {tokens, weight, {E}}, {{tokens[0], weight[2]}})
        .inputs[2]
        ->dtype = ScalarType::Int32;
  }
  void bwd(const OpRecord& of, const std::string& name, std::vector<std::vector<int64_t>> in,
           std::vector<std::vector<int64_t>> out) {
    OpRecord op;
    op.id = nextId_++;
    op.name = name;
    op.module = of.module;
    op.phase = Phase::Backward;
    op.forwardId = of.id;
    op.loc = of.loc;
    for (auto& s : in)
      op.inputs.push_back(TensorMeta{s});
    for (auto& s : out)
      op.outputs.push_back(TensorMeta{s});
    ops_.push_back(op);
  }
  void backwardOf(const OpRecord& op) {
    const auto shape = [](const std::optional<TensorMeta>& t) { return t->shape; };
    if (op.name == "aten::addmm") {
      const int64_t T = op.inputs[1]->shape[0], K = op.inputs[2]->shape[0],
                    N = op.inputs[2]->shape[1];
      bwd(op, "aten::mm", {{T, N}, {N, K}}, {{T, K}});
      bwd(op, "aten::mm", {{N, T}, {T, K}}, {{N, K}});
      bwd(op, "aten::sum", {{T, N}}, {{N}});
    } else if (op.name == "aten::mm") { // the head
      const int64_t T = op.inputs[0]->shape[0], K = op.inputs[0]->shape[1],
                    N = op.inputs[1]->shape[1];
      bwd(op, "aten::mm", {{N, T}, {T, K}}, {{N, K}});
      bwd(op, "aten::mm", {{T, N}, {N, K}}, {{T, K}});
    } else if (op.name == "aten::_grouped_mm") { // input, then weight gradient
      const int64_t R = op.inputs[0]->shape[0], E = op.inputs[1]->shape[0],
                    K = op.inputs[1]->shape[1], N = op.inputs[1]->shape[2];
      bwd(op, "aten::_grouped_mm", {{R, N}, {E, N, K}, {E}}, {{R, K}});
      bwd(op, "aten::_grouped_mm", {{K, R}, {R, N}, {E}}, {{E, K, N}});
      for (size_t last = ops_.size() - 2; last < ops_.size(); ++last)
        ops_[last].inputs[2]->dtype = ScalarType::Int32;
    } else if (op.name == "aten::native_layer_norm") {
      bwd(op, "aten::native_layer_norm_backward", {shape(op.outputs[0]), shape(op.inputs[0])},
          {shape(op.inputs[0]), shape(op.inputs[1]), shape(op.inputs[2])});
    } else if (op.name == "aten::embedding") {
      bwd(op, "aten::embedding_dense_backward", {shape(op.outputs[0])}, {shape(op.inputs[0])});
    } else if (op.name == "aten::bmm") {
      bwd(op, "aten::bmm", {shape(op.outputs[0]), shape(op.inputs[1])}, {shape(op.inputs[0])});
      bwd(op, "aten::bmm", {shape(op.inputs[0]), shape(op.outputs[0])}, {shape(op.inputs[1])});
    } else if (op.name != "aten::view" && !op.outputs.empty()) {
      bwd(op, op.name + "_backward", {shape(op.outputs[0])}, {shape(op.inputs[0])});
    }
  }

  int64_t batch_;
  int64_t seq_, hidden_, heads_, vocab_, blocks_, experts_;
  int64_t nextId_ = 0;
  std::vector<OpRecord> ops_;
};

inline Trace syntheticTransformer(int64_t batch, TransformerShape shape = {}) {
  shape.batch = batch;
  return TransformerTraceBuilder(shape).build();
}

} // namespace wavecast
