#include "wavecast/predictor/tensor_core_gemm.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

namespace wavecast {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "wavecast-tensor-core-gemm";
// Bytes of the fp32 partial result each split-K slice writes for the reduction.
constexpr double kPartialBytes = 4;
// The output tile of cuBLAS's element-wise loading kernels (cutlass_75_..._128x128_nn_align1).
constexpr double kAlign1Tile = 128;

[[noreturn]] void fail(const std::string& file, const std::string& field,
                       const std::string& problem) {
  throw TensorCoreGemmModelError(file + (field.empty() ? "" : ": field '" + field + "'") + ": " +
                                 problem + " (written by bench/tensor_core_gemm/fit.py)");
}

double positiveField(const json& obj, const char* key, const std::string& file, bool zeroAllowed) {
  const auto it = obj.find(key);
  if (it == obj.end())
    fail(file, key, "missing");
  if (!it->is_number())
    fail(file, key, "must be a number, got " + it->dump());
  const double value = it->get<double>();
  if (!std::isfinite(value) || value < 0 || (!zeroAllowed && value == 0))
    fail(file, key,
         "must be a number " + std::string(zeroAllowed ? ">= 0" : "> 0") + ", got " + it->dump());
  return value;
}

} // namespace

TensorCoreGemmModel TensorCoreGemmModel::fromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    fail(path, "", "cannot read the file");
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    fail(path, "", "not a JSON object");
  if (doc.value("format", "") != kFormat)
    fail(path, "format", std::string("must be \"") + kFormat + "\"");
  if (doc.value("version", 0) != 1)
    fail(path, "version", "this wavecast reads version 1");
  TensorCoreGemmModel model;
  model.source = path;
  model.efficiency = positiveField(doc, "efficiency", path, false);
  model.tilePrologueK = positiveField(doc, "tile_prologue_k", path, true);
  model.kernelFixedUs = positiveField(doc, "kernel_fixed_us", path, true);
  model.splitKMinSliceK = positiveField(doc, "split_k_min_slice_k", path, false);
  if (const auto unaligned = doc.find("unaligned_kernel"); unaligned != doc.end()) {
    if (!unaligned->is_object())
      fail(path, "unaligned_kernel", "must be an object {flops_per_sm_clock, source}");
    model.unalignedFlopsPerSmClock =
        positiveField(*unaligned, "flops_per_sm_clock", path + ": unaligned_kernel", false);
    if (const auto byMajor = unaligned->find("by_compute_capability");
        byMajor != unaligned->end()) {
      if (!byMajor->is_object())
        fail(path, "unaligned_kernel.by_compute_capability",
             "must map a compute capability major (\"9\") to {flops_per_sm_clock, source}");
      for (const auto& [major, entry] : byMajor->items()) {
        const std::string where = path + ": unaligned_kernel.by_compute_capability." + major;
        if (!entry.is_object() || major.empty() ||
            major.find_first_not_of("0123456789") != std::string::npos)
          fail(path, "unaligned_kernel.by_compute_capability",
               "must map a compute capability major (\"9\") to {flops_per_sm_clock, source}");
        model.unalignedFlopsPerSmClockByMajor[std::stoi(major)] =
            positiveField(entry, "flops_per_sm_clock", where, false);
      }
    }
  }
  const auto tiles = doc.find("tiles");
  if (tiles == doc.end() || !tiles->is_array() || tiles->empty())
    fail(path, "tiles", "must be a non-empty list of {rows, cols, efficiency}");
  for (const json& tile : *tiles) {
    if (!tile.is_object())
      fail(path, "tiles", "each tile must be an object, got " + tile.dump());
    model.tiles.push_back({positiveField(tile, "rows", path, false),
                           positiveField(tile, "cols", path, false),
                           positiveField(tile, "efficiency", path, false)});
  }
  return model;
}

TensorCoreGemmTime tensorCoreGemmTime(const GemmShape& gemm, double bytes, const GemmDevice& device,
                                      const TensorCoreGemmModel& model) {
  TensorCoreGemmTime t;
  const double bandwidth = device.bandwidth;
  const int sms = device.sms;
  t.memoryMs = bandwidth > 0 ? bytes / bandwidth * 1e3 : 0;
  const double batch = std::max(1.0, gemm.batch);
  if (gemm.m > 0 && gemm.n > 0 && gemm.k > 0 && device.peakFlops > 0 && sms > 0) {
    const double peakPerSm = device.peakFlops / sms;
    t.computeMs = std::numeric_limits<double>::infinity();
    for (const GemmTile& tile : model.tiles) {
      const double outputTiles =
          batch * std::ceil(gemm.m / tile.rows) * std::ceil(gemm.n / tile.cols);
      // Too few tiles to fill the SMs: cut K into slices (each at least the minimum
      // long), summed by a reduction over their fp32 partial results.
      const double slices =
          outputTiles < sms ? std::max(1.0, std::min(std::floor(sms / outputTiles),
                                                     std::floor(gemm.k / model.splitKMinSliceK)))
                            : 1.0;
      double waves = std::ceil(outputTiles * slices / sms);
      // Stream-K (cuBLAS's persistent kernels): with more tiles than SMs and a K of at
      // least two minimum slices, the K loops of what would be a partial last wave are
      // shared out over every SM, so the work divides with no idle SMs.
      if (outputTiles > sms && gemm.k >= 2 * model.splitKMinSliceK)
        waves = outputTiles / sms;
      const double tileSeconds = (gemm.k / slices + model.tilePrologueK) * 2 * tile.rows *
                                 tile.cols / (peakPerSm * model.efficiency * tile.efficiency);
      const double reductionSeconds =
          slices > 1 && bandwidth > 0 ? batch * gemm.m * gemm.n * kPartialBytes * slices / bandwidth
                                      : 0;
      const double ms = (waves * tileSeconds + reductionSeconds) * 1e3;
      if (ms < t.computeMs) {
        t.computeMs = ms;
        t.occupancy = outputTiles * slices / (waves * sms);
      }
    }
    // An element-wise loading kernel (cutlass's 128 x 128 align1 tiles, which cuBLAS
    // picks): whole output tiles, each with the tile prologue, at its measured rate;
    // never faster than the vector-loading kernels.
    const auto measured = model.unalignedFlopsPerSmClockByMajor.find(device.computeCapabilityMajor);
    const double unalignedFlopsPerSmClock = measured != model.unalignedFlopsPerSmClockByMajor.end()
                                                ? measured->second
                                                : model.unalignedFlopsPerSmClock;
    if (gemm.loadsElementByElement() && unalignedFlopsPerSmClock > 0 && device.smClockHz > 0) {
      const double tiles =
          batch * std::ceil(gemm.m / kAlign1Tile) * std::ceil(gemm.n / kAlign1Tile);
      const double flops = tiles * 2 * kAlign1Tile * kAlign1Tile * (gemm.k + model.tilePrologueK);
      const double rate = unalignedFlopsPerSmClock * device.smClockHz * sms;
      t.computeMs = std::max(t.computeMs, flops / rate * 1e3);
      t.unalignedKernel = true;
    }
  }
  t.timeMs = model.kernelFixedUs * 1e-3 + std::max(t.computeMs, t.memoryMs);
  return t;
}

} // namespace wavecast
