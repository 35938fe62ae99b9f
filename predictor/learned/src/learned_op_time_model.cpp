#include "wavecast/learned/learned_op_time_model.h"

#include "wavecast/predictor/gpu_database.h"

#include <algorithm>
#include <memory>

namespace wavecast::learned {
namespace {

int64_t numel(const TensorMeta& t) {
  return t.numel();
}

bool isFloat32(const TensorMeta* t) {
  return t && t->dtype == ScalarType::Float32;
}

KernelShape rowsByLastDim(KernelShape (*make)(int64_t, int64_t), const TensorMeta& t) {
  const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
  return make(cols > 0 ? t.numel() / cols : 0, cols);
}

std::optional<KernelShape> gemmOf(const OpRecord& op) {
  const std::string& name = op.name;
  if (name == "aten::addmm") {
    const TensorMeta* a = op.input(1);
    const TensorMeta* b = op.input(2);
    if (!isFloat32(a) || !b || a->shape.size() != 2 || b->shape.size() != 2)
      return std::nullopt;
    return KernelShape::linear(a->shape[0], a->shape[1], b->shape[1]);
  }
  if (name == "aten::linear") {
    const TensorMeta* x = op.input(0);
    const TensorMeta* w = op.input(1);
    if (!isFloat32(x) || !w || x->shape.empty() || w->shape.size() != 2)
      return std::nullopt;
    return KernelShape::linear(numel(*x) / x->shape.back(), x->shape.back(), w->shape[0]);
  }
  if (name == "aten::mm" || name == "aten::bmm" || name == "aten::matmul") {
    const TensorMeta* a = op.input(0);
    const TensorMeta* b = op.input(1);
    if (!isFloat32(a) || !b || a->shape.size() < 2 || b->shape.size() < 2)
      return std::nullopt;
    const int64_t m = a->shape[a->shape.size() - 2], n = a->shape.back(), k = b->shape.back();
    if (b->shape.size() == 2)
      return KernelShape::linear(numel(*a) / n, n, k);
    return KernelShape::bmm(numel(*a) / (m * n), m, n, k);
  }
  return std::nullopt;
}

bool allEqual(const std::optional<std::vector<int64_t>>& list, int64_t value) {
  if (!list)
    return true;
  for (int64_t v : *list)
    if (v != value)
      return false;
  return true;
}

std::optional<KernelShape> convOf(const OpRecord& op) {
  if (op.name != "aten::convolution" && op.name != "aten::conv2d" &&
      op.name != "aten::cudnn_convolution")
    return std::nullopt;
  const TensorMeta* x = op.input(0);
  const TensorMeta* w = op.input(1);
  if (!isFloat32(x) || !w || x->shape.size() != 4 || w->shape.size() != 4)
    return std::nullopt;
  if (op.intArg("groups").value_or(1) != 1 || op.boolArg("transposed").value_or(false) ||
      !allEqual(op.intListArg("dilation"), 1))
    return std::nullopt;
  const auto stride = op.intListArg("stride").value_or(std::vector<int64_t>{1, 1});
  const auto padding = op.intListArg("padding").value_or(std::vector<int64_t>{0, 0});
  // NeuSight measured square images and kernels with uniform stride and padding.
  if (x->shape[2] != x->shape[3] || w->shape[2] != w->shape[3] || stride.empty() ||
      padding.empty() || !allEqual(stride, stride[0]) || !allEqual(padding, padding[0]))
    return std::nullopt;
  // The training data holds only 3x3 kernels with stride 1 and padding 1; the
  // network extrapolates wildly outside that (ResNet's 7x7/2 stem came out at
  // 1e100 ms), so other convolutions stay with the analytic model.
  if (w->shape[2] != 3 || stride[0] != 1 || padding[0] != 1)
    return std::nullopt;
  return KernelShape::conv2d(x->shape[0], x->shape[1], w->shape[0], w->shape[2], x->shape[2],
                             stride[0], padding[0]);
}

std::optional<ElementwiseOp> elementwiseOpOf(const OpRecord& op) {
  if (op.broadcastsAnInput())
    return std::nullopt; // NeuSight measured operands of one shape (vectorized kernels)
  const TensorMeta* b = op.input(1);
  const bool binary = b && b->numel() > 1;
  const std::string& n = op.name;
  if (n == "aten::add" || n == "aten::add_" || n == "aten::sub" || n == "aten::sub_")
    return binary ? ElementwiseOp::Add : ElementwiseOp::AddScalar;
  if (n == "aten::mul" || n == "aten::mul_")
    return binary ? ElementwiseOp::Mul : ElementwiseOp::MulScalar;
  if (n == "aten::div" || n == "aten::div_")
    return binary ? ElementwiseOp::Div : ElementwiseOp::DivScalar;
  if (n == "aten::pow")
    return binary ? ElementwiseOp::Pow : ElementwiseOp::PowScalar;
  if (n == "aten::relu" || n == "aten::relu_")
    return ElementwiseOp::Relu;
  if (n == "aten::gelu")
    return ElementwiseOp::Gelu;
  if (n == "aten::tanh")
    return ElementwiseOp::Tanh;
  return std::nullopt;
}

} // namespace

std::optional<KernelShape> kernelShapeOf(const OpRecord& op) {
  if (auto gemm = gemmOf(op))
    return gemm->valid() ? gemm : std::nullopt;
  if (auto conv = convOf(op))
    return conv->valid() ? conv : std::nullopt;
  const TensorMeta* x = op.input(0);
  if (!isFloat32(x))
    return std::nullopt;
  std::optional<KernelShape> shape;
  if (op.name == "aten::native_layer_norm" || op.name == "aten::layer_norm") {
    shape = rowsByLastDim(&KernelShape::layerNorm, *x);
  } else if (op.name == "aten::_softmax" || op.name == "aten::softmax") {
    const int64_t dim = op.intArg("dim").value_or(-1);
    if (dim != -1 && dim != int64_t(x->shape.size()) - 1)
      return std::nullopt; // the kernels measured normalise the last dimension
    shape = rowsByLastDim(&KernelShape::softmax, *x);
  } else if (auto ew = elementwiseOpOf(op)) {
    const TensorMeta* out = op.output(0);
    const TensorMeta& t = out ? *out : *x;
    const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
    shape = KernelShape::elementwise(*ew, cols > 0 ? t.numel() / cols : 0, cols);
  }
  if (shape && !shape->valid())
    return std::nullopt;
  return shape;
}

LearnedOpTimeModel::LearnedOpTimeModel(LearnedModels models) : models_(std::move(models)) {
  for (const std::string& stem : models_.trainingGpus())
    measuredGpus_.insert(normalizedGpuName(stem));
}

bool LearnedOpTimeModel::measuredOn(const DeviceSpec& gpu) const {
  auto listed = [&](const std::string& name) {
    return measuredGpus_.count(normalizedGpuName(name)) > 0;
  };
  return listed(gpu.id) || listed(gpu.name) ||
         std::any_of(gpu.aliases.begin(), gpu.aliases.end(), listed);
}

std::shared_ptr<LearnedOpTimeModel> LearnedOpTimeModel::open(const std::string& weightsDir) {
  return std::make_shared<LearnedOpTimeModel>(LearnedModels::open(weightsDir));
}

std::vector<std::optional<double>>
LearnedOpTimeModel::predictMs(const std::vector<OpTimeQuery>& queries) const {
  std::vector<KernelQuery> kernels;
  std::vector<size_t> owner;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (!queries[i].op || !queries[i].gpu)
      continue;
    const GpuFeatures gpu = GpuFeatures::fromDeviceSpec(*queries[i].gpu);
    const auto shape = kernelShapeOf(*queries[i].op);
    if (!shape || !gpu.valid())
      continue;
    // The predictor wants kernel time; a kernel bounded below the labels' timing
    // floor was learned from the timer, so it is left to the analytic model.
    if (rooflineCost(*shape, gpu).boundMs() >= models_.timingFloorMs(shape->family)) {
      kernels.push_back({*shape, gpu});
      owner.push_back(i);
    }
  }
  const auto answers = models_.predictMs(kernels);
  std::vector<std::optional<double>> out(queries.size());
  for (size_t k = 0; k < answers.size(); ++k)
    out[owner[k]] = answers[k];
  return out;
}

} // namespace wavecast::learned
