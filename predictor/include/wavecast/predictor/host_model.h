// What the CPU spends issuing the iteration in eager PyTorch, and the two-clock timeline
// (the CPU issues, the GPU executes) that turns it and the GPU times into wall time
// (docs/predictor.md, "Host model").
#pragma once

#include "wavecast/predictor/op_cost.h"
#include "wavecast/trace.h"

#include <vector>

namespace wavecast {

// Host costs in microseconds, calibrated on host-bound iterations of the H100 truth
// (a 16-core server CPU, torch 2.11, Python 3.11; docs/predictor.md). A slower host or
// an older torch takes longer; the shape of the model stays.
struct HostOptions {
  // One op that launches GPU work: Python, the dispatcher, autograd's bookkeeping
  // (recording a node in forward, running it in backward) and its first kernel launch.
  double opUs = 50.0;
  // Each launch after an op's first: multi-tensor optimizer chunks.
  double extraLaunchUs = 5.0;
  // Each launch after a cuDNN RNN's first (per layer, direction and time step): cuDNN
  // sets up and launches every step's GEMM and gate kernel from the host. Calibrated
  // on GNMT's host-bound iterations (batch 16: 1,800 step launches, wall 43 ms
  // against 26 ms of kernels).
  double rnnStepLaunchUs = 20.0;
  // An op that runs on the CPU (Adam's step counters, .item() of a CPU tensor).
  double cpuOpUs = 4.0;
  // Entering `loss.backward()` (the engine's start and its thread hand-off) and one
  // `optimizer.step()` (torch 2.x's Python around the kernels): per call.
  double backwardCallUs = 875.0;
  double optimizerStepUs = 875.0;
  // Share of a span's wall time the GPU must sit idle for it to count as host-bound.
  double hostBoundIdleShare = 0.5;
  // Share of an iteration the loop's own batch loading (no DataLoader workers) must take
  // for the results to suggest workers.
  double inputBoundShare = 0.1;
  // Share of an iteration that copies holding the CPU (pageable or blocking copies of host
  // tensors to the GPU) must take for the results to say how to avoid it.
  double heldCopiesShare = 0.02;
};

// CPU time to issue `op` alone (0 for views and allocations, which ride on the op that
// made them).
double hostOpUs(const OpRecord& op, const OpCost& cost, const HostOptions& options);

// CPU time issuing each op of the iteration (ms): hostOpUs plus the fixed price of a
// backward call or an optimizer step on the op that starts it. The same on every GPU.
std::vector<double> issueMs(const Trace& trace, const std::vector<OpCost>& costs,
                            const HostOptions& options);

// A DataLoader's batch taken by the loop (a script run as written: `host_ms` timed on the
// tracing CPU, or made by the script's workers).
bool loadsBatch(const OpRecord& op);

// Ops that make the CPU wait for the GPU (a GPU value read on the host).
bool synchronizesHost(const OpRecord& op);

// synchronizesHost of each op of the trace, on any GPU.
std::vector<bool> hostWaits(const Trace& trace);

// One op on the timeline of one GPU.
struct OpTimeline {
  double wallMs = 0;    // how much it moved the iteration's end (sums to the wall time)
  double gpuIdleMs = 0; // how long the GPU waited for the CPU to launch its kernels
  // A collective: the part of its time that compute or the host covered; the rest is
  // exposed and counts in its wallMs (at its wait point when it is async).
  double commHiddenMs = 0;
};

struct IterationTimeline {
  std::vector<OpTimeline> ops; // trace order
  double wallMs = 0;           // max(CPU end, GPU end), from an idle GPU
  double hostMs = 0;           // CPU time issuing everything
  double gpuMs = 0;            // GPU busy time (sum of kernel times)
  double gpuIdleMs = 0;        // wall time with no kernel running (wall - gpu)
  double commMs = 0;           // NCCL's stream busy (sum of collective times)
  double commHiddenMs = 0;     // the part of it compute or the host covered
  // A script's DataLoader workers: the slowest loader's time to make the iteration's
  // batches (their time on the tracing CPU over its workers), its workers, and how long
  // the loop waits for them (inside wallMs, on that loader's first fetch).
  double loaderMs = 0;
  int loaderWorkers = 0;
  double loaderWaitMs = 0;
};

// Plays the iteration on two clocks, as ml_perf_model does: op i costs the CPU
// hostMs[i] (its kernels issued evenly over that span, from issueMs) and the GPU
// gpuMs[i]; a kernel starts when both the GPU is free and it has been launched;
// the ops `waits` marks make the CPU wait for the GPU. Starts with an idle GPU and ends when
// both clocks have finished, as CUDA events around one iteration measure it; or, where a
// DataLoader's workers take longer to make its batches, when they have made them.
// Collectives (CostFamily::Collective, gpuMs their time) run on a third clock, NCCL's
// stream, one after another, each starting once the compute issued before it is done:
// a synchronous one makes the compute stream wait at once; an async one only at its wait
// point (its wait_op, else the first op of another phase, else the iteration's end).
// Compute overlapping a collective runs on 1 - ncclSmShare of the SMs.
IterationTimeline simulateIteration(const Trace& trace, const std::vector<OpCost>& costs,
                                    const std::vector<double>& hostMs,
                                    const std::vector<double>& gpuMs,
                                    const std::vector<bool>& waits, double ncclSmShare = 0);

} // namespace wavecast
