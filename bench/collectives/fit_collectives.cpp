// Fits the size curves and the fixed time of data/collectives.json to OpenXLA's measured
// 8x H100 collective table, on the even sizes; prints the error on the held-out odd sizes
// and on the 2x4 / 4x2 groups when fitted on 1x8 only (docs/accuracy.md, "Collectives").
//
//   fit_collectives <collectives.json> <systems.json> <xla collectives.csv> [--write]

#include "wavecast/eval/collective_table.h"
#include "wavecast/predictor/system_database.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

namespace wavecast::bench {
namespace {

constexpr CollectiveKind kFitted[] = {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                                      CollectiveKind::ReduceScatter, CollectiveKind::AllToAll,
                                      CollectiveKind::SendRecv};

std::vector<MeasuredCollective> select(const std::vector<MeasuredCollective>& rows,
                                       CollectiveKind kind, bool wantHeldOut, bool only1x8) {
  std::vector<MeasuredCollective> chosen;
  for (const auto& row : rows)
    if (row.kind == kind && heldOut(row) == wantHeldOut && (!only1x8 || row.groups == 1 ||
                                                            row.kind == CollectiveKind::SendRecv))
      chosen.push_back(row);
  return chosen;
}

// Both the rows' mean error and the error by time spent: the first alone lets the many
// latency-bound sizes pull the plateau down, the second alone neglects them.
double objective(const CollectiveError& error) {
  return error.mape + error.weighted;
}

// Exponents stay at most 1: above it the time of a small message would fall as it grows
// (bytes / efficiency grows as bytes^(1 - exponent)).

// Per kind, the plateau and size curve with the least error on the training rows.
void fitPlateaus(const std::vector<MeasuredCollective>& rows, const SystemSpec& system,
                 CollectiveModel& model, bool only1x8) {
  for (CollectiveKind kind : kFitted) {
    const auto train = select(rows, kind, /*wantHeldOut=*/false, only1x8);
    double best = INFINITY;
    SizeEfficiency bestCurve;
    CollectiveModel trial = model;
    for (double plateau = 0.6; plateau <= 1.2001; plateau += 0.02)
      for (double log2Half = 10; log2Half <= 30; log2Half += 0.5)
        for (double exponent = 0.2; exponent <= 1.0001; exponent += 0.05) {
          trial.bySize[static_cast<size_t>(kind)] = {std::exp2(log2Half), exponent, plateau};
          const double error = objective(collectiveError(train, system, trial));
          if (error < best) {
            best = error;
            bestCurve = trial.bySize[static_cast<size_t>(kind)];
          }
        }
    model.bySize[static_cast<size_t>(kind)] = bestCurve;
  }
}

// Grid search: a shared fixed time with each kind's best curve at plateau 1, then the
// plateaus and curves again at that fixed time.
CollectiveModel fit(const std::vector<MeasuredCollective>& rows, const SystemSpec& system,
                    CollectiveModel model, bool only1x8) {
  double bestTotal = INFINITY;
  CollectiveModel best = model;
  for (double fixedUs = 0; fixedUs <= 20; fixedUs += 1) {
    CollectiveModel trial = model;
    trial.fixedUs = fixedUs;
    double total = 0;
    for (CollectiveKind kind : kFitted) {
      const auto train = select(rows, kind, /*wantHeldOut=*/false, only1x8);
      double bestKind = INFINITY;
      SizeEfficiency bestCurve;
      for (double log2Half = 10; log2Half <= 30; log2Half += 0.25)
        for (double exponent = 0.2; exponent <= 1.0001; exponent += 0.05) {
          trial.bySize[static_cast<size_t>(kind)] = {std::exp2(log2Half), exponent};
          const double error = objective(collectiveError(train, system, trial));
          if (error < bestKind) {
            bestKind = error;
            bestCurve = trial.bySize[static_cast<size_t>(kind)];
          }
        }
      trial.bySize[static_cast<size_t>(kind)] = bestCurve;
      total += bestKind * train.size();
    }
    if (total < bestTotal) {
      bestTotal = total;
      best = trial;
    }
  }
  fitPlateaus(rows, system, best, only1x8);
  // No broadcast in the table: it moves the buffer once along a ring like all-gather.
  best.bySize[static_cast<size_t>(CollectiveKind::Broadcast)] =
      best.bySize[static_cast<size_t>(CollectiveKind::AllGather)];
  return best;
}

int run(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: fit_collectives <collectives.json> <systems.json> <collectives.csv> "
                 "[--write]\n";
    return 2;
  }
  const std::string modelPath = argv[1];
  const auto rows = readXlaCollectives(argv[3], "sm_90");
  const SystemDatabase systems = SystemDatabase::fromFile(argv[2]);
  const SystemSpec* h100 = systems.find("HGX-H100");
  if (!h100) {
    std::cerr << argv[2] << " has no HGX-H100\n";
    return 1;
  }
  const SystemSpec system = *h100;
  // The peaks as written by hand, without the fitted part: the baseline.
  CollectiveModel start = CollectiveModel::fromFile(modelPath);
  start.fixedUs = 0;
  for (auto& curve : start.bySize)
    curve = SizeEfficiency{};

  const CollectiveModel model = fit(rows, system, start, /*only1x8=*/false);
  std::cout << std::fixed << std::setprecision(1) << "fixed_us " << model.fixedUs << "\n"
            << "kind | train rows | train MAPE | held-out rows | held-out MAPE | held-out "
               "time-weighted | unfitted held-out MAPE\n";
  double heldOutSum = 0;
  int heldOutRows = 0;
  for (CollectiveKind kind : kFitted) {
    const auto train = collectiveError(select(rows, kind, false, false), system, model);
    const auto test = collectiveError(select(rows, kind, true, false), system, model);
    const auto unfitted = collectiveError(select(rows, kind, true, false), system, start);
    const auto& curve = model.sizeEfficiency(kind);
    std::cout << toString(kind) << " | " << train.rows << " | " << 100 * train.mape << "% | "
              << test.rows << " | " << 100 * test.mape << "% | " << 100 * test.weighted << "% | "
              << 100 * unfitted.mape
              << "%  (half_bytes " << curve.halfBytes << ", exponent " << std::setprecision(2)
              << curve.exponent << ", plateau " << curve.plateau << std::setprecision(1)
              << ")\n";
    heldOutSum += test.mape * test.rows;
    heldOutRows += test.rows;
  }
  std::vector<MeasuredCollective> allHeldOut;
  for (const auto& row : rows)
    if (heldOut(row))
      allHeldOut.push_back(row);
  std::cout << "held-out overall: MAPE " << 100 * heldOutSum / heldOutRows << "%, time-weighted "
            << 100 * collectiveError(allHeldOut, system, model).weighted << "% over "
            << heldOutRows << " rows\n";

  // Fitted on the 1x8 groups only, then priced on the 2x4 and 4x2 groups.
  const CollectiveModel only8 = fit(rows, system, start, /*only1x8=*/true);
  std::vector<MeasuredCollective> smallGroups;
  for (const auto& row : rows)
    if (row.groups > 1 && row.kind != CollectiveKind::SendRecv)
      smallGroups.push_back(row);
  const auto cross = collectiveError(smallGroups, system, only8);
  std::cout << "fitted on 1x8, priced on 2x4 and 4x2: MAPE " << 100 * cross.mape
            << "%, time-weighted " << 100 * cross.weighted << "% over "
            << cross.rows << " rows\n";

  if (argc > 4 && std::string(argv[4]) == "--rows")
    for (const auto& row : rows) {
      const auto estimate =
          estimateCollective(row.kind, row.bytes, {row.ranks, row.ranks}, system, model);
      std::cout << toString(row.kind) << " " << row.groups << "x" << row.ranks << " "
                << row.bytes << " measured " << row.us << " us, predicted " << estimate.ms * 1e3
                << " us (" << toString(estimate.algorithm) << "/" << toString(estimate.protocol)
                << ")\n";
    }
  if (argc > 4 && std::string(argv[4]) == "--write") {
    std::ifstream in(modelPath);
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(in);
    doc["fixed_us"] = model.fixedUs;
    for (const auto& [kind, curve] :
         {std::pair{CollectiveKind::AllReduce, model.bySize[0]},
          std::pair{CollectiveKind::AllGather, model.bySize[1]},
          std::pair{CollectiveKind::ReduceScatter, model.bySize[2]},
          std::pair{CollectiveKind::Broadcast, model.bySize[3]},
          std::pair{CollectiveKind::AllToAll, model.bySize[4]},
          std::pair{CollectiveKind::SendRecv, model.bySize[5]}})
      doc["size_efficiency"][toString(kind)] = {
          {"half_bytes", std::round(curve.halfBytes)},
          {"exponent", std::round(curve.exponent * 100) / 100},
          {"plateau", std::round(curve.plateau * 100) / 100}};
    std::ofstream(modelPath) << doc.dump(2) << "\n";
    std::cout << "wrote " << modelPath << "\n";
  }
  return 0;
}

} // namespace
} // namespace wavecast::bench

int main(int argc, char** argv) {
  return wavecast::bench::run(argc, argv);
}
