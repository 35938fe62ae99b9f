#include "wavecast/learned/csv_table.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace wavecast::learned {

CsvTable CsvTable::readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  CsvTable table = parse(text.str());
  if (table.header_.empty())
    throw std::runtime_error(path + " is empty");
  return table;
}

CsvTable CsvTable::parse(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false;
  bool any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      record.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')
        ++i;
      if (any || !field.empty()) {
        record.push_back(std::move(field));
        records.push_back(std::move(record));
      }
      field.clear();
      record.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (any || !field.empty()) {
    record.push_back(std::move(field));
    records.push_back(std::move(record));
  }
  CsvTable table;
  if (records.empty())
    return table;
  table.header_ = std::move(records.front());
  for (size_t r = 1; r < records.size(); ++r) {
    records[r].resize(table.header_.size());
    table.rows_.push_back(std::move(records[r]));
  }
  return table;
}

std::optional<size_t> CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == name)
      return i;
  return std::nullopt;
}

size_t CsvTable::requireColumn(const std::string& name) const {
  if (auto index = column(name))
    return *index;
  throw std::runtime_error("CSV has no column '" + name + "'");
}

} // namespace wavecast::learned
