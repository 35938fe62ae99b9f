// Shape arithmetic shared by the cost formulas (op_cost.cpp and the family files):
// element counts and bytes of traced tensors (negative dimensions count as 0), and
// name matching.
#pragma once

#include "wavecast/trace.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace wavecast::cost_shapes {

inline double numel(const TensorMeta* t) {
  if (!t)
    return 0;
  double n = 1;
  for (const auto d : t->shape)
    n *= d < 0 ? 0 : static_cast<double>(d);
  return n;
}

inline double bytesOf(const TensorMeta* t) {
  return t ? numel(t) * t->elementSize() : 0;
}

inline double dim(const TensorMeta* t, int index) {
  if (!t || t->shape.empty())
    return 0;
  const int rank = static_cast<int>(t->shape.size());
  const int i = index < 0 ? rank + index : index;
  if (i < 0 || i >= rank)
    return 1;
  return std::max<double>(0, static_cast<double>(t->shape[i]));
}

inline int rank(const TensorMeta* t) {
  return t ? static_cast<int>(t->shape.size()) : 0;
}

// What an op reads: each input tensor once, however often it is passed (x * x).
inline double inputBytes(const OpRecord& op) {
  double total = 0;
  for (const auto& t : op.inputs)
    total += t && t->sameAs < 0 ? bytesOf(&*t) : 0;
  return total;
}

inline double outputBytes(const OpRecord& op) {
  double total = 0;
  for (const auto& t : op.outputs)
    total += t ? bytesOf(&*t) : 0;
  return total;
}

inline double largestNumel(const std::vector<std::optional<TensorMeta>>& tensors) {
  double largest = 0;
  for (const auto& t : tensors)
    largest = std::max(largest, t ? numel(&*t) : 0.0);
  return largest;
}

// The dtype arithmetic runs in: that of the first floating-point tensor.
inline ScalarType computeDtype(const OpRecord& op) {
  for (const auto* list : {&op.inputs, &op.outputs})
    for (const auto& t : *list)
      if (t && isFloatingPoint(t->dtype))
        return t->dtype;
  return ScalarType::Float32;
}

inline bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

} // namespace wavecast::cost_shapes
