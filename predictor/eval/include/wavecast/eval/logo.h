// Leave-one-GPU-out: for each labelled GPU, train on the other GPUs' kernels,
// then evaluate that GPU's kernels (both modes) and its whole-model labels.
#pragma once

#include "wavecast/eval/harness.h"
#include "wavecast/eval/kernel_eval.h"
#include "wavecast/learned/trainer.h"

#include <string>
#include <vector>

namespace wavecast::eval {

struct LogoFold {
  std::string heldOut;                // label GPU folder, e.g. "Tesla_T4"
  std::vector<std::string> excluded;  // kernel-data stems of the same chip
  std::vector<std::string> trainedOn; // the other stems
  double trainSeconds = 0;
  KernelEvalReport kernels;
  EvalReport labels;
};

struct LogoOptions {
  std::string labelsDir; // NeuSight labels/
  std::string workDir;   // fold weights go to <workDir>/<heldOut>
  learned::TrainOptions
      training; // dataDir, seed, epochs, ... (outDir and excludeGpus set per fold)
  std::vector<std::string> onlyGpus; // restrict the folds; empty = every labelled GPU
};

struct LogoReport {
  std::vector<LogoFold> folds;
  EvalReport labels; // all folds' labels pooled and summarised
  double seconds = 0;
};

// Stems of the same chip as `stem` ("NVIDIA_A100-PCIE-40GB" and "NVIDIA_A100_80GB_PCIe").
std::vector<std::string> sameChipStems(const std::string& stem,
                                       const std::vector<std::string>& stems);

LogoReport runLeaveOneGpuOut(const LogoOptions& options);

// The generated part of docs/accuracy.md.
std::string logoMarkdown(const LogoReport& report, const learned::TrainOptions& training);

} // namespace wavecast::eval
