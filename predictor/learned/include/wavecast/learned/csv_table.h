// A small RFC 4180 reader (quoted fields may hold commas, quotes and newlines),
// enough for NeuSight's kernel and label files.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace wavecast::learned {

class CsvTable {
public:
  // Throws std::runtime_error naming the file when it cannot be read or is empty.
  static CsvTable readFile(const std::string& path);
  static CsvTable parse(const std::string& text);

  const std::vector<std::string>& header() const { return header_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }
  std::optional<size_t> column(const std::string& name) const;
  // Throws std::runtime_error naming the column when it is missing.
  size_t requireColumn(const std::string& name) const;

private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

} // namespace wavecast::learned
