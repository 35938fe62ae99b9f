// From one torch.fx label row to the kernels wavecast predicts for it: forward,
// backward (the backward formulas as kernels) and weight-gradient accumulation.
#pragma once

#include "wavecast/eval/labels.h"
#include "wavecast/learned/kernel_shape.h"

#include <string>
#include <vector>

namespace wavecast::eval {

// Families the accuracy report is broken down by.
enum class OpFamily { Gemm, Elementwise, Norm, Softmax, Other, Metadata };
inline constexpr int kOpFamilyCount = 6;
const char* toString(OpFamily family);

struct MappedRow {
  bool mapped = false;
  OpFamily family = OpFamily::Other;
  std::string op; // wavecast op name, e.g. "aten::addmm"; empty for metadata
  std::vector<learned::KernelShape> forward;
  std::vector<learned::KernelShape> backward;   // only for training labels
  std::vector<learned::KernelShape> accumulate; // only for training labels
  std::string reason;                           // why a row is unmapped
};

// Metadata rows (views, sizes, getattr, Python-scalar arithmetic) map with no
// kernels: they run on the host and overlap with the GPU in the measured totals.
MappedRow mapFxRow(const FxRow& row, bool training);

} // namespace wavecast::eval
