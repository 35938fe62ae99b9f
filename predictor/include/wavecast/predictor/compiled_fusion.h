// torch.compile's regions as Inductor runs them (docs/predictor.md, "Compiled regions"):
// the pointwise, normalization and reduction ops between two library calls fused into
// generated kernels that read what comes from outside and write what is used outside, and
// unaligned GEMMs padded where pad_mm pads them.
#pragma once

#include "wavecast/predictor/device_spec.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/trace.h"

#include <optional>
#include <vector>

namespace wavecast::compiled {

// Rewrites the costs of the ops Inductor fuses, per fused group: the group's kernels are
// carried by its reductions (or its first op), each with the DRAM traffic of the members
// nearest it; the other members launch nothing. Library calls (GEMMs, convolutions,
// attention, collectives) keep their costs. Needs the trace's dataflow (inputs' `from`);
// compiled ops without it keep their eager costs.
void fuseRegions(const Trace& trace, std::vector<OpCost>& costs);

// An op of a compiled region as Inductor runs it instead of as traced:
// - PaddedGemm: an unaligned mm, addmm or bmm as pad_mm pads it, every dimension not a
//   multiple of 8 (16-bit) or 4 (float32) elements rounded up, the operands copied into
//   padded buffers (torch/_inductor/fx_passes/pad_mm.py); pad_mm benchmarks both and
//   keeps the faster;
// - ChannelsLast: a convolution (forward or backward) in channels_last, which Inductor's
//   layout optimization gives every convolution of a training graph that its heuristics
//   do not rule out (GraphLowering.decide_layout_opt, torch/_inductor/graph.py).
struct InductorVariant {
  enum class Kind { PaddedGemm, ChannelsLast };
  Kind kind = Kind::PaddedGemm;
  OpRecord op;
  OpCost cost;
  double copyBytes = 0; // copies the variant adds: read and written
  int copyKernels = 0;
};
// Per op of the trace, its variant where it has one.
std::vector<std::optional<InductorVariant>> inductorVariants(const Trace& trace,
                                                             const std::vector<OpCost>& costs);

// Whether the variant runs on `gpu` (of the op whose cost is `traced`). A padded GEMM only
// where pad_mm tries it: arithmetic intensity above half the GPU's tensor peak over its
// DRAM bandwidth, and on tensor cores (off them alignment does not pick the kernel).
bool runsOn(const InductorVariant& variant, const OpCost& traced, const DeviceSpec& gpu);

} // namespace wavecast::compiled
