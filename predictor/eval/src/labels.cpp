#include "wavecast/eval/labels.h"

#include "wavecast/learned/csv_table.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>

namespace fs = std::filesystem;

namespace wavecast::eval {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : text) {
    if (c == separator) {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  parts.push_back(part);
  return parts;
}

double parseDouble(const std::string& text) {
  return text.empty() ? 0.0 : std::stod(text);
}

bool hasCsvFiles(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".csv")
      return true;
  return false;
}

} // namespace

std::string LabelRun::id() const {
  return model + "-" + mode + "-" + std::to_string(sequence) + "-" + std::to_string(batch);
}

std::vector<std::vector<int64_t>> parseShapeList(const std::string& text) {
  // Tokens: '[' / '(' open, ']' / ')' close, integers; depth 2 closes a shape.
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> current;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '[' || c == '(') {
      ++depth;
      if (depth == 2)
        current.clear();
    } else if (c == ']' || c == ')') {
      if (depth == 2)
        shapes.push_back(current);
      --depth;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') {
      size_t end = i + 1;
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
        ++end;
      if (depth != 2)
        throw std::invalid_argument("unexpected number in shape list '" + text + "'");
      current.push_back(std::stoll(text.substr(i, end - i)));
      i = end - 1;
    } else if (c != ',' && c != ' ') {
      throw std::invalid_argument("cannot read shape list '" + text + "'");
    }
    if (depth < 0)
      throw std::invalid_argument("unbalanced shape list '" + text + "'");
  }
  if (depth != 0)
    throw std::invalid_argument("unbalanced shape list '" + text + "'");
  return shapes;
}

std::vector<int64_t> parseShape(const std::string& text) {
  if (text.empty())
    return {};
  const auto shapes = parseShapeList("[" + text + "]");
  if (shapes.size() != 1)
    throw std::invalid_argument("cannot read shape '" + text + "'");
  return shapes.front();
}

LabelRun readLabelRun(const std::string& gpu, const std::string& csvPath) {
  const fs::path csv(csvPath);
  LabelRun run;
  run.gpu = gpu;
  const std::vector<std::string> parts = split(csv.stem().string(), '-');
  if (parts.size() != 4)
    throw std::runtime_error(csvPath + ": expected <model>-<mode>-<seq>-<batch>.csv");
  run.model = parts[0];
  run.mode = parts[1];
  run.sequence = std::stoll(parts[2]);
  run.batch = std::stoll(parts[3]);

  fs::path jsonPath = csv;
  jsonPath.replace_extension(".json");
  std::ifstream jsonIn(jsonPath);
  if (!jsonIn)
    throw std::runtime_error(jsonPath.string() + " missing: each label .csv needs its .json");
  try {
    const nlohmann::json doc = nlohmann::json::parse(jsonIn);
    run.numLayers = doc.at("num_layer").get<int>();
    run.e2eMs = doc.at("e2e_latency").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(jsonPath.string() + ": " + e.what());
  }

  const learned::CsvTable table = learned::CsvTable::readFile(csvPath);
  const size_t op = table.requireColumn("op");
  const size_t target = table.requireColumn("target");
  const size_t meta = table.requireColumn("meta");
  const size_t inputs = table.requireColumn("input_shapes");
  const size_t output = table.requireColumn("output_shape");
  const size_t dtype = table.requireColumn("dtype");
  const size_t fw = table.requireColumn("fw_latency");
  const size_t bw = table.requireColumn("bw_latency");
  const size_t acc = table.requireColumn("acc_latency");
  const size_t name = table.column("Name").value_or(table.requireColumn("target"));
  // nn_module_stack entries: ('path', <class 'pkg.Class'>)
  static const std::regex moduleEntry(R"(\('([^']*)', <class '([^']*)'>\))");
  static const std::regex repeatedLayer(R"((^|\.)(h|layer|layers)\.0(\.|$))");
  size_t line = 1;
  for (const auto& cells : table.rows()) {
    ++line;
    FxRow row;
    try {
      row.name = cells[name];
      row.kind = cells[op];
      row.target = cells[target];
      const std::string& stack = cells[meta];
      for (auto it = std::sregex_iterator(stack.begin(), stack.end(), moduleEntry);
           it != std::sregex_iterator(); ++it) {
        const std::string path = (*it)[1];
        const std::string cls = (*it)[2];
        row.moduleClass = cls.substr(cls.rfind('.') + 1);
        if (std::regex_search(path, repeatedLayer))
          row.inRepeatedLayer = true;
      }
      row.inputShapes = parseShapeList(cells[inputs]);
      row.outputShape = parseShape(cells[output]);
      row.dtype = cells[dtype];
      row.forwardMs = parseDouble(cells[fw]);
      row.backwardMs = parseDouble(cells[bw]);
      row.accumulateMs = parseDouble(cells[acc]);
    } catch (const std::exception& e) {
      throw std::runtime_error(csvPath + " line " + std::to_string(line) + ": " + e.what());
    }
    run.rows.push_back(std::move(row));
  }
  return run;
}

LabelListing listLabels(const std::string& dir, const std::vector<std::string>& gpus) {
  const fs::path root(dir);
  if (!fs::is_directory(root))
    throw std::runtime_error(dir + " is not a folder: pass NeuSight's labels/ folder or one "
                                   "GPU folder inside it");
  std::vector<fs::path> gpuDirs;
  if (hasCsvFiles(root)) {
    gpuDirs.push_back(root);
  } else {
    for (const auto& entry : fs::directory_iterator(root))
      if (entry.is_directory())
        gpuDirs.push_back(entry.path());
  }
  std::sort(gpuDirs.begin(), gpuDirs.end());
  LabelListing listing;
  for (const fs::path& gpuDir : gpuDirs) {
    const std::string gpu = gpuDir.filename().string();
    if (!gpus.empty() && std::find(gpus.begin(), gpus.end(), gpu) == gpus.end())
      continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(gpuDir))
      files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      fs::path twin = file;
      if (file.extension() == ".csv") {
        listing.runs.push_back({gpu, file.string()});
      } else if (file.extension() == ".json" && !fs::exists(twin.replace_extension(".csv"))) {
        listing.withoutRows.push_back(gpu + "/" + file.filename().string());
      }
    }
  }
  return listing;
}

} // namespace wavecast::eval
