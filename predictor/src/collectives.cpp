#include "wavecast/predictor/collectives.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

namespace wavecast {
namespace {

// NCCL's tuner constants, src/graph/tuning.cc (NVIDIA/nccl 5067397c, 2026-06):
// ncclTunerConstantsDefaults' baseLatencies and hwLatencies, in microseconds, indexed
// [algorithm][protocol] with protocols LL, LL128, Simple.
constexpr size_t kAlgorithms = 3; // Ring, Tree, Nvls (NcclAlgorithm's order)
constexpr size_t kProtocols = 3;  // LL, LL128, Simple (NcclProtocol's order)
using LatencyTable = std::array<std::array<double, kProtocols>, kAlgorithms>;
constexpr LatencyTable kBaseLatencyUs = {{{6.6, 14.0, 8.4}, {6.8, 14.0, 8.4}, {0, 0, 0}}};
constexpr LatencyTable kNvlinkLatencyUs = {{{0.6, 1.9, 3.4}, {0.6, 1.25, 4.0}, {0, 0, 25}}};
constexpr LatencyTable kPcieLatencyUs = {{{1.0, 2.5, 5.7}, {1.0, 1.9, 4.0}, {0, 0, 0}}};
constexpr LatencyTable kNetworkLatencyUs = {{{2.7, 4.0, 14.0}, {5.0, 8.5, 14.0}, {0, 0, 18}}};

// tuning.cc's treeCorrectionFactor: trees fall short of the model for medium sizes;
// indexed by log2(bytes / 64), 64 B to 256 MiB.
constexpr std::array<std::array<double, 24>, kProtocols> kTreeCorrection = {{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0,
     1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
     1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
}};

// tuning.cc's bandwidth refinements: LL carries 8 bytes of data per 16 (half the bus
// bandwidth), LL128 120 of 128 (0.92); a tree all-reduce reaches 0.92 of the ring's; the
// multi-node ring all-reduce with Simple pays 1.4x its latency (the "plateau effect").
constexpr double kLlBandwidthShare = 0.5;
constexpr double kLl128BandwidthShare = 0.92;
constexpr double kTreeBandwidthShare = 0.92;
constexpr double kTreeLlBandwidthShare = 1.0 / 3.8;
constexpr double kMultiNodeRingPlateau = 1.4;

bool onNvlink(const SystemSpec& system) {
  return system.fabric != IntraNodeFabric::Pcie;
}

// The bytes every rank moves per byte of `bytes`, as nccl-tests turns algorithm bandwidth
// into bus bandwidth (nccl-tests doc/PERFORMANCE.md).
double busFactor(CollectiveKind kind, int ranks) {
  const double n = ranks;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * (n - 1) / n;
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return (n - 1) / n;
  case CollectiveKind::Broadcast:
  case CollectiveKind::SendRecv:
    return 1;
  }
  return 1;
}

// Ring steps (NCCL's nsteps) and the ones that cross nodes.
int ringSteps(CollectiveKind kind, int count) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * (count - 1);
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
    return count - 1;
  case CollectiveKind::AllToAll:
  case CollectiveKind::SendRecv:
    return 1; // point to point: every peer at once
  case CollectiveKind::Broadcast:
    return count;
  }
  return count;
}

struct Candidate {
  NcclAlgorithm algorithm;
  NcclProtocol protocol;
  double busGBs;
  double latencyUs;
};

} // namespace

double SizeEfficiency::at(double bytes) const {
  if (halfBytes <= 0 || bytes <= 0)
    return plateau;
  return plateau / (1 + std::pow(halfBytes / bytes, exponent));
}

CollectiveEstimate estimateCollective(CollectiveKind kind, int64_t bytes, const CommGroup& group,
                                      const SystemSpec& system, const CollectiveModel& model) {
  CollectiveEstimate none;
  const bool pointToPoint = kind == CollectiveKind::SendRecv;
  if ((group.ranks <= 1 && !pointToPoint) || bytes <= 0)
    return none;
  const int ranks = std::max(group.ranks, 2);
  const int perNode = std::clamp(group.ranksPerNode, 1, ranks);
  const int nodes = (ranks + perNode - 1) / perNode;

  // Bus bandwidth of each level, GB/s. Across nodes a ring crosses each node boundary
  // once per channel, so a node's traffic leaves through its ranks' NICs together.
  const double intraGBs =
      system.intraNodeGBs * (onNvlink(system) ? model.nvlinkPeak : model.pciePeak);
  const double nicGBs = system.interNodeGbpsPerGpu / 8 * model.networkPeak;
  double interGBs = perNode * nicGBs;
  if (kind == CollectiveKind::AllToAll && ranks > perNode) // only off-node peers use NICs
    interGBs = nicGBs * (ranks - 1) / (ranks - perNode);
  if (pointToPoint)
    interGBs = nicGBs;
  const bool multiNode = nodes > 1;
  if (multiNode && nicGBs <= 0)
    return {std::numeric_limits<double>::infinity(), NcclAlgorithm::Ring, NcclProtocol::Simple,
            0};
  const double ringGBs = multiNode ? std::min(intraGBs, interGBs) : intraGBs;

  const LatencyTable& intraLat = onNvlink(system) ? kNvlinkLatencyUs : kPcieLatencyUs;
  std::vector<Candidate> candidates;
  for (NcclProtocol protocol : {NcclProtocol::LL, NcclProtocol::LL128, NcclProtocol::Simple}) {
    const size_t p = static_cast<size_t>(protocol);
    // LL128 is on by default only over NVLink (tuning.cc's protocol enable rules).
    if (protocol == NcclProtocol::LL128 && !onNvlink(system))
      continue;
    const double share = protocol == NcclProtocol::LL      ? kLlBandwidthShare
                         : protocol == NcclProtocol::LL128 ? kLl128BandwidthShare
                                                           : 1.0;
    // Ring (every collective; NCCL's p2p for all-to-all and send/recv).
    {
      const size_t a = static_cast<size_t>(NcclAlgorithm::Ring);
      const int steps = ringSteps(kind, ranks);
      const int interSteps = multiNode ? std::min(steps, ringSteps(kind, nodes)) : 0;
      double intraUs = intraLat[a][p];
      double interUs = kNetworkLatencyUs[a][p];
      if (pointToPoint && multiNode)
        intraUs = interUs;
      double latency = kBaseLatencyUs[a][p] + (steps - interSteps) * intraUs +
                       (pointToPoint ? 0 : interSteps) * interUs;
      if (multiNode && kind == CollectiveKind::AllReduce && protocol == NcclProtocol::Simple)
        latency *= kMultiNodeRingPlateau;
      candidates.push_back({NcclAlgorithm::Ring, protocol, ringGBs * share, latency});
    }
    // Tree: all-reduce only; a chain in each node and a double binary tree across nodes.
    if (kind == CollectiveKind::AllReduce) {
      const size_t a = static_cast<size_t>(NcclAlgorithm::Tree);
      const double treeShare =
          protocol == NcclProtocol::LL ? kTreeLlBandwidthShare
          : protocol == NcclProtocol::LL128 ? (multiNode ? 120.0 / 128.0 : 7.0 / 9.0)
                                            : 1.0;
      const double latency =
          kBaseLatencyUs[a][p] +
          2 * ((perNode - 1) * intraLat[a][p] + std::log2(nodes) * kNetworkLatencyUs[a][p]);
      double busGBs = ringGBs * kTreeBandwidthShare * treeShare;
      const int logSize = static_cast<int>(std::floor(std::log2(std::max<double>(bytes / 64, 1))));
      if (logSize < 23)
        busGBs *= kTreeCorrection[p][static_cast<size_t>(logSize)];
      // A tree all-reduce moves 2x the buffer (tuning.cc's ratio .5), not 2(n-1)/n.
      busGBs *= busFactor(kind, ranks) / 2;
      candidates.push_back({NcclAlgorithm::Tree, protocol, busGBs, latency});
    }
    // NVLS: the NVSwitch reduces, each GPU sends and receives the buffer once; Simple only,
    // one node (across nodes NCCL runs NVLS-Tree, left to the ring and tree here).
    if (kind == CollectiveKind::AllReduce && system.nvls && !multiNode &&
        protocol == NcclProtocol::Simple) {
      const size_t a = static_cast<size_t>(NcclAlgorithm::Nvls);
      // Its time does not grow with the ranks: the bus bandwidth nccl-tests reports does.
      candidates.push_back({NcclAlgorithm::Nvls, protocol,
                            system.intraNodeGBs * model.nvlsPeak * busFactor(kind, ranks),
                            kBaseLatencyUs[a][p] + kNvlinkLatencyUs[a][p]});
    }
  }

  const double efficiency = model.sizeEfficiency(kind).at(static_cast<double>(bytes));
  const double factor = busFactor(kind, ranks);
  CollectiveEstimate best;
  best.ms = std::numeric_limits<double>::infinity();
  for (const Candidate& c : candidates) {
    if (c.busGBs <= 0)
      continue;
    const double busGBs = c.busGBs * efficiency;
    const double us = model.fixedUs + c.latencyUs + bytes * factor / (busGBs * 1e3);
    if (us / 1e3 < best.ms)
      best = {us / 1e3, c.algorithm, c.protocol, busGBs};
  }
  return best;
}

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& field,
                       const std::string& problem) {
  throw CollectiveModelError(path + ": field '" + field + "': " + problem +
                             " (written by bench/collectives; docs/collectives.md)");
}

double positive(const json& obj, const std::string& key, const std::string& path,
                const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end())
    fail(path, where + key, "missing");
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
    fail(path, where + key, "must be a number >= 0, got " + it->dump());
  return it->get<double>();
}

} // namespace

CollectiveModel CollectiveModel::fromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw CollectiveModelError(path + ": cannot open the collectives file");
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    throw CollectiveModelError(path + ": not a JSON object");
  if (doc.value("format", "") != "wavecast-collectives")
    fail(path, "format", "must be \"wavecast-collectives\"");
  CollectiveModel model;
  model.source = path;
  const auto peaks = doc.find("peak_share");
  if (peaks == doc.end() || !peaks->is_object())
    fail(path, "peak_share", "missing or not an object");
  model.nvlinkPeak = positive(*peaks, "nvlink", path, "peak_share.");
  model.pciePeak = positive(*peaks, "pcie", path, "peak_share.");
  model.networkPeak = positive(*peaks, "network", path, "peak_share.");
  model.nvlsPeak = positive(*peaks, "nvls", path, "peak_share.");
  model.fixedUs = positive(doc, "fixed_us", path, "");
  model.smShare = positive(doc, "sm_share", path, "");
  if (model.smShare >= 1)
    fail(path, "sm_share", "must be below 1");
  const auto sizes = doc.find("size_efficiency");
  if (sizes == doc.end() || !sizes->is_object())
    fail(path, "size_efficiency", "missing or not an object");
  for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                              CollectiveKind::ReduceScatter, CollectiveKind::Broadcast,
                              CollectiveKind::AllToAll, CollectiveKind::SendRecv}) {
    const std::string name = toString(kind);
    const auto entry = sizes->find(name);
    if (entry == sizes->end() || !entry->is_object())
      fail(path, "size_efficiency." + name, "missing or not an object");
    const std::string where = "size_efficiency." + name + ".";
    model.bySize[static_cast<size_t>(kind)] = {positive(*entry, "half_bytes", path, where),
                                              positive(*entry, "exponent", path, where),
                                              positive(*entry, "plateau", path, where)};
  }
  return model;
}

} // namespace wavecast
