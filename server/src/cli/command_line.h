// A small command-line parser: long options (--name VALUE, --name=VALUE,
// flags) and positional arguments, checked against a declared option list.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace wavecast::cli {

// A usage mistake; main() prints it on one line with the command's help hint.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct OptionSpec {
  std::string name;      // without dashes: "batch-size"
  std::string valueName; // empty for flags: "N"
  std::string help;
};

struct CommandSpec {
  std::string name;     // "predict"
  std::string synopsis; // "FILE.py --gpu NAME[,NAME...] [options]"
  std::string summary;  // sentences, wrapped when printed; the first one lists the command
  std::vector<OptionSpec> options;
  size_t minPositional = 0;
  size_t maxPositional = 0;
  // Words after "--" are passed on (rest()), not parsed: the traced script's arguments.
  bool passesRest = false;
};

class CommandLine {
public:
  // Throws UsageError for an unknown option, a missing value or a wrong number
  // of positional arguments. "--help" is always accepted.
  static CommandLine parse(const CommandSpec& spec, const std::vector<std::string>& args);

  bool helpRequested() const { return help_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  // The last value given for `name`.
  std::optional<std::string> value(const std::string& name) const;
  // Every value given for a repeatable option, in order.
  std::vector<std::string> values(const std::string& name) const;
  // The value as an integer of at least `minimum`; UsageError naming the option otherwise.
  std::optional<long long> integerAtLeast(const std::string& name, long long minimum) const;
  std::optional<long long> positiveInt(const std::string& name) const {
    return integerAtLeast(name, 1);
  }
  const std::vector<std::string>& positional() const { return positional_; }
  // The words after "--" of a command that passes them on (CommandSpec::passesRest).
  const std::vector<std::string>& rest() const { return rest_; }

private:
  bool help_ = false;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  std::vector<std::string> rest_;
};

// Help text is wrapped to this many columns.
constexpr size_t kHelpWidth = 80;

// "usage: ...", the summary and every option, wrapped at word boundaries.
std::string formatHelp(const CommandSpec& spec);
// `text` with its words wrapped into lines of at most `width` columns, as if
// printed from column `indent`; lines after the first are indented to it. A
// word longer than a line stands alone.
std::string wrapText(const std::string& text, size_t width, size_t indent);
// `text` up to the end of its first sentence (". "), or all of it.
std::string firstSentence(const std::string& text);
// "a,b , c" -> {"a","b","c"}; empty items dropped.
std::vector<std::string> splitList(const std::string& text);

} // namespace wavecast::cli
