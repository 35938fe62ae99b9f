// What Inductor does with an op of a compiled region, shared by the fusion of its kernels
// and the partition of what it saves for backward.
#pragma once

#include "wavecast/predictor/op_cost.h"
#include "wavecast/trace.h"

namespace wavecast::compiled {

// What Inductor generates Triton code for; the other families are library calls it makes
// as they are (extern kernels: cuBLAS, cuDNN, attention, NCCL, cuFFT).
bool generated(CostFamily family);

// Whether the op draws random numbers (a dropout in training, bernoulli, rand...).
bool drawsRandom(const OpRecord& op);

// Whether the trace has compiled ops whose inputs say which op wrote them: what fusing
// and partitioning a compiled region need.
bool hasCompiledDataflow(const Trace& trace);

} // namespace wavecast::compiled
