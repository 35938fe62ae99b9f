// The stages of Predictor::predict, in order, each testable alone
// (docs/predictor.md "How a prediction is made").
#pragma once

#include "wavecast/predictor/host_model.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/predictor/predictor.h"

#include <array>
#include <optional>
#include <vector>

namespace wavecast::stages {

// 1. How CUDA runs the script's float math: its settings, then the caller's overrides.
FloatPrecision effectivePrecision(const Trace& trace, const PredictorOptions& options);

// 2. Each op's work (FLOPs, bytes, family) and what the trace says of it, once for all GPUs.
struct CostedOps {
  std::vector<OpCost> costs;                        // [op]
  std::vector<OpInfo> info;                         // [op]
  std::vector<advisory::ApproximateOp> approximate; // per op name, by name
};
CostedOps costOps(const Trace& trace, const FloatPrecision& precision);

// 3. Whether measured kernels are used: on the GPU they were measured on, as they are; on
// the others, wave-scaled. Sets the costs' kernel counts to those really launched.
struct MeasuredKernels {
  bool measured = false;      // the trace has kernels from a GPU the database knows
  std::vector<bool> onOrigin; // [gpu]: that GPU
  std::vector<Advisory> advisories;
};
MeasuredKernels useMeasuredKernels(const Trace& trace, const std::vector<DeviceSpec>& gpus,
                                   const PredictorOptions& options, std::vector<OpCost>& costs);

// 4. The pluggable model's answers, asked once for every (op, GPU) pair it may answer:
// [gpu * opCount + op].
std::vector<std::optional<double>> askLearnedModel(const Trace& trace,
                                                   const std::vector<OpCost>& costs,
                                                   const std::vector<DeviceSpec>& gpus,
                                                   const MeasuredKernels& kernels,
                                                   const PredictorOptions& options);

// 5. GPU time per op and GPU: the measurement on its own GPU, else learned, else wave
// scaling of measured kernels, else roofline.
struct OpTimes {
  std::vector<std::vector<OpPrediction>> ops; // [gpu][op]
  std::vector<GpuMethods> methods;            // [gpu]
  std::vector<Advisory> advisories;           // untrained GPUs, unlaunchable kernels
};
OpTimes timeOps(const Trace& trace, const std::vector<OpCost>& costs,
                const std::vector<DeviceSpec>& gpus, const MeasuredKernels& kernels,
                const std::vector<std::optional<double>>& learned, const PredictorOptions& options);

// The calibration of `gpu` in `options`, if any.
const CalibrationTable* calibrationFor(const DeviceSpec& gpu, const PredictorOptions& options);

// A collective's time on `system`: its group spread over nodes as the op says, else
// filling a node (at most `tracedRanksPerNode` of it, the traced local world size when
// known; 0: unknown) before the next.
double collectiveMs(const CollectiveWork& work, const SystemSpec& system,
                    const CollectiveModel& model, int tracedRanksPerNode);

// 6. The host model's two clocks (and NCCL's stream) per GPU: sets each op's wall and
// GPU-idle time and each collective's hidden time; options.collectives.smShare of the SMs
// go to NCCL while a collective runs. A GPU that runs a grouped GEMM as a loop of mm
// (groupedGemmLoops) issues a kernel per group and waits for the GPU there; a calibrated
// GPU's pageable copies take as long as its machine's did.
struct HostTimelines {
  std::vector<double> hostMs;               // [op]: CPU time issuing it, by `host`, as
                                            // a GPU without such loops issues it
  std::vector<IterationTimeline> timelines; // [gpu]
};
HostTimelines playIterations(const Trace& trace, const std::vector<OpCost>& costs,
                             const std::vector<DeviceSpec>& gpus, const PredictorOptions& options,
                             OpTimes& times);

// 7. Per source line and per module path, unsorted; shares are set by summarize.
void aggregate(const Trace& trace, const std::vector<OpCost>& costs, Prediction& prediction);

// 8. Per GPU: phases, throughput, cost and memory; each line's and module's share of the
// iteration; host-bound and out-of-memory advisories.
void summarize(const Trace& trace, const std::vector<OpCost>& costs,
               const std::vector<DeviceSpec>& gpus, const HostTimelines& host,
               const std::vector<GpuMethods>& methods, const PredictorOptions& options,
               Prediction& prediction);

// Per matrix family, the precision that carries most of its FLOPs.
std::vector<FamilyPrecision> familyPrecisions(const std::vector<OpCost>& costs);
// The most experts a grouped GEMM's offsets route tokens to (0: none).
int64_t routedExperts(const std::vector<OpCost>& costs);

// One advisory per attention kernel a GPU lacks and the kernel torch runs there instead.
std::vector<Advisory> attentionSubstitutions(const std::vector<OpCost>& costs,
                                             const std::vector<DeviceSpec>& gpus);

} // namespace wavecast::stages
