// Time of a cuBLAS-style GEMM on tensor cores (bf16, fp16, TF32) from its shape and the
// GPU's spec sheet, with parameters fitted to measured GEMMs (data/tensor_core_gemm.json,
// bench/tensor_core_gemm/; docs/predictor.md, "Tensor-core GEMMs").
#pragma once

#include "wavecast/predictor/op_cost.h"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace wavecast {

class TensorCoreGemmModelError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// An output tile a GEMM kernel may use and the share of an SM's peak it reaches.
struct GemmTile {
  double rows = 0;
  double cols = 0;
  double efficiency = 1;
};

struct TensorCoreGemmModel {
  // Share of the dense tensor peak a tile's main loop reaches.
  double efficiency = 0;
  // Per output tile: pipeline fill and epilogue, as that many more steps of K.
  double tilePrologueK = 0;
  // Per kernel, whatever its size.
  double kernelFixedUs = 0;
  // Shortest K a split-K slice gets when the output tiles cannot fill the SMs.
  double splitKMinSliceK = 0;
  std::vector<GemmTile> tiles; // the kernel picks the fastest
  // What a GEMM with an odd leading dimension reaches on cuBLAS's element-wise loading
  // ("align1") kernels, in FLOP per SM per clock; 0: not modelled. Per architecture
  // (compute capability major) where measured there, else the default.
  double unalignedFlopsPerSmClock = 0;
  std::map<int, double> unalignedFlopsPerSmClockByMajor;
  std::string source; // the file it was read from

  // Reads a file of format "wavecast-tensor-core-gemm"; throws TensorCoreGemmModelError
  // naming the file and the field.
  static TensorCoreGemmModel fromFile(const std::string& path);
};

struct TensorCoreGemmTime {
  double computeMs = 0;         // tiles in waves over the SMs, split-K reduction included
  double memoryMs = 0;          // the op's bytes at `bandwidth`
  double occupancy = 1;         // share of the SMs the chosen tiling keeps busy
  bool unalignedKernel = false; // priced as an element-wise loading kernel
  double timeMs = 0;            // fixed time + max(compute, memory)
};

// The GPU as a GEMM sees it.
struct GemmDevice {
  double peakFlops = 0; // dense tensor peak for the GEMM's dtype, FLOP/s
  double bandwidth = 0; // DRAM bandwidth achieved, B/s
  int sms = 0;
  double smClockHz = 0; // boost clock
  int computeCapabilityMajor = 0;
};

// `gemm` on `device`; `bytes` is the op's DRAM traffic.
TensorCoreGemmTime tensorCoreGemmTime(const GemmShape& gemm, double bytes, const GemmDevice& device,
                                      const TensorCoreGemmModel& model);

} // namespace wavecast
