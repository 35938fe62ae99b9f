// What a compiled region keeps for backward: AOTAutograd's min-cut partition of the traced
// forward, against eager autograd's saved tensors (predictor/src/compiled_memory.h, through
// estimateMemory).
#include "compiled_trace.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/predictor.h"

#include <gtest/gtest.h>

namespace wavecast {
namespace {

const GpuDatabase& db() {
  static const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  return database;
}

constexpr int64_t kRows = 1024, kWidth = 1024;
constexpr int64_t kElements = kRows * kWidth;

using testing::from;
using testing::tensor;

// An op of `phase`: the tests below write it before the tensors.
OpRecord record(int64_t id, std::string name, Phase phase,
                std::vector<std::optional<TensorMeta>> inputs,
                std::vector<std::optional<TensorMeta>> outputs, bool compiled) {
  return testing::record(id, std::move(name), std::move(inputs), std::move(outputs), compiled,
                         phase);
}

// Per op, the bytes live once it ran: what it made, less what died (`made`, per op).
void setLive(Trace& trace, const std::vector<int64_t>& made) {
  int64_t live = 0;
  int64_t peak = 0;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    live += made[i];
    trace.ops[i].liveBytes = live;
    if (live > peak) {
      peak = live;
      trace.memory.peakOpId = trace.ops[i].id;
      trace.memory.peakPhase = trace.ops[i].phase;
    }
  }
  trace.memory.peakLiveBytes = peak;
}

// Attention's probabilities as a GPT-2 layer computes them: the scores' GEMM, autocast's
// cast to float32, softmax, dropout, the cast back for the next GEMM; then the backward ops
// that read what eager autograd kept: the cast probabilities (the GEMM's backward), the
// dropout mask and softmax's output.
Trace attention(ScalarType matrices, bool compiled) {
  const std::vector<int64_t> scores{kRows, kWidth};
  const ScalarType f32 = ScalarType::Float32;
  const Phase fw = Phase::Forward, bw = Phase::Backward;
  Trace trace;
  trace.ops = {
      record(0, "aten::bmm", fw, {tensor(scores, matrices), tensor(scores, matrices)},
             {tensor(scores, matrices)}, compiled),
      record(1, "aten::_to_copy", fw, {tensor(scores, matrices, from(0))}, {tensor(scores, f32)},
             compiled),
      record(2, "aten::_softmax", fw, {tensor(scores, f32, from(1))}, {tensor(scores, f32)},
             compiled),
      record(3, "aten::native_dropout", fw, {tensor(scores, f32, from(2))},
             {tensor(scores, f32), tensor(scores, ScalarType::Bool)}, compiled),
      record(4, "aten::_to_copy", fw, {tensor(scores, f32, from(3))}, {tensor(scores, matrices)},
             compiled),
      record(5, "aten::bmm", fw, {tensor(scores, matrices, from(4)), tensor(scores, matrices)},
             {tensor(scores, matrices)}, compiled),
      record(6, "aten::bmm", fw, {tensor(scores, matrices, from(4)), tensor(scores, matrices)},
             {tensor(scores, matrices)}, compiled),
      record(7, "aten::native_dropout_backward", bw,
             {tensor(scores, f32), tensor(scores, ScalarType::Bool, from(3, 1))},
             {tensor(scores, f32)}, compiled),
      record(8, "aten::_softmax_backward_data", bw,
             {tensor(scores, f32, from(7)), tensor(scores, f32, from(2))}, {tensor(scores, f32)},
             compiled),
  };
  trace.ops[6].phase = bw;
  trace.ops[3].args["train"] = true;
  const int64_t half = kElements * elementSize(matrices), full = 4 * kElements;
  // Eager keeps softmax's output, the mask and the cast probabilities until backward.
  trace.memory.activationsSavedBytes = full + kElements + half;
  // What each op makes; nothing dies before the last op here, where the tensors peak.
  setLive(trace, {half, full, full, full + kElements, half, half, half, full, full});
  return trace;
}

TEST(CompiledMemory, Bf16AttentionSavesTheScoresNotSoftmaxOutput) {
  const DeviceSpec& h100 = *db().find("H100");
  const Trace eagerTrace = attention(ScalarType::BFloat16, false);
  const Trace compiledTrace = attention(ScalarType::BFloat16, true);
  const MemoryEstimate eager = estimateMemory(eagerTrace, h100, PredictorOptions{});
  const MemoryEstimate compiled = estimateMemory(compiledTrace, h100, PredictorOptions{});
  // Softmax's output (float32) is recomputed in backward from the scores (bfloat16), which
  // the GEMM wrote anyway; the mask (a random draw) and the probabilities the next GEMM's
  // backward reads are saved as eagerly.
  const int64_t saving = 4 * kElements - 2 * kElements;
  EXPECT_EQ(eager.activationsSavedBytes - compiled.activationsSavedBytes, saving);
  EXPECT_EQ(eager.tensorBytes() - compiled.tensorBytes(), saving);
  EXPECT_EQ(compiled.peakOpId, eager.peakOpId);
}

TEST(CompiledMemory, Float32AttentionKeepsAsMuch) {
  // In float32 the scores are as large as softmax's output: nothing to gain.
  const DeviceSpec& h100 = *db().find("H100");
  const MemoryEstimate eager =
      estimateMemory(attention(ScalarType::Float32, false), h100, PredictorOptions{});
  const MemoryEstimate compiled =
      estimateMemory(attention(ScalarType::Float32, true), h100, PredictorOptions{});
  EXPECT_EQ(compiled.activationsSavedBytes, eager.activationsSavedBytes);
  EXPECT_EQ(compiled.tensorBytes(), eager.tensorBytes());
}

TEST(CompiledMemory, WithoutDataflowEagerFiguresStand) {
  Trace trace = attention(ScalarType::BFloat16, true);
  for (OpRecord& op : trace.ops)
    for (auto& input : op.inputs)
      if (input)
        input->source.reset();
  const DeviceSpec& h100 = *db().find("H100");
  const MemoryEstimate eager =
      estimateMemory(attention(ScalarType::BFloat16, false), h100, PredictorOptions{});
  const MemoryEstimate compiled = estimateMemory(trace, h100, PredictorOptions{});
  EXPECT_EQ(compiled.activationsSavedBytes, eager.activationsSavedBytes);
  EXPECT_EQ(compiled.tensorBytes(), eager.tensorBytes());
}

// Two pre-norm residual steps under bf16 autocast: r1 = x + h0, n1 = norm(r1), h1 = mm(n1),
// r2 = r1 + h1, n2 = norm(r2), h2 = mm(n2); backward reads both residuals (the norms'
// backward), their statistics, and both norm outputs (the GEMMs' backward).
Trace residualStream() {
  const std::vector<int64_t> act{kRows, kWidth}, stats{kRows, 1}, weight{kWidth, kWidth};
  const ScalarType f32 = ScalarType::Float32, b16 = ScalarType::BFloat16;
  const Phase bw = Phase::Backward;
  auto norm = [&](int64_t id, int64_t input) {
    OpRecord op =
        record(id, "aten::native_layer_norm", Phase::Forward,
               {tensor(act, f32, from(input)), tensor({kWidth}, f32), tensor({kWidth}, f32)},
               {tensor(act, b16), tensor(stats, f32), tensor(stats, f32)}, true);
    op.args["normalized_shape"] = std::vector<int64_t>{kWidth};
    return op;
  };
  // The backward of norm op `forward` over `residual`: it reads both and the statistics.
  auto normBackward = [&](int64_t id, int64_t residual, int64_t forward) {
    OpRecord op =
        record(id, "aten::native_layer_norm_backward", bw,
               {tensor(act, f32), tensor(act, f32, from(residual)),
                tensor(stats, f32, from(forward, 1)), tensor(stats, f32, from(forward, 2))},
               {tensor(act, f32)}, true);
    op.args["normalized_shape"] = std::vector<int64_t>{kWidth};
    return op;
  };
  Trace trace;
  trace.ops = {
      record(0, "aten::mm", Phase::Forward, {tensor(act, b16), tensor(weight, b16)},
             {tensor(act, b16)}, true),
      record(1, "aten::add", Phase::Forward, {tensor(act, f32), tensor(act, b16, from(0))},
             {tensor(act, f32)}, true),
      norm(2, 1),
      record(3, "aten::mm", Phase::Forward, {tensor(act, b16, from(2)), tensor(weight, b16)},
             {tensor(act, b16)}, true),
      record(4, "aten::add", Phase::Forward, {tensor(act, f32, from(1)), tensor(act, b16, from(3))},
             {tensor(act, f32)}, true),
      norm(5, 4),
      record(6, "aten::mm", Phase::Forward, {tensor(act, b16, from(5)), tensor(weight, b16)},
             {tensor(act, b16)}, true),
      record(7, "aten::mm", bw, {tensor(act, b16, from(5)), tensor(act, b16)},
             {tensor(weight, b16)}, true),
      normBackward(8, 4, 5),
      record(9, "aten::mm", bw, {tensor(act, b16, from(2)), tensor(act, b16)},
             {tensor(weight, b16)}, true),
      normBackward(10, 1, 2),
  };
  const int64_t a32 = 4 * kElements, a16 = 2 * kElements, s = 4 * kRows;
  trace.memory.activationsSavedBytes = 2 * a32 + 2 * a16 + 4 * s;
  setLive(trace, {a16, a32, a16 + 2 * s, a16, a32, a16 + 2 * s, a16, a16, a32, a16, a32});
  return trace;
}

TEST(CompiledMemory, AResidualUsedPastALibraryCallIsSavedNotRebuilt) {
  const DeviceSpec& h100 = *db().find("H100");
  const MemoryEstimate compiled = estimateMemory(residualStream(), h100, PredictorOptions{});
  // The first residual is rebuilt from the batch and its projection (bfloat16, the GEMM
  // wrote it anyway). The second is read by the norm before a GEMM and by nothing after it
  // here, but the add that makes it reads the first residual past that GEMM: torch bans
  // recomputing such an add (ban_if_used_far_apart), so it is saved, not rebuilt from the
  // later projection.
  const int64_t a32 = 4 * kElements, a16 = 2 * kElements, s = 4 * kRows;
  EXPECT_EQ(compiled.activationsSavedBytes, a16 /* h0 */ + a32 /* r2 */ + 2 * a16 + 4 * s);
}

// A pooling op is lowered by Inductor as it is, outside the partitioner's allowlist: what
// its backward reads is saved, not recomputed, even where that would be cheaper.
TEST(CompiledMemory, WhatAMaxPoolsBackwardReadsIsSaved) {
  const std::vector<int64_t> image{8, 64, 32, 32}, pooled{8, 64, 16, 16};
  const ScalarType f32 = ScalarType::Float32, b16 = ScalarType::BFloat16;
  const Phase fw = Phase::Forward, bw = Phase::Backward;
  Trace trace;
  trace.ops = {
      record(0, "aten::convolution", fw, {tensor(image, b16), tensor({64, 64, 3, 3}, b16)},
             {tensor(image, b16)}, true),
      record(1, "aten::_to_copy", fw, {tensor(image, b16, from(0))}, {tensor(image, f32)}, true),
      record(2, "aten::relu", fw, {tensor(image, f32, from(1))}, {tensor(image, f32)}, true),
      record(3, "aten::max_pool2d_with_indices", fw, {tensor(image, f32, from(2))},
             {tensor(pooled, f32), tensor(pooled, ScalarType::Int64)}, true),
      record(4, "aten::max_pool2d_with_indices_backward", bw,
             {tensor(pooled, f32), tensor(image, f32, from(2)),
              tensor(pooled, ScalarType::Int64, from(3, 1))},
             {tensor(image, f32)}, true),
      record(5, "aten::threshold_backward", bw,
             {tensor(image, f32, from(4)), tensor(image, f32, from(2))}, {tensor(image, f32)},
             true),
  };
  const int64_t relu = 4 * 8 * 64 * 32 * 32, indices = 8 * 8 * 64 * 16 * 16;
  trace.memory.activationsSavedBytes = relu + indices;
  setLive(trace, {relu / 2, relu, relu, relu / 4 + indices, relu, relu});
  const MemoryEstimate compiled = estimateMemory(trace, *db().find("H100"), PredictorOptions{});
  // Without the pooling's own lowering, the cut would keep the convolution's bfloat16 output
  // (half the bytes) and rebuild the float32 ReLU from it.
  EXPECT_EQ(compiled.activationsSavedBytes, relu + indices);
}

} // namespace
} // namespace wavecast
