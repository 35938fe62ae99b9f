// The one parser of a layout written as words (CLI flags, the daemon's target settings).
#include "wavecast/predictor/parallel.h"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace wavecast {
namespace {

std::optional<int> number(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1)
    return std::nullopt;
  return value;
}

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Words apart: commas separate as spaces do, and a multiplication sign reads as "x" (the
// editor shows a target as "8\u00d7 H100-SXM, FSDP").
std::string spaced(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i, 2) == "\u00d7") {
      out += 'x';
      ++i;
    } else {
      out += text[i] == ',' ? ' ' : text[i];
    }
  }
  return out;
}

bool isCount(std::string_view word) {
  return word.size() >= 2 && (word.back() == 'x' || word.back() == 'X') &&
         std::all_of(word.begin(), word.end() - 1,
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

} // namespace

std::variant<ParallelTarget, TargetTextProblem> parseParallelTarget(std::string_view text) {
  ParallelTarget target;
  bool dpGiven = false;
  std::istringstream words{spaced(text)};
  std::string original;
  while (words >> original) {
    // "8x H100-SXM": the count, then the GPU as the next word.
    std::string next;
    if (isCount(original) && words >> next)
      original += next;
    const std::string word = lower(original);
    const auto bad = [&](TargetTextProblemKind kind) { return TargetTextProblem{kind, original}; };
    if (const auto sharding = shardingFromString(word)) {
      target.config.sharding = *sharding;
    } else if (const auto schedule = pipelineScheduleFromString(word)) {
      target.config.schedule = *schedule;
    } else if (word == "sp") {
      target.config.sequenceParallel = true;
    } else if (word == "recompute") {
      target.config.recompute = true;
    } else if (word == "ops") {
      // "recompute ops": torchtitan's per-op selective recomputation.
      target.config.recompute = true;
      target.config.recomputePolicy = RecomputePolicy::SelectiveOps;
    } else if (word == "every") {
      // "recompute every 2": every second block.
      std::string count;
      words >> count;
      const auto k = number(count);
      if (!k)
        return TargetTextProblem{TargetTextProblemKind::BadNumber, "every " + count};
      target.config.recompute = true;
      target.config.recomputeEvery = *k;
    } else if (word == "param" || word == "reduce") {
      // "param bf16 reduce fp32": FSDP2's MixedPrecisionPolicy.
      std::string name;
      words >> name;
      const auto dtype = precisionFromWord(lower(name));
      if (!dtype)
        return TargetTextProblem{TargetTextProblemKind::UnknownWord, word + " " + name};
      (word == "param" ? target.config.paramDtype : target.config.reduceDtype) = *dtype;
    } else if (word == "ddp") {
      target.config.sharding = Sharding::None;
    } else if (const auto x = word.find('x'); x != std::string::npos && x > 0 &&
                                              std::isdigit(static_cast<unsigned char>(word[0]))) {
      const auto count = number(std::string_view(word).substr(0, x));
      if (!count || x + 1 == word.size())
        return bad(TargetTextProblemKind::BadNumber);
      target.gpuCount = *count;
      target.gpu = original.substr(x + 1);
    } else {
      int* degree = nullptr;
      std::string_view digits;
      for (auto [prefix, field] : {std::pair<std::string_view, int*>{"dp", &target.config.dp},
                                   {"tp", &target.config.tp},
                                   {"pp", &target.config.pp},
                                   {"ep", &target.config.ep},
                                   {"mb", &target.config.microbatches}}) {
        if (startsWith(word, prefix)) {
          degree = field;
          digits = std::string_view(word).substr(prefix.size());
          dpGiven |= prefix == "dp";
        }
      }
      if (startsWith(word, "bucket")) {
        const auto mib = number(std::string_view(word).substr(6));
        if (!mib)
          return bad(TargetTextProblemKind::BadNumber);
        target.config.bucketBytes = int64_t{*mib} << 20;
        continue;
      }
      if (!degree)
        return bad(TargetTextProblemKind::UnknownWord);
      const auto value = number(digits);
      if (!value)
        return bad(TargetTextProblemKind::BadNumber);
      *degree = *value;
    }
  }
  if (target.gpuCount > 0 && !dpGiven) {
    const int modelParallel = target.config.tp * target.config.pp;
    if (target.gpuCount % modelParallel != 0)
      return TargetTextProblem{TargetTextProblemKind::CountNotDivisible,
                               std::to_string(target.gpuCount)};
    target.config.dp = target.gpuCount / modelParallel;
  }
  return target;
}

std::string parallelConfigText(const ParallelConfig& config) {
  std::string text = "dp" + std::to_string(config.dp) + " tp" + std::to_string(config.tp) + " pp" +
                     std::to_string(config.pp) + " mb" + std::to_string(config.microbatches) + " " +
                     toString(config.sharding);
  if (config.ep > 1)
    text += " ep" + std::to_string(config.ep);
  if (config.sequenceParallel)
    text += " sp";
  if (config.recompute)
    text += " recompute";
  if (config.recompute && config.recomputePolicy == RecomputePolicy::SelectiveOps)
    text += " ops";
  if (config.recompute && config.recomputeEvery != 1)
    text += " every " + std::to_string(config.recomputeEvery);
  if (config.paramDtype)
    text += std::string(" param ") + precisionWord(*config.paramDtype);
  if (config.reduceDtype)
    text += std::string(" reduce ") + precisionWord(*config.reduceDtype);
  text += std::string(" ") + toString(config.schedule);
  return text;
}

} // namespace wavecast
