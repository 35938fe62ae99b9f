// The single-kernel operations the learned models cover, the spec-sheet view
// of a GPU they see, and the features both are turned into. No torch here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wavecast {

struct DeviceSpec;

namespace learned {

// One learned model per family (elementwise ops share one, told apart by their op).
enum class KernelFamily { Linear, Bmm, Conv2d, Elementwise, LayerNorm, Softmax };
inline constexpr int kKernelFamilyCount = 6;
const char* toString(KernelFamily family);
std::optional<KernelFamily> kernelFamilyFromString(const std::string& text);
std::vector<KernelFamily> allKernelFamilies();

// NeuSight's elementwise kernels; the `...Scalar` variants take a scalar operand.
enum class ElementwiseOp {
  Add,
  AddScalar,
  Mul,
  MulScalar,
  Div,
  DivScalar,
  Pow,
  PowScalar,
  Relu,
  Gelu,
  Tanh
};
inline constexpr int kElementwiseOpCount = 11;
// The kernels/<name> folder of the op: "add", "addu", ..., "tanh".
const char* folderName(ElementwiseOp op);
std::optional<ElementwiseOp> elementwiseOpFromFolder(const std::string& name);
// Tensors read by the op (1 for unary and scalar ops, 2 for binary ones).
int inputTensorCount(ElementwiseOp op);

// Shape of one FP32 kernel. Field meaning per family (NeuSight's conventions):
// Linear: input m x n, weight n -> k (batch = 1); Bmm: (batch x m x n)(batch x n x k);
// Conv2d: batch, inChannels, outChannels, kernelSize, inputSize, stride, padding;
// Elementwise, LayerNorm, Softmax: a rows x cols tensor (normalised over cols).
struct KernelShape {
  KernelFamily family = KernelFamily::Linear;
  ElementwiseOp op = ElementwiseOp::Add;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  int64_t inChannels = 0, outChannels = 0, kernelSize = 0, inputSize = 0, stride = 1, padding = 0;
  int64_t rows = 1, cols = 1;

  static KernelShape linear(int64_t m, int64_t n, int64_t k);
  static KernelShape bmm(int64_t batch, int64_t m, int64_t n, int64_t k);
  static KernelShape conv2d(int64_t batch, int64_t inChannels, int64_t outChannels,
                            int64_t kernelSize, int64_t inputSize, int64_t stride, int64_t padding);
  static KernelShape elementwise(ElementwiseOp op, int64_t rows, int64_t cols);
  static KernelShape layerNorm(int64_t rows, int64_t cols);
  static KernelShape softmax(int64_t rows, int64_t cols);

  // False for empty or negative extents (and convolutions with no output).
  bool valid() const;
  std::string describe() const;
};

// What a model may know of a GPU: its spec sheet, never its name.
struct GpuFeatures {
  int smCount = 0;
  double clockMHz = 0;
  double fp32Gflops = 0;
  double memoryBandwidthGBs = 0;
  double l2CacheMiB = 0;

  static GpuFeatures fromDeviceSpec(const DeviceSpec& spec);
  bool valid() const;
};

struct RooflineCost {
  double flops = 0;
  double bytes = 0;
  double computeMs = 0;
  double memoryMs = 0;
  double boundMs() const { return computeMs > memoryMs ? computeMs : memoryMs; }
};

// FP32 FLOPs and DRAM bytes of the kernel (each tensor read or written once)
// against the GPU's peaks.
RooflineCost rooflineCost(const KernelShape& shape, const GpuFeatures& gpu);

// Model inputs, fixed length per family. GEMMs and convolutions: the op's
// extents, both roofline times, output tiles as waves over the SMs, SM count,
// clock and ridge point. Memory-bound families: extents, the DRAM time and
// blocks as waves over the SMs only (softmax also whether a row fits PyTorch's
// one-warp kernel), so that they extrapolate to GPUs far from
// the training ones (whose compute peaks say nothing about a memory-bound op).
std::vector<float> kernelFeatures(const KernelShape& shape, const GpuFeatures& gpu);
int featureCount(KernelFamily family);

} // namespace learned
} // namespace wavecast
