// Which formula prices an op (docs/predictor.md's table); text only at the edges.
#pragma once

namespace wavecast {

enum class CostFamily {
  Conv,
  Gemm,
  Attention,
  Norm,
  Elementwise,
  Reduction,
  Softmax,
  Embedding,
  Pooling,
  Loss,
  Rnn,
  Optimizer,
  Copy,
  Metadata
};

// "conv", "gemm", ... as the results JSON names them (docs/results-json.md, `family`).
constexpr const char* toString(CostFamily family) {
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

// The SDPA kernel an attention op runs: the one torch picked where it was traced, or
// the one a target GPU runs instead.
enum class AttentionBackend { None, Flash, Efficient, Cudnn, Math };

// "flash", "efficient", ... as the results JSON names them (docs/results-json.md).
constexpr const char* toString(AttentionBackend backend) {
  switch (backend) {
  case AttentionBackend::None:
    return "none";
  case AttentionBackend::Flash:
    return "flash";
  case AttentionBackend::Efficient:
    return "efficient";
  case AttentionBackend::Cudnn:
    return "cudnn";
  case AttentionBackend::Math:
    return "math";
  }
  return "unknown";
}

// Why an op's cost is approximate, zero or unusual (the results JSON's op `note`);
// presentation.h writes its sentence.
enum class CostNote {
  None,
  EmbeddingLike,             // priced as embedding / embedding_dense_backward
  NoFormula,                 // no formula of its own: priced as its closest family
  ViewOrAllocation,          // no kernel, no memory traffic
  NegativeDimension,         // a tensor shape the profiler should never emit
  OnHost,                    // runs on the CPU: no GPU kernel
  EmptyTensors,              // a zero-sized dimension: no work
  DeviceToHostScalar,        // .item(): synchronises the GPU
  ConvWithoutShapes,         // counted as a copy of its tensors
  ConvBackwardWithoutShapes, // no grad_output/input/weight shapes
  MatrixOperandsMissing,     // counted by its tensors' bytes only
  AttentionWithoutShapes,    // no query/key/value shapes
  RecurrentWithoutHidden,    // counted by its tensors' bytes
  RecurrentSerial,           // per-step GEMMs are serial: small batches are latency bound
};

} // namespace wavecast
