#include "compiled_memory.h"

#include "inductor_ops.h"
#include "op_tables.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace wavecast::compiled {
namespace {

// Ops Inductor generates code for without decomposing them into ops of the partitioner's
// allowlist (torch/_functorch/partitioners.py, get_default_op_list): pooling (max pooling
// keeps its offsets), concatenation, scatters, scans and sorts. Their results are saved
// where backward needs them, never recomputed, and they are not fusible.
bool loweredAsIs(const std::string& name) {
  static const std::unordered_set<std::string> kStems = {"cat",
                                                         "_cat",
                                                         "stack",
                                                         "scatter",
                                                         "scatter_add",
                                                         "scatter_reduce",
                                                         "index_put",
                                                         "_index_put_impl",
                                                         "index_add",
                                                         "index_copy",
                                                         "masked_scatter",
                                                         "cumsum",
                                                         "cumprod",
                                                         "sort",
                                                         "topk",
                                                         "embedding_dense_backward",
                                                         "_embedding_bag",
                                                         "_embedding_bag_backward"};
  std::string stem = op_tables::stemOf(name);
  if (stem.size() > 1 && stem.back() == '_' && stem[stem.size() - 2] != '_')
    stem.pop_back(); // in place
  return op_tables::isPooling(stem) || kStems.count(stem) > 0;
}

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;

// Dinic's maximum flow; a minimum cut is what the source still reaches once it is pushed.
class FlowNetwork {
public:
  explicit FlowNetwork(size_t vertices) : adjacent_(vertices) {}

  void add(size_t from, size_t to, int64_t capacity) {
    adjacent_[from].push_back(edges_.size());
    edges_.push_back({to, capacity});
    adjacent_[to].push_back(edges_.size());
    edges_.push_back({from, 0});
  }

  // Per vertex, whether it is on the source's side of a minimum cut.
  std::vector<bool> minimumCut(size_t source, size_t sink) {
    while (level(source, sink)) {
      next_.assign(adjacent_.size(), 0);
      while (push(source, sink, kUnbounded) > 0) {
      }
    }
    std::vector<bool> side(adjacent_.size());
    for (size_t v = 0; v < side.size(); ++v)
      side[v] = level_[v] >= 0;
    return side;
  }

private:
  struct Edge {
    size_t to;
    int64_t capacity;
  };

  bool level(size_t source, size_t sink) {
    level_.assign(adjacent_.size(), -1);
    std::queue<size_t> queue;
    level_[source] = 0;
    queue.push(source);
    while (!queue.empty()) {
      const size_t v = queue.front();
      queue.pop();
      for (const size_t e : adjacent_[v])
        if (edges_[e].capacity > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[v] + 1;
          queue.push(edges_[e].to);
        }
    }
    return level_[sink] >= 0;
  }

  int64_t push(size_t v, size_t sink, int64_t limit) {
    if (v == sink)
      return limit;
    for (size_t& i = next_[v]; i < adjacent_[v].size(); ++i) {
      Edge& edge = edges_[adjacent_[v][i]];
      if (edge.capacity <= 0 || level_[edge.to] != level_[v] + 1)
        continue;
      const int64_t pushed = push(edge.to, sink, std::min(limit, edge.capacity));
      if (pushed > 0) {
        edge.capacity -= pushed;
        edges_[adjacent_[v][i] ^ 1].capacity += pushed;
        return pushed;
      }
    }
    return 0;
  }

  std::vector<std::vector<size_t>> adjacent_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

// A forward op's output: what the partitioner may save, or recompute in backward.
struct Value {
  size_t op = 0;
  int64_t bytes = 0;
  std::vector<size_t> forwardReaders; // ops in trace order, each once
  int64_t lastBackwardReader = -1;    // -1: backward does not read it
  bool readUnfusedInBackward = false; // by a library call or an op lowered as it is
};

class Partition {
public:
  Partition(const Trace& trace, const std::vector<OpCost>& costs)
      : trace_(trace), costs_(costs), count_(std::min(trace.ops.size(), costs.size())),
        outputs_(count_) {}

  std::optional<SavedForBackward> run() {
    collectValues();
    if (std::none_of(values_.begin(), values_.end(),
                     [this](const Value& value) { return isRequired(value); }))
      return std::nullopt; // backward reads nothing a compiled op made
    banFarApartUses();
    const std::vector<bool> saved = cut();
    return timeline(saved);
  }

private:
  bool forward(size_t i) const { return trace_.ops[i].phase == Phase::Forward; }
  bool view(size_t i) const { return costs_[i].metadataOnly() && !costs_[i].fused; }
  bool compiled(size_t i) const { return trace_.ops[i].compiled.has_value() && !view(i); }
  // An op the partitioner may recompute: one Inductor generates code for whose
  // decomposition is in torch's allowlist, not a random draw (get_default_op_list's recomputable
  // ops; ban_recompute_not_in_allowlist).
  bool recomputable(size_t i) const {
    const OpRecord& op = trace_.ops[i];
    return compiled(i) && !op.onHost && generated(costs_[i].family) && !loweredAsIs(op.name) &&
           !drawsRandom(op);
  }
  // torch's is_fusible: recomputable, or a random draw.
  bool fusible(size_t i) const {
    return recomputable(i) || (compiled(i) && drawsRandom(trace_.ops[i]));
  }

  void collectValues() {
    std::unordered_map<int64_t, size_t> indexOf;
    for (size_t i = 0; i < count_; ++i)
      indexOf.emplace(trace_.ops[i].id, i);
    for (size_t i = 0; i < count_; ++i) {
      const OpRecord& op = trace_.ops[i];
      if (!forward(i) || view(i))
        continue;
      for (size_t k = 0; k < op.outputs.size(); ++k)
        if (op.outputs[k]) {
          outputs_[i].emplace_back(k, values_.size());
          Value value;
          value.op = i;
          value.bytes = op.outputs[k]->bytes();
          values_.push_back(std::move(value));
        }
    }
    for (size_t j = 0; j < count_; ++j)
      for (const auto& input : trace_.ops[j].inputs) {
        if (!input || !input->source)
          continue;
        const auto it = indexOf.find(input->source->op);
        if (it == indexOf.end())
          continue;
        Value* value = find(it->second, input->source->output);
        if (!value)
          continue;
        if (forward(j)) {
          if (value->forwardReaders.empty() || value->forwardReaders.back() != j)
            value->forwardReaders.push_back(j);
        } else {
          value->lastBackwardReader =
              std::max<int64_t>(value->lastBackwardReader, static_cast<int64_t>(j));
          value->readUnfusedInBackward = value->readUnfusedInBackward || !fusible(j);
        }
      }
  }

  Value* find(size_t op, size_t output) {
    for (const auto& [k, v] : outputs_[op])
      if (k == output)
        return &values_[v];
    return nullptr;
  }

  // Values of compiled ops that backward reads: what eager autograd keeps.
  bool isRequired(const Value& value) const {
    return compiled(value.op) && value.lastBackwardReader >= 0;
  }
  // A value used both before and after a library call is not recomputed for its later,
  // fusible users (torch/_functorch/partitioners.py, ban_if_used_far_apart): a residual
  // stream is saved, not rebuilt from the start of the model.
  void banFarApartUses() {
    farApart_.assign(count_, false);
    for (const Value& value : values_) {
      if (!fusible(value.op))
        continue;
      std::vector<size_t> readers;
      for (const size_t j : value.forwardReaders)
        if (compiled(j))
          readers.push_back(j);
      if (readers.empty())
        continue;
      const size_t limit = readers.back();
      const size_t firstLibraryCall = firstUnfusible(readers, limit);
      for (const size_t j : readers)
        if (j > firstLibraryCall && fusible(j))
          farApart_[j] = true;
    }
  }

  // The first op, in trace order up to `limit`, that is not fusible among `starts` and what
  // fusible ops lead to from them.
  size_t firstUnfusible(const std::vector<size_t>& starts, size_t limit) {
    std::priority_queue<size_t, std::vector<size_t>, std::greater<>> next(starts.begin(),
                                                                          starts.end());
    std::vector<bool> seen(count_, false);
    for (const size_t j : starts)
      seen[j] = true;
    while (!next.empty()) {
      const size_t j = next.top();
      next.pop();
      if (!fusible(j))
        return j;
      for (const auto& [k, v] : outputs_[j])
        for (const size_t u : values_[v].forwardReaders)
          if (u <= limit && compiled(u) && !seen[u]) {
            seen[u] = true;
            next.push(u);
          }
    }
    return limit;
  }

  // Why the partitioner would not recompute `value` in backward (should_ban_recomputation):
  // a library call or an op Inductor lowers as it is, a random draw, a reduction (output a
  // quarter of its inputs or less), one that an op other than a fusible one reads in
  // backward (it is materialized there anyway), one used far apart.
  bool banned(const Value& value) const {
    const OpRecord& op = trace_.ops[value.op];
    if (!recomputable(value.op) || value.readUnfusedInBackward || farApart_[value.op])
      return true;
    int64_t inputBytes = 0;
    for (const auto& input : op.inputs)
      if (input)
        inputBytes += input->bytes();
    return value.bytes * 4 < inputBytes;
  }

  // What saving `value` costs the partitioner: its bytes, twice for one that a generated
  // kernel would otherwise never write (get_node_weight); nothing for a value of the
  // compiled region's inputs (parameters, the batch, eager ops' results), live anyway.
  int64_t weight(const Value& value) const {
    if (!compiled(value.op))
      return 0;
    bool written = !fusible(value.op) || value.forwardReaders.empty();
    for (const size_t j : value.forwardReaders)
      written = written || !fusible(j);
    return written ? value.bytes : 2 * value.bytes;
  }

  // The values saved: a minimum cut between what cannot be recomputed and what backward
  // reads, each value an edge of its weight (solve_min_cut).
  std::vector<bool> cut() {
    constexpr size_t source = 0, sink = 1;
    const auto in = [](size_t v) { return 2 + 2 * v; };
    const auto out = [](size_t v) { return 3 + 2 * v; };
    FlowNetwork network(2 + 2 * values_.size());
    for (size_t v = 0; v < values_.size(); ++v) {
      const Value& value = values_[v];
      if (!compiled(value.op) || banned(value))
        network.add(source, in(v), kUnbounded);
      if (isRequired(value))
        network.add(out(v), sink, kUnbounded);
      network.add(in(v), out(v), weight(value));
      for (const size_t j : value.forwardReaders)
        if (compiled(j))
          for (const auto& [k, w] : outputs_[j])
            network.add(out(v), in(w), kUnbounded);
    }
    const std::vector<bool> side = network.minimumCut(source, sink);
    std::vector<bool> saved(values_.size(), false);
    for (size_t v = 0; v < values_.size(); ++v)
      saved[v] = compiled(values_[v].op) && side[in(v)] && !side[out(v)];
    return saved;
  }

  // The last backward op that reads what a saved value is kept for: itself, and the values
  // recomputed from it through generated ops (up to other saved values).
  int64_t keptUntil(size_t v, const std::vector<bool>& saved) const {
    int64_t until = values_[v].lastBackwardReader;
    std::vector<bool> seen(values_.size(), false);
    std::vector<size_t> stack{v};
    seen[v] = true;
    while (!stack.empty()) {
      const Value& value = values_[stack.back()];
      stack.pop_back();
      until = std::max(until, value.lastBackwardReader);
      for (const size_t j : value.forwardReaders)
        if (fusible(j))
          for (const auto& [k, w] : outputs_[j])
            if (!seen[w] && !saved[w]) {
              seen[w] = true;
              stack.push_back(w);
            }
    }
    return until;
  }

  SavedForBackward timeline(const std::vector<bool>& saved) const {
    SavedForBackward out;
    std::vector<int64_t> change(count_ + 1, 0);
    const auto hold = [&](size_t from, int64_t until, int64_t bytes) {
      if (until < static_cast<int64_t>(from))
        return;
      change[from] += bytes;
      change[static_cast<size_t>(until) + 1] -= bytes;
    };
    for (size_t v = 0; v < values_.size(); ++v) {
      const Value& value = values_[v];
      if (isRequired(value)) {
        out.eagerBytes += value.bytes;
        hold(value.op, value.lastBackwardReader, value.bytes);
      }
      if (saved[v]) {
        out.compiledBytes += value.bytes;
        hold(value.op, keptUntil(v, saved), -value.bytes);
      }
    }
    out.heldBeyondCompiled.resize(count_);
    int64_t held = 0;
    for (size_t i = 0; i < count_; ++i)
      out.heldBeyondCompiled[i] = held += change[i];
    return out;
  }

  const Trace& trace_;
  const std::vector<OpCost>& costs_;
  const size_t count_;
  std::vector<Value> values_;
  // Per op, (output index, value index) of its outputs that are values.
  std::vector<std::vector<std::pair<size_t, size_t>>> outputs_;
  std::vector<bool> farApart_;
};

} // namespace

std::optional<SavedForBackward> savedForBackward(const Trace& trace,
                                                 const std::vector<OpCost>& costs) {
  if (!hasCompiledDataflow(trace))
    return std::nullopt;
  return Partition(trace, costs).run();
}

} // namespace wavecast::compiled
