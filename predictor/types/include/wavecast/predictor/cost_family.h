// The predictor's small value enums: which formula prices an op (docs/predictor.md's
// table), the attention kernel it runs, why its cost is unusual, what stops a kernel
// launching; text only at the edges.
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
  Fft, // cuFFT's transforms (torch.fft)
  Metadata,
  Collective,  // an NCCL collective on the communication stream (collectives.h)
  HostTransfer // a copy between host memory and the GPU over its host link (PCIe)
};

// Which way a CostFamily::HostTransfer copy crosses the host link.
enum class TransferDirection {
  ToDevice, // a host tensor copied to the GPU (`.to("cuda")`)
  ToHost,   // a GPU tensor copied to host memory (`.cpu()`, `.tolist()`)
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
  case CostFamily::Fft:
    return "fft";
  case CostFamily::Metadata:
    return "metadata";
  case CostFamily::Collective:
    return "collective";
  case CostFamily::HostTransfer:
    return "host_transfer";
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
  WaitsForGpu,               // torch.cuda.synchronize(): no kernel, the CPU waits
  ConvWithoutShapes,         // counted as a copy of its tensors
  ConvBackwardWithoutShapes, // no grad_output/input/weight shapes
  MatrixOperandsMissing,     // counted by its tensors' bytes only
  AttentionWithoutShapes,    // no query/key/value shapes
  RecurrentWithoutHidden,    // counted by its tensors' bytes
  RecurrentSerial,           // per-step GEMMs are serial: small batches are latency bound
  SerialOverFrames,          // CTC's kernels walk the frames one step at a time
  OddLeadingDimension,       // a 16-bit GEMM on cuBLAS's element-wise loading kernels
  EvenExpertGroups,          // a grouped GEMM's rows taken as spread evenly over its groups
  GeneratedKernel,           // torch.compile: a kernel Inductor generates for its fused group
  FusedIntoKernel,           // torch.compile: fused into another op's generated kernel
};

// What stops a kernel from launching on an SM as recorded (occupancy.h): the limit it
// exceeds, what the kernel asks and what the SM allows.
enum class LaunchLimit {
  NoThreads,            // a block of no threads
  ThreadsPerBlock,      // threads per block
  RegistersPerThread,   // registers per thread
  SharedMemoryPerBlock, // bytes of shared memory per block
  RegistersPerSm,       // registers of one block against the SM's register file
};
constexpr const char* toString(LaunchLimit limit) {
  switch (limit) {
  case LaunchLimit::NoThreads:
    return "no_threads";
  case LaunchLimit::ThreadsPerBlock:
    return "threads_per_block";
  case LaunchLimit::RegistersPerThread:
    return "registers_per_thread";
  case LaunchLimit::SharedMemoryPerBlock:
    return "shared_memory_per_block";
  case LaunchLimit::RegistersPerSm:
    return "registers_per_sm";
  }
  return "unknown";
}
struct LaunchProblem {
  LaunchLimit limit = LaunchLimit::NoThreads;
  int requested = 0;
  int allowed = 0;
};

} // namespace wavecast
