// What the predictor needs to know of a trace measured on a GPU (mode "cuda"):
// which GPU of the database it was measured on, and which of its ops Habitat
// leaves to learned models because their kernels differ from GPU to GPU.
#pragma once

#include "wavecast/predictor/device_spec.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/trace.h"

#include <optional>

namespace wavecast {

// True when `trace` was measured on a GPU and carries its kernels.
bool hasMeasuredKernels(const Trace& trace);

// The database's GPU for the trace's `device` (torch.cuda.get_device_name(), e.g.
// "NVIDIA H100 80GB HBM3"); nullopt for a trace that was not measured or a device the
// database does not know (the predictor then warns and uses its models).
std::optional<DeviceSpec> measuredOrigin(const Trace& trace, const GpuDatabase& database);

// Habitat's kernel-varying operations (its MLP-predicted conv2d, lstm, bmm and linear):
// cuDNN and cuBLAS pick architecture-specific kernels for convolutions, matrix
// multiplications and recurrent layers, so their kernels on the origin say little about
// another GPU's. Every other op runs the same kernels everywhere and is wave-scaled.
bool isKernelVarying(const OpCost& cost);

} // namespace wavecast
