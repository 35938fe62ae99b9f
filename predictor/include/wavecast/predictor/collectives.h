// What one NCCL collective costs on a system: NCCL's algorithms and protocols, their
// latencies and the bus bandwidth they reach by message size (docs/collectives.md).
#pragma once

#include "wavecast/predictor/collective_kind.h"
#include "wavecast/predictor/system_spec.h"

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace wavecast {

enum class NcclAlgorithm { Ring, Tree, Nvls };
enum class NcclProtocol { LL, LL128, Simple };

constexpr const char* toString(NcclAlgorithm algorithm) {
  switch (algorithm) {
  case NcclAlgorithm::Ring:
    return "ring";
  case NcclAlgorithm::Tree:
    return "tree";
  case NcclAlgorithm::Nvls:
    return "nvls";
  }
  return "unknown";
}
constexpr const char* toString(NcclProtocol protocol) {
  switch (protocol) {
  case NcclProtocol::LL:
    return "ll";
  case NcclProtocol::LL128:
    return "ll128";
  case NcclProtocol::Simple:
    return "simple";
  }
  return "unknown";
}

// The ranks one collective spans: how many, and how many of them share a node.
struct CommGroup {
  int ranks = 1;
  int ranksPerNode = 1; // ranks == ranksPerNode: one node, the intra-node fabric only
  int nodes() const { return (ranks + ranksPerNode - 1) / ranksPerNode; }
};

class CollectiveModelError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// How close to its bus bandwidth a collective gets by message size:
// plateau / (1 + (halfBytes / bytes)^exponent), half the plateau at `halfBytes`.
struct SizeEfficiency {
  double halfBytes = 0; // 0: the plateau at every size
  double exponent = 1;
  double plateau = 1; // the share of the peak large messages reach
  double at(double bytes) const;
};

// The measured side of the model (data/collectives.json, docs/collectives.md): the share
// of a link's line rate NCCL sustains on each kind of link, and the size curves fitted
// to OpenXLA's measured H100 table. NCCL's own tuner constants live in collectives.cpp.
// A default-constructed model runs at line rate with no size curve.
struct CollectiveModel {
  double nvlinkPeak = 1;  // ring bus bandwidth / NVLink line rate
  double pciePeak = 1;    // ring bus bandwidth / PCIe line rate
  double networkPeak = 1; // bus bandwidth per NIC / NIC line rate
  double nvlsPeak = 1;    // NVLS all-reduce algorithm bandwidth / NVLink line rate
  double fixedUs = 0;     // per collective, on top of NCCL's latencies: launch and sync
  // Share of the SMs NCCL's kernels hold while they run: overlapped compute runs on the
  // rest (docs/collectives.md, "Overlap").
  double smShare = 0;
  std::array<SizeEfficiency, 6> bySize{}; // indexed by CollectiveKind
  std::string source;                     // the file it was read from

  const SizeEfficiency& sizeEfficiency(CollectiveKind kind) const {
    return bySize[static_cast<size_t>(kind)];
  }
  // Reads a file of format "wavecast-collectives"; throws CollectiveModelError naming the
  // file and the field.
  static CollectiveModel fromFile(const std::string& path);
};

struct CollectiveEstimate {
  double ms = 0;
  NcclAlgorithm algorithm = NcclAlgorithm::Ring;
  NcclProtocol protocol = NcclProtocol::Simple;
  double busGBs = 0; // the bus bandwidth reached, as nccl-tests reports it
};

// `bytes` as nccl-tests counts its size: the buffer for all-reduce and broadcast, the
// whole output of all-gather, the whole input of reduce-scatter, the bytes one rank sends
// for all-to-all and send/recv. A group of one rank costs nothing; a group spanning nodes
// of a system with no network takes forever (ms = +inf): callers check layouts first.
CollectiveEstimate estimateCollective(CollectiveKind kind, int64_t bytes, const CommGroup& group,
                                      const SystemSpec& system, const CollectiveModel& model = {});

} // namespace wavecast
