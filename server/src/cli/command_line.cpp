#include "cli/command_line.h"

#include <sstream>

namespace wavecast::cli {
namespace {

const OptionSpec* findOption(const CommandSpec& spec, const std::string& name) {
  for (const auto& option : spec.options)
    if (option.name == name)
      return &option;
  return nullptr;
}

std::string helpHint(const CommandSpec& spec) {
  return "; run 'wavecast " + spec.name + " --help' for usage";
}

} // namespace

CommandLine CommandLine::parse(const CommandSpec& spec, const std::vector<std::string>& args) {
  CommandLine result;
  bool onlyPositional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (onlyPositional || arg.size() < 2 || arg[0] != '-') {
      result.positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      if (spec.passesRest) {
        result.rest_.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
        break;
      }
      onlyPositional = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      result.help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0)
      throw UsageError("unknown option '" + arg + "'" + helpHint(spec));
    std::string name = arg.substr(2);
    std::optional<std::string> inlineValue;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inlineValue = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const OptionSpec* option = findOption(spec, name);
    if (!option)
      throw UsageError("unknown option '--" + name + "' for 'wavecast " + spec.name + "'" +
                       helpHint(spec));
    if (option->valueName.empty()) {
      if (inlineValue)
        throw UsageError("option '--" + name + "' takes no value" + helpHint(spec));
      result.values_[name].push_back("");
      continue;
    }
    if (!inlineValue) {
      if (i + 1 >= args.size())
        throw UsageError("option '--" + name + "' needs a value (" + option->valueName + ")" +
                         helpHint(spec));
      inlineValue = args[++i];
    }
    result.values_[name].push_back(*inlineValue);
  }
  if (result.help_)
    return result;
  if (result.positional_.size() < spec.minPositional)
    throw UsageError("'wavecast " + spec.name + "' expects " + spec.synopsis + helpHint(spec));
  if (result.positional_.size() > spec.maxPositional)
    throw UsageError("unexpected argument '" + result.positional_[spec.maxPositional] + "'" +
                     helpHint(spec));
  return result;
}

std::optional<std::string> CommandLine::value(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end())
    return std::nullopt;
  return it->second.back();
}

std::vector<std::string> CommandLine::values(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>() : it->second;
}

std::optional<long long> CommandLine::integerAtLeast(const std::string& name,
                                                     long long minimum) const {
  const auto text = value(name);
  if (!text)
    return std::nullopt;
  size_t used = 0;
  long long number = 0;
  try {
    number = std::stoll(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text->size() || used == 0 || number < minimum)
    throw UsageError("--" + name + " must be " +
                     (minimum == 1   ? std::string("a positive integer")
                      : minimum == 0 ? std::string("a non-negative integer")
                                     : "an integer of at least " + std::to_string(minimum)) +
                     ", not '" + *text + "'");
  return number;
}

std::string wrapText(const std::string& text, size_t width, size_t indent) {
  std::istringstream words(text);
  std::string out;
  std::string word;
  size_t column = indent;
  while (words >> word) {
    if (column > indent && column + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
  }
  return out;
}

std::string firstSentence(const std::string& text) {
  const size_t end = text.find(". ");
  return end == std::string::npos ? text : text.substr(0, end + 1);
}

std::string formatHelp(const CommandSpec& spec) {
  constexpr size_t kHelpColumn = 28;
  std::ostringstream out;
  out << "usage: wavecast " << spec.name << " " << spec.synopsis << "\n\n"
      << wrapText(spec.summary, kHelpWidth, 0) << "\n";
  if (!spec.options.empty()) {
    out << "\noptions:\n";
    for (const auto& option : spec.options) {
      std::string left = "  --" + option.name;
      if (!option.valueName.empty())
        left += " " + option.valueName;
      // A long option name puts its help on the next line, at the help column.
      if (left.size() + 2 > kHelpColumn)
        out << left << "\n" << std::string(kHelpColumn, ' ');
      else
        out << left << std::string(kHelpColumn - left.size(), ' ');
      out << wrapText(option.help, kHelpWidth, kHelpColumn) << "\n";
    }
    out << "  --help                    show this help\n";
  }
  return out.str();
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    if (first != std::string::npos)
      items.push_back(item.substr(first, last - first + 1));
  }
  return items;
}

} // namespace wavecast::cli
