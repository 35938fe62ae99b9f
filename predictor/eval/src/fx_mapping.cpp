#include "wavecast/eval/fx_mapping.h"

#include <functional>
#include <regex>
#include <set>

namespace wavecast::eval {
namespace {

using learned::ElementwiseOp;
using learned::KernelShape;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// A tensor as the rows x cols matrix the row-wise kernels see (cols = last dim).
struct Matrix {
  int64_t rows = 1, cols = 1;
};

Matrix asMatrix(const std::vector<int64_t>& shape) {
  if (shape.empty())
    return {};
  const int64_t cols = std::max<int64_t>(shape.back(), 1);
  return {std::max<int64_t>(numel(shape) / cols, 1), cols};
}

KernelShape elementwise(ElementwiseOp op, const std::vector<int64_t>& shape) {
  const Matrix m = asMatrix(shape);
  return KernelShape::elementwise(op, m.rows, m.cols);
}

// "<built-in method addmm of type object at 0x..>" -> "addmm",
// "<function softmax at 0x..>" -> "softmax", "<built-in function add>" -> "add".
std::string callableName(const std::string& target) {
  static const std::regex pattern(
      R"(^<(?:built-in function|built-in method|function|class) '?([A-Za-z_0-9.]+))");
  std::smatch match;
  if (std::regex_search(target, match, pattern)) {
    const std::string name = match[1];
    return name.substr(name.rfind('.') + 1);
  }
  return target;
}

// Operands that stream from memory like the output does; a broadcast mask
// ([8,1,1,512] added to [8,16,512,512]) stays in cache and reads like a scalar.
int tensorOperands(const FxRow& row) {
  const int64_t out = numel(row.outputShape);
  int count = 0;
  for (const auto& shape : row.inputShapes)
    if (numel(shape) > 1 && 2 * numel(shape) >= out)
      ++count;
  return count;
}

MappedRow metadata() {
  MappedRow m;
  m.mapped = true;
  m.family = OpFamily::Metadata;
  return m;
}

MappedRow unmapped(const std::string& reason) {
  MappedRow m;
  m.reason = reason;
  return m;
}

MappedRow kernels(OpFamily family, std::string op, std::vector<KernelShape> forward,
                  std::vector<KernelShape> backward = {},
                  std::vector<KernelShape> accumulate = {}) {
  MappedRow m;
  m.mapped = true;
  m.family = family;
  m.op = std::move(op);
  m.forward = std::move(forward);
  m.backward = std::move(backward);
  m.accumulate = std::move(accumulate);
  return m;
}

// y = x W^T + b over x of m x n and W of k x n. Backward: dX = dY W (m x k . k x n)
// and dW = dY^T X (k x m . m x n); accumulation adds dW into W's gradient.
MappedRow linearRow(const std::string& op, int64_t m, int64_t n, int64_t k, bool weightIsParam) {
  std::vector<KernelShape> acc;
  if (weightIsParam)
    acc.push_back(KernelShape::elementwise(ElementwiseOp::Add, n, k));
  return kernels(OpFamily::Gemm, op, {KernelShape::linear(m, n, k)},
                 {KernelShape::linear(m, k, n), KernelShape::linear(k, m, n)}, acc);
}

MappedRow matmulRow(const FxRow& row) {
  if (row.inputShapes.size() < 2 || row.inputShapes[0].size() < 2 || row.inputShapes[1].size() < 2)
    return unmapped("matmul of vectors is not modelled");
  const auto& a = row.inputShapes[0];
  const auto& b = row.inputShapes[1];
  const int64_t m = a[a.size() - 2], n = a.back(), k = b.back();
  if (b.size() == 2)
    return linearRow("aten::mm", numel(a) / n, n, k, false);
  const int64_t batch = numel(a) / (m * n);
  return kernels(OpFamily::Gemm, "aten::bmm", {KernelShape::bmm(batch, m, n, k)},
                 {KernelShape::bmm(batch, m, k, n), KernelShape::bmm(batch, n, m, k)});
}

// Binary arithmetic with a tensor or a scalar second operand.
MappedRow arithmeticRow(const FxRow& row, const std::string& name, bool training) {
  if (numel(row.outputShape) <= 1)
    return metadata(); // Python scalars (sizes, indices)
  const bool binary = tensorOperands(row) >= 2;
  const auto& out = row.outputShape;
  auto ew = [&](ElementwiseOp op) { return elementwise(op, out); };
  std::vector<KernelShape> backward;
  if (name == "add" || name == "sub")
    return kernels(OpFamily::Elementwise, "aten::" + name,
                   {ew(binary ? ElementwiseOp::Add : ElementwiseOp::AddScalar)});
  if (name == "mul") {
    if (training)
      backward = binary ? std::vector{ew(ElementwiseOp::Mul), ew(ElementwiseOp::Mul)}
                        : std::vector{ew(ElementwiseOp::MulScalar)};
    return kernels(OpFamily::Elementwise, "aten::mul",
                   {ew(binary ? ElementwiseOp::Mul : ElementwiseOp::MulScalar)}, backward);
  }
  if (name == "truediv") {
    if (training)
      backward = binary ? std::vector{ew(ElementwiseOp::Div), ew(ElementwiseOp::Div)}
                        : std::vector{ew(ElementwiseOp::DivScalar)};
    return kernels(OpFamily::Elementwise, "aten::div",
                   {ew(binary ? ElementwiseOp::Div : ElementwiseOp::DivScalar)}, backward);
  }
  if (name == "pow") {
    if (training)
      backward = {ew(ElementwiseOp::PowScalar), ew(ElementwiseOp::Mul)};
    return kernels(OpFamily::Elementwise, "aten::pow",
                   {ew(binary ? ElementwiseOp::Pow : ElementwiseOp::PowScalar)}, backward);
  }
  // Comparisons read like an add and carry no gradient.
  return kernels(OpFamily::Elementwise, "aten::" + name,
                 {ew(binary ? ElementwiseOp::Add : ElementwiseOp::AddScalar)});
}

// Activation y = f(x); backward reads x (or y) and dy: one binary pass.
MappedRow activationRow(const FxRow& row, ElementwiseOp op, const std::string& name,
                        bool training) {
  std::vector<KernelShape> backward;
  if (training)
    backward = {elementwise(ElementwiseOp::Mul, row.outputShape)};
  return kernels(OpFamily::Elementwise, "aten::" + name, {elementwise(op, row.outputShape)},
                 backward);
}

// Training dropout draws a mask and multiplies; at inference it is the identity.
MappedRow dropoutRow(const FxRow& row, bool training) {
  if (!training)
    return kernels(OpFamily::Elementwise, "aten::dropout", {});
  const auto mul = elementwise(ElementwiseOp::Mul, row.outputShape);
  return kernels(OpFamily::Elementwise, "aten::dropout", {mul}, {mul});
}

// A gather of rows; backward scatters the gradient back (weight size unknown here).
MappedRow embeddingRow(const FxRow& row, bool training) {
  std::vector<KernelShape> backward;
  if (training)
    backward = {elementwise(ElementwiseOp::Add, row.outputShape)};
  return kernels(OpFamily::Other, "aten::embedding",
                 {elementwise(ElementwiseOp::MulScalar, row.outputShape)}, backward);
}

MappedRow layerNormRow(const FxRow& row, bool training) {
  if (row.inputShapes.empty())
    return unmapped("LayerNorm without an input shape");
  const Matrix m = asMatrix(row.inputShapes[0]);
  const auto norm = KernelShape::layerNorm(m.rows, m.cols);
  std::vector<KernelShape> backward, acc;
  if (training) {
    backward = {norm, norm}; // input gradient, then the gamma/beta reduction
    acc = {KernelShape::elementwise(ElementwiseOp::Add, 2, m.cols)};
  }
  return kernels(OpFamily::Norm, "aten::native_layer_norm", {norm}, backward, acc);
}

MappedRow softmaxRow(const FxRow& row, bool training) {
  if (row.inputShapes.empty())
    return unmapped("softmax without an input shape");
  const Matrix m = asMatrix(row.inputShapes[0]);
  std::vector<KernelShape> backward;
  if (training)
    backward = {KernelShape::softmax(m.rows, m.cols),
                KernelShape::elementwise(ElementwiseOp::Mul, m.rows, m.cols)};
  return kernels(OpFamily::Softmax, "aten::_softmax", {KernelShape::softmax(m.rows, m.cols)},
                 backward);
}

// Creation, casts and scans: one memory-bound pass over the output.
MappedRow fillRow(const FxRow& row, const std::string& name) {
  return kernels(OpFamily::Other, "aten::" + name,
                 {elementwise(ElementwiseOp::MulScalar, row.outputShape)});
}

MappedRow callFunction(const FxRow& row, bool training) {
  const std::string name = callableName(row.target);
  static const std::set<std::string> hostOnly = {"getitem", "getattr", "finfo"};
  static const std::set<std::string> arithmetic = {"add", "sub", "mul", "truediv", "pow",
                                                   "eq",  "ne",  "gt",  "lt",      "max"};
  if (hostOnly.count(name))
    return metadata();
  if (name == "addmm") {
    if (row.inputShapes.size() != 3 || row.inputShapes[1].size() != 2)
      return unmapped("addmm with unexpected operands");
    const auto& x = row.inputShapes[1];
    return linearRow("aten::addmm", x[0], x[1], row.inputShapes[2].back(), true);
  }
  if (name == "matmul" || name == "bmm")
    return matmulRow(row);
  if (name == "softmax")
    return softmaxRow(row, training);
  if (name == "gelu")
    return activationRow(row, ElementwiseOp::Gelu, "gelu", training);
  if (name == "tanh")
    return activationRow(row, ElementwiseOp::Tanh, "tanh", training);
  if (name == "relu")
    return activationRow(row, ElementwiseOp::Relu, "relu", training);
  if (name == "dropout")
    return dropoutRow(row, training);
  if (name == "embedding")
    return embeddingRow(row, training);
  if (name == "where") // a broadcast mask stays in cache, like arithmetic's operands
    return kernels(
        OpFamily::Elementwise, "aten::where",
        {elementwise(tensorOperands(row) >= 2 ? ElementwiseOp::Add : ElementwiseOp::AddScalar,
                     row.outputShape)});
  if (arithmetic.count(name))
    return arithmeticRow(row, name, training);
  if (name == "ones" || name == "full" || name == "zeros" || name == "arange" || name == "tensor" ||
      name == "cumsum")
    return fillRow(row, name);
  return unmapped("no mapping for function '" + name + "'");
}

MappedRow callMethod(const FxRow& row) {
  static const std::set<std::string> views = {"size",    "dim",    "view",    "permute",
                                              "reshape", "expand", "split",   "transpose",
                                              "to",      "type",   "type_as", "unsqueeze"};
  const std::string& name = row.target;
  if (views.count(name))
    return metadata();
  if (name == "contiguous")
    return kernels(OpFamily::Elementwise, "aten::clone",
                   {elementwise(ElementwiseOp::MulScalar, row.outputShape)});
  if (name == "masked_fill" || name == "masked_fill_")
    return kernels(OpFamily::Elementwise, "aten::masked_fill",
                   {elementwise(ElementwiseOp::Add, row.outputShape)});
  if (name == "long" || name == "bool")
    return fillRow(row, "_to_copy");
  return unmapped("no mapping for method '" + name + "'");
}

MappedRow callModule(const FxRow& row, bool training) {
  const std::string& cls = row.moduleClass;
  if (cls == "Linear") {
    if (row.inputShapes.empty() || row.inputShapes[0].empty() || row.outputShape.empty())
      return unmapped("Linear without shapes");
    const auto& x = row.inputShapes[0];
    return linearRow("aten::linear", numel(x) / x.back(), x.back(), row.outputShape.back(), true);
  }
  if (cls == "LayerNorm")
    return layerNormRow(row, training);
  if (cls == "Dropout")
    return dropoutRow(row, training);
  if (cls == "Embedding")
    return embeddingRow(row, training);
  if (cls == "ReLU")
    return activationRow(row, ElementwiseOp::Relu, "relu", training);
  if (cls == "Tanh")
    return activationRow(row, ElementwiseOp::Tanh, "tanh", training);
  if (cls == "GELU")
    return activationRow(row, ElementwiseOp::Gelu, "gelu", training);
  return unmapped("no mapping for module '" + cls + "'");
}

} // namespace

const char* toString(OpFamily family) {
  switch (family) {
  case OpFamily::Gemm:
    return "GEMM";
  case OpFamily::Elementwise:
    return "elementwise";
  case OpFamily::Norm:
    return "norm";
  case OpFamily::Softmax:
    return "softmax";
  case OpFamily::Other:
    return "other";
  case OpFamily::Metadata:
    return "metadata";
  }
  return "?";
}

MappedRow mapFxRow(const FxRow& row, bool training) {
  if (row.kind == "placeholder" || row.kind == "get_attr" || row.kind == "output")
    return metadata();
  MappedRow mapped;
  if (row.kind == "call_function")
    mapped = callFunction(row, training);
  else if (row.kind == "call_method")
    mapped = callMethod(row);
  else if (row.kind == "call_module")
    mapped = callModule(row, training);
  else
    return unmapped("unknown fx node kind '" + row.kind + "'");
  if (!training) {
    mapped.backward.clear();
    mapped.accumulate.clear();
  }
  return mapped;
}

} // namespace wavecast::eval
