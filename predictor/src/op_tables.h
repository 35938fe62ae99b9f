// The op-name tables of the cost model: which ATen ops are views, elementwise, copies
// or reductions, and what an elementwise op costs per element. An op added here gets
// its family's formula (family_costs.h).
#pragma once

#include <string>
#include <unordered_set>

namespace wavecast::op_tables {

// An op's name without its namespace: "aten::add_" -> "add_", "torchvision::nms" -> "nms".
std::string stemOf(const std::string& name);

// Views and allocations: no kernel, no memory traffic.
const std::unordered_set<std::string>& metadataOps();
// FLOPs per output element of elementwise ops (transcendentals cost more); default 1.
double elementwiseFlops(const std::string& stem);
const std::unordered_set<std::string>& elementwiseOps();
// Data movement: copies, concatenation, gathers and scatters, padding.
const std::unordered_set<std::string>& copyOps();
const std::unordered_set<std::string>& reductionOps();

// Families whose ops are named by pattern rather than listed one by one.
bool isConvolution(const std::string& stem);
bool isConvolutionBackward(const std::string& stem);
bool isGemm(const std::string& stem);
// A mixture of experts' grouped GEMM: torch._grouped_mm, transformers' own loop.
bool isGroupedGemm(const std::string& stem);
// transformers' loop's backward: both gradients of a grouped GEMM in one op.
bool isGroupedGemmBackward(const std::string& stem);
bool isAttention(const std::string& stem);
bool isNormalization(const std::string& stem);
bool isPooling(const std::string& stem);
bool isLoss(const std::string& stem);
bool isRecurrent(const std::string& stem);
bool isEmbedding(const std::string& stem);
bool isFft(const std::string& stem);

} // namespace wavecast::op_tables
