#include "wavecast/eval/collective_table.h"

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace wavecast::bench {
namespace {

std::vector<std::string> splitCsv(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  std::string cell;
  while (std::getline(stream, cell, ','))
    cells.push_back(cell);
  if (!line.empty() && line.back() == ',')
    cells.emplace_back();
  return cells;
}

} // namespace

std::vector<MeasuredCollective> readXlaCollectives(const std::string& path,
                                                   const std::string& arch) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path + ": cannot open");
  std::string line;
  std::getline(in, line);
  std::map<std::string, size_t> column;
  const auto header = splitCsv(line);
  for (size_t i = 0; i < header.size(); ++i)
    column[header[i]] = i;
  for (const char* name : {"arch", "opcode", "elements", "bytes", "devices_per_group",
                           "num_replica_groups", "sweep_bytes", "implied_time_us", "num_devices"})
    if (!column.count(name))
      throw std::runtime_error(path + ": no column '" + name + "'");
  const std::map<std::string, CollectiveKind> kinds = {
      {"all-reduce", CollectiveKind::AllReduce},
      {"all-gather", CollectiveKind::AllGather},
      {"reduce-scatter", CollectiveKind::ReduceScatter},
      {"all-to-all", CollectiveKind::AllToAll},
      {"collective-permute", CollectiveKind::SendRecv}};
  std::vector<MeasuredCollective> rows;
  while (std::getline(in, line)) {
    const auto cells = splitCsv(line);
    if (cells.size() < header.size() || cells[column["arch"]] != arch)
      continue;
    const auto kind = kinds.find(cells[column["opcode"]]);
    const std::string& time = cells[column["implied_time_us"]];
    if (kind == kinds.end() || time.empty())
      continue;
    MeasuredCollective row;
    row.kind = kind->second;
    row.bytes = std::stoll(cells[column["sweep_bytes"]]);
    row.us = std::stod(time);
    row.sizeIndex =
        static_cast<int>(std::lround(std::log2(std::stod(cells[column["elements"]]))));
    if (row.kind == CollectiveKind::SendRecv) {
      row.ranks = 2;
      row.groups = std::stoi(cells[column["num_devices"]]);
    } else {
      row.ranks = std::stoi(cells[column["devices_per_group"]]);
      row.groups = std::stoi(cells[column["num_replica_groups"]]);
    }
    if (row.us > 0)
      rows.push_back(row);
  }
  return rows;
}

bool heldOut(const MeasuredCollective& row) {
  return row.sizeIndex % 2 == 1;
}

CollectiveError collectiveError(const std::vector<MeasuredCollective>& rows,
                                const SystemSpec& system, const CollectiveModel& model) {
  CollectiveError error;
  double measured = 0;
  for (const auto& row : rows) {
    const CommGroup group{row.ranks, row.ranks};
    const double us = estimateCollective(row.kind, row.bytes, group, system, model).ms * 1e3;
    error.mape += std::abs(us - row.us) / row.us;
    error.weighted += std::abs(us - row.us);
    measured += row.us;
    ++error.rows;
  }
  if (error.rows > 0) {
    error.mape /= error.rows;
    error.weighted /= measured;
  }
  return error;
}

} // namespace wavecast::bench
