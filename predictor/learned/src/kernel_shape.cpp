#include "wavecast/learned/kernel_shape.h"

#include "wavecast/predictor/device_spec.h"

#include <array>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace wavecast::learned {
namespace {

constexpr double kFloatBytes = 4.0;
// Output tile edges of the cuBLAS/cuDNN SGEMM kernels NeuSight's data launches.
constexpr std::array<int64_t, 3> kGemmTileEdges = {32, 64, 128};
// Elements one block of PyTorch's vectorised elementwise kernel covers (128 threads x 4).
// PyTorch's softmax keeps a row in one warp's registers (one read of the input)
// up to this length; longer rows take the block kernel, which reads them again.
constexpr int64_t kLongestWarpSoftmaxRow = 1024;
constexpr double kElementsPerElementwiseBlock = 512.0;

double logPositive(double value) {
  return std::log(std::max(value, 1e-12));
}

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int64_t convOutputSize(const KernelShape& s) {
  return (s.inputSize + 2 * s.padding - s.kernelSize) / s.stride + 1;
}

// The GEMM a kernel computes: batch x (rows x reduce) . (reduce x cols).
struct GemmView {
  double batch, rows, reduce, cols;
};

GemmView gemmView(const KernelShape& s) {
  switch (s.family) {
  case KernelFamily::Linear:
    return {1.0, double(s.m), double(s.n), double(s.k)};
  case KernelFamily::Bmm:
    return {double(s.batch), double(s.m), double(s.n), double(s.k)};
  case KernelFamily::Conv2d: {
    const double out = double(convOutputSize(s));
    return {1.0, double(s.batch) * out * out, double(s.inChannels * s.kernelSize * s.kernelSize),
            double(s.outChannels)};
  }
  default:
    throw std::logic_error("gemmView: not a GEMM family");
  }
}

void appendGpuFeatures(std::vector<float>& f, const GpuFeatures& gpu) {
  f.push_back(float(logPositive(gpu.smCount)));
  f.push_back(float(logPositive(gpu.clockMHz / 1000.0)));
  f.push_back(float(logPositive(gpu.fp32Gflops / gpu.memoryBandwidthGBs))); // ridge point
}

// Compute-bound families see both roofline times; the L2 size is left out: the
// training GPUs span 2-6 MiB and the A100's 40 MiB would be pure extrapolation.
void appendRooflineFeatures(std::vector<float>& f, const RooflineCost& cost) {
  f.push_back(float(logPositive(cost.computeMs)));
  f.push_back(float(logPositive(cost.memoryMs)));
  f.push_back(float(logPositive(cost.computeMs / cost.memoryMs)));
}

// Waves of `blocks` over the SMs and the fraction of the last wave that is busy.
void appendWaveFeatures(std::vector<float>& f, double blocks, const GpuFeatures& gpu) {
  const double waves = blocks / gpu.smCount;
  f.push_back(float(logPositive(waves)));
  f.push_back(float(waves / std::ceil(waves)));
}

} // namespace

const char* toString(KernelFamily family) {
  switch (family) {
  case KernelFamily::Linear:
    return "linear";
  case KernelFamily::Bmm:
    return "bmm";
  case KernelFamily::Conv2d:
    return "conv2d";
  case KernelFamily::Elementwise:
    return "elementwise";
  case KernelFamily::LayerNorm:
    return "layernorm";
  case KernelFamily::Softmax:
    return "softmax";
  }
  return "?";
}

std::optional<KernelFamily> kernelFamilyFromString(const std::string& text) {
  for (KernelFamily family : allKernelFamilies())
    if (text == toString(family))
      return family;
  return std::nullopt;
}

std::vector<KernelFamily> allKernelFamilies() {
  return {KernelFamily::Linear,      KernelFamily::Bmm,       KernelFamily::Conv2d,
          KernelFamily::Elementwise, KernelFamily::LayerNorm, KernelFamily::Softmax};
}

const char* folderName(ElementwiseOp op) {
  static constexpr std::array<const char*, kElementwiseOpCount> names = {
      "add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "relu", "gelu", "tanh"};
  return names[size_t(op)];
}

std::optional<ElementwiseOp> elementwiseOpFromFolder(const std::string& name) {
  for (int i = 0; i < kElementwiseOpCount; ++i)
    if (name == folderName(ElementwiseOp(i)))
      return ElementwiseOp(i);
  return std::nullopt;
}

int inputTensorCount(ElementwiseOp op) {
  switch (op) {
  case ElementwiseOp::Add:
  case ElementwiseOp::Mul:
  case ElementwiseOp::Div:
  case ElementwiseOp::Pow:
    return 2;
  default:
    return 1;
  }
}

KernelShape KernelShape::linear(int64_t m, int64_t n, int64_t k) {
  KernelShape s;
  s.family = KernelFamily::Linear;
  s.m = m;
  s.n = n;
  s.k = k;
  return s;
}

KernelShape KernelShape::bmm(int64_t batch, int64_t m, int64_t n, int64_t k) {
  KernelShape s = linear(m, n, k);
  s.family = KernelFamily::Bmm;
  s.batch = batch;
  return s;
}

KernelShape KernelShape::conv2d(int64_t batch, int64_t inChannels, int64_t outChannels,
                                int64_t kernelSize, int64_t inputSize, int64_t stride,
                                int64_t padding) {
  KernelShape s;
  s.family = KernelFamily::Conv2d;
  s.batch = batch;
  s.inChannels = inChannels;
  s.outChannels = outChannels;
  s.kernelSize = kernelSize;
  s.inputSize = inputSize;
  s.stride = stride;
  s.padding = padding;
  return s;
}

KernelShape KernelShape::elementwise(ElementwiseOp op, int64_t rows, int64_t cols) {
  KernelShape s;
  s.family = KernelFamily::Elementwise;
  s.op = op;
  s.rows = rows;
  s.cols = cols;
  return s;
}

KernelShape KernelShape::layerNorm(int64_t rows, int64_t cols) {
  KernelShape s = elementwise(ElementwiseOp::Add, rows, cols);
  s.family = KernelFamily::LayerNorm;
  return s;
}

KernelShape KernelShape::softmax(int64_t rows, int64_t cols) {
  KernelShape s = layerNorm(rows, cols);
  s.family = KernelFamily::Softmax;
  return s;
}

bool KernelShape::valid() const {
  switch (family) {
  case KernelFamily::Linear:
  case KernelFamily::Bmm:
    return batch > 0 && m > 0 && n > 0 && k > 0;
  case KernelFamily::Conv2d:
    return batch > 0 && inChannels > 0 && outChannels > 0 && kernelSize > 0 && inputSize > 0 &&
           stride > 0 && padding >= 0 && convOutputSize(*this) > 0;
  default:
    return rows > 0 && cols > 0;
  }
}

std::string KernelShape::describe() const {
  std::ostringstream out;
  out << toString(family);
  switch (family) {
  case KernelFamily::Linear:
    out << " m=" << m << " n=" << n << " k=" << k;
    break;
  case KernelFamily::Bmm:
    out << " b=" << batch << " m=" << m << " n=" << n << " k=" << k;
    break;
  case KernelFamily::Conv2d:
    out << " b=" << batch << " cin=" << inChannels << " cout=" << outChannels << " k=" << kernelSize
        << " hw=" << inputSize << " s=" << stride << " p=" << padding;
    break;
  case KernelFamily::Elementwise:
    out << ' ' << folderName(op) << ' ' << rows << 'x' << cols;
    break;
  default:
    out << ' ' << rows << 'x' << cols;
  }
  return out.str();
}

GpuFeatures GpuFeatures::fromDeviceSpec(const DeviceSpec& spec) {
  GpuFeatures g;
  g.smCount = spec.smCount;
  g.clockMHz = spec.boostClockMHz;
  g.fp32Gflops = spec.fp32Tflops * 1000.0;
  g.memoryBandwidthGBs = spec.memoryBandwidthGBs;
  g.l2CacheMiB = spec.l2CacheMiB;
  return g;
}

bool GpuFeatures::valid() const {
  return smCount > 0 && clockMHz > 0 && fp32Gflops > 0 && memoryBandwidthGBs > 0 && l2CacheMiB > 0;
}

RooflineCost rooflineCost(const KernelShape& s, const GpuFeatures& gpu) {
  RooflineCost cost;
  switch (s.family) {
  case KernelFamily::Linear:
  case KernelFamily::Bmm:
  case KernelFamily::Conv2d: {
    const GemmView g = gemmView(s);
    cost.flops = 2.0 * g.batch * g.rows * g.reduce * g.cols;
    if (s.family == KernelFamily::Conv2d) {
      const double out = double(convOutputSize(s));
      cost.bytes =
          kFloatBytes * (double(s.batch) * s.inChannels * s.inputSize * s.inputSize +
                         double(s.outChannels) * s.inChannels * s.kernelSize * s.kernelSize +
                         double(s.batch) * s.outChannels * out * out);
    } else {
      const double weightBatch = s.family == KernelFamily::Linear ? 1.0 : g.batch;
      cost.bytes = kFloatBytes * (g.batch * g.rows * g.reduce + weightBatch * g.reduce * g.cols +
                                  g.batch * g.rows * g.cols);
    }
    break;
  }
  case KernelFamily::Elementwise: {
    const double n = double(s.rows) * double(s.cols);
    cost.flops = n;
    cost.bytes = kFloatBytes * n * (inputTensorCount(s.op) + 1);
    break;
  }
  case KernelFamily::LayerNorm:
  case KernelFamily::Softmax: {
    const double n = double(s.rows) * double(s.cols);
    cost.flops = 5.0 * n;
    cost.bytes = kFloatBytes * 2.0 * n;
    break;
  }
  }
  cost.computeMs = cost.flops / (gpu.fp32Gflops * 1e9) * 1e3;
  cost.memoryMs = cost.bytes / (gpu.memoryBandwidthGBs * 1e9) * 1e3;
  return cost;
}

int featureCount(KernelFamily family) {
  switch (family) {
  case KernelFamily::Linear:
  case KernelFamily::Bmm:
    return 4 + 3 + 2 * int(kGemmTileEdges.size()) + 3;
  case KernelFamily::Conv2d:
    return 4 + 3 + 2 * int(kGemmTileEdges.size()) + 3 + 3;
  case KernelFamily::Elementwise:
    return 1 + 1 + 2 + kElementwiseOpCount;
  case KernelFamily::LayerNorm:
    return 2 + 1 + 2;
  case KernelFamily::Softmax:
    return 2 + 1 + 2 + 1;
  }
  return 0;
}

std::vector<float> kernelFeatures(const KernelShape& s, const GpuFeatures& gpu) {
  std::vector<float> f;
  f.reserve(size_t(featureCount(s.family)));
  const RooflineCost cost = rooflineCost(s, gpu);
  switch (s.family) {
  case KernelFamily::Linear:
  case KernelFamily::Bmm:
  case KernelFamily::Conv2d: {
    const GemmView g = gemmView(s);
    for (double extent : {g.batch, g.rows, g.reduce, g.cols})
      f.push_back(float(logPositive(extent)));
    appendRooflineFeatures(f, cost);
    for (int64_t edge : kGemmTileEdges) {
      const double tiles =
          g.batch * double(ceilDiv(int64_t(g.rows), edge)) * double(ceilDiv(int64_t(g.cols), edge));
      appendWaveFeatures(f, tiles, gpu);
    }
    appendGpuFeatures(f, gpu);
    if (s.family == KernelFamily::Conv2d) {
      f.push_back(float(logPositive(double(s.kernelSize))));
      f.push_back(float(logPositive(double(s.stride))));
      f.push_back(float(logPositive(double(s.inputSize))));
    }
    break;
  }
  case KernelFamily::Elementwise: {
    const double n = double(s.rows) * double(s.cols);
    f.push_back(float(logPositive(n)));
    f.push_back(float(logPositive(cost.memoryMs)));
    appendWaveFeatures(f, std::ceil(n / kElementsPerElementwiseBlock), gpu);
    for (int i = 0; i < kElementwiseOpCount; ++i)
      f.push_back(int(s.op) == i ? 1.0f : 0.0f);
    break;
  }
  case KernelFamily::LayerNorm:
  case KernelFamily::Softmax:
    f.push_back(float(logPositive(double(s.rows))));
    f.push_back(float(logPositive(double(s.cols))));
    f.push_back(float(logPositive(cost.memoryMs)));
    appendWaveFeatures(f, double(s.rows), gpu);
    if (s.family == KernelFamily::Softmax)
      f.push_back(s.cols <= kLongestWarpSoftmaxRow ? 1.0f : 0.0f);
    break;
  }
  return f;
}

} // namespace wavecast::learned
