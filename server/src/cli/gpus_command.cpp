#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/terminal.h"
#include "presentation.h"

#include <iostream>
#include <nlohmann/json.hpp>

namespace wavecast::cli {
namespace {

nlohmann::json gpuToJson(const DeviceSpec& gpu) {
  return {{"id", gpu.id},
          {"name", gpu.name},
          {"aliases", gpu.aliases},
          {"compute_capability", gpu.computeCapability()},
          {"sm_count", gpu.smCount},
          {"boost_clock_mhz", gpu.boostClockMHz},
          {"memory_gib", gpu.memoryGiB},
          {"memory_bandwidth_gbs", gpu.memoryBandwidthGBs},
          {"l2_cache_mib", gpu.l2CacheMiB},
          {"fp32_tflops", gpu.fp32Tflops},
          {"tf32_tflops", gpu.tf32Tflops},
          {"fp16_tflops", gpu.fp16Tflops},
          {"bf16_tflops", gpu.bf16Tflops},
          {"host_link", gpu.hostLink.name},
          {"host_to_device_gbs", gpu.hostLink.hostToDeviceGBs},
          {"device_to_host_gbs", gpu.hostLink.deviceToHostGBs},
          {"price_per_hour_usd", gpu.pricePerHourUsd},
          {"source", gpu.source}};
}

std::string tflops(double value) {
  return value > 0 ? formatFixed(value, 1) : "-";
}

int runGpus(const CommandLine& args, const InstallLayout& layout) {
  const auto database = loadGpuDatabase(layout, args);
  if (args.has("json")) {
    auto list = nlohmann::json::array();
    for (const auto& gpu : database.all())
      list.push_back(gpuToJson(gpu));
    std::cout << nlohmann::json{{"gpus", list}}.dump(2) << "\n";
    return 0;
  }
  std::cout << padRight("id", 16) << padRight("name", 30) << padLeft("CC", 5) << padLeft("SMs", 5)
            << padLeft("memory", 9) << padLeft("GB/s", 7) << padLeft("FP32", 7)
            << padLeft("TF32", 7) << padLeft("FP16", 7) << padLeft("BF16", 7) << padLeft("H2D", 6)
            << padLeft("D2H", 6) << padLeft("$/h", 7) << "\n";
  for (const auto& gpu : database.all()) {
    std::cout << padRight(gpu.id, 16) << padRight(gpu.name, 30)
              << padLeft(gpu.computeCapability(), 5) << padLeft(std::to_string(gpu.smCount), 5)
              << padLeft(formatFixed(gpu.memoryGiB, 0) + " GB", 9)
              << padLeft(formatFixed(gpu.memoryBandwidthGBs, 0), 7)
              << padLeft(tflops(gpu.fp32Tflops), 7) << padLeft(tflops(gpu.tf32Tflops), 7)
              << padLeft(tflops(gpu.fp16Tflops), 7) << padLeft(tflops(gpu.bf16Tflops), 7)
              << padLeft(tflops(gpu.hostLink.hostToDeviceGBs), 6)
              << padLeft(tflops(gpu.hostLink.deviceToHostGBs), 6)
              << padLeft(gpu.pricePerHourUsd > 0 ? formatFixed(gpu.pricePerHourUsd, 2) : "-", 7)
              << "\n";
  }
  std::cout
      << "\nTFLOP/s are dense peaks; H2D and D2H are the GB/s of copies from and to "
         "page-locked host memory over the GPU's host link; prices are editable (docs/gpus.md).\n";
  return 0;
}

} // namespace

Command gpusCommand() {
  return {{"gpus",
           "[--json]",
           "List the GPUs wavecast knows, with their key specs and hourly price.",
           {{"json", "", "print as JSON"},
            {"gpu-file", "FILE", "extra or overriding GPU definitions (docs/gpus.md)"}},
           0,
           0},
          runGpus,
          {}};
}

} // namespace wavecast::cli
