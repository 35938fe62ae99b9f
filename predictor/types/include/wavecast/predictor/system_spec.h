// What the predictor knows of one kind of node GPUs are rented in: how many GPUs, the
// fabric between them and the network to other nodes (data/systems.json, docs/systems.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wavecast {

// How GPUs of one node reach each other.
enum class IntraNodeFabric {
  NvSwitch,     // every GPU at full NVLink bandwidth to every other (HGX/DGX)
  NvLinkBridge, // pairs bridged by NVLink, PCIe beyond the pair
  Pcie,         // through the PCIe switches and the CPU
};

// "nvswitch", "nvlink_bridge", "pcie", as data/systems.json names them.
constexpr const char* toString(IntraNodeFabric fabric) {
  switch (fabric) {
  case IntraNodeFabric::NvSwitch:
    return "nvswitch";
  case IntraNodeFabric::NvLinkBridge:
    return "nvlink_bridge";
  case IntraNodeFabric::Pcie:
    return "pcie";
  }
  return "unknown";
}
inline std::optional<IntraNodeFabric> intraNodeFabricFromString(std::string_view text) {
  for (IntraNodeFabric f :
       {IntraNodeFabric::NvSwitch, IntraNodeFabric::NvLinkBridge, IntraNodeFabric::Pcie})
    if (text == toString(f))
      return f;
  return std::nullopt;
}

// How nodes reach each other.
enum class InterNodeNetwork { None, InfiniBand, RoCE, Efa, Ethernet };

// "none", "infiniband", "roce", "efa", "ethernet", as data/systems.json names them.
constexpr const char* toString(InterNodeNetwork network) {
  switch (network) {
  case InterNodeNetwork::None:
    return "none";
  case InterNodeNetwork::InfiniBand:
    return "infiniband";
  case InterNodeNetwork::RoCE:
    return "roce";
  case InterNodeNetwork::Efa:
    return "efa";
  case InterNodeNetwork::Ethernet:
    return "ethernet";
  }
  return "unknown";
}
inline std::optional<InterNodeNetwork> interNodeNetworkFromString(std::string_view text) {
  for (InterNodeNetwork n : {InterNodeNetwork::None, InterNodeNetwork::InfiniBand,
                             InterNodeNetwork::RoCE, InterNodeNetwork::Efa,
                             InterNodeNetwork::Ethernet})
    if (text == toString(n))
      return n;
  return std::nullopt;
}

struct SystemSpec {
  std::string id;                   // "HGX-H100"
  std::string name;                 // "NVIDIA HGX H100 8-GPU (NVLink 4, NVSwitch 3)"
  std::vector<std::string> aliases; // "DGX H100", "p5.48xlarge", "a3-highgpu-8g"
  std::string gpu;                  // the GPU's id in data/gpus.json: "H100-SXM"
  int gpusPerNode = 8;
  IntraNodeFabric fabric = IntraNodeFabric::Pcie;
  std::string fabricName;           // "NVLink 4 + NVSwitch 3", "PCIe 4.0 x16"
  double intraNodeGBs = 0;          // per GPU, one direction, 10^9 B/s (NVLink: 450 on H100)
  bool nvls = false;                // NVLink SHARP in the switches (NVSwitch 3): NCCL's NVLS
  InterNodeNetwork network = InterNodeNetwork::None;
  std::string networkName;          // "8x InfiniBand NDR 400G ConnectX-7"
  double interNodeGbpsPerGpu = 0;   // NIC line rate per GPU, Gb/s
  double pricePerHourUsd = 0;       // the whole node; 0: the GPU's price times gpusPerNode
  std::string source;               // where every figure comes from
};

} // namespace wavecast
