// The formula of each cost family (docs/predictor.md's table): `stem` is the ATen
// name without namespace or in-place suffix. estimateOpCost picks the family.
#pragma once

#include "wavecast/predictor/op_cost.h"

#include <string>

namespace wavecast::family_costs {

// Matrix work (cuBLAS, cuDNN, fused attention): convolutions forward and backward,
// GEMMs, scaled-dot-product attention and recurrent layers.
OpCost convolution(const OpRecord& op);
OpCost convolutionBackward(const OpRecord& op);
OpCost gemm(const OpRecord& op, const std::string& stem);
OpCost attention(const OpRecord& op, const std::string& stem);
OpCost recurrent(const OpRecord& op, const std::string& stem);

// Vector work (CUDA cores, bound by DRAM traffic): elementwise ops, copies,
// reductions, softmax, norms, embeddings, pooling, losses and multi-tensor optimizers.
OpCost elementwise(const OpRecord& op, const std::string& stem, bool inplace);
OpCost copyLike(const OpRecord& op, const std::string& stem);
OpCost reduction(const OpRecord& op, const std::string& stem);
OpCost softmax(const OpRecord& op, const std::string& stem);
OpCost normalization(const OpRecord& op, const std::string& stem);
OpCost embedding(const OpRecord& op, const std::string& stem);
OpCost pooling(const OpRecord& op, const std::string& stem);
OpCost loss(const OpRecord& op, const std::string& stem);
OpCost optimizerForeach(const OpRecord& op, const std::string& stem, bool inplace);

} // namespace wavecast::family_costs
