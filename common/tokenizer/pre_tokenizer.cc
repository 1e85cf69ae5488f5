#include "common/tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "common/tokenizer/normalizer.h"
#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer {
namespace {

constexpr int kMaxDepth = 16;
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string ByteLevelEncode(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  const auto& table = ByteToUnicode();
  for (char c : text) AppendUtf8(table[static_cast<unsigned char>(c)], &out);
  return out;
}

}  // namespace

Status PreTokenizer::AddSteps(const nlohmann::json& spec, int depth, std::vector<Step>* steps) {
  if (spec.is_null()) return Status::Ok();
  if (depth > kMaxDepth) return InvalidArgumentError("pre_tokenizer nesting too deep");
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    return InvalidArgumentError("pre_tokenizer must be an object with a string 'type'");
  }
  const std::string type = spec["type"].get<std::string>();
  Step step{};
  if (type == "Sequence") {
    const auto it = spec.find("pretokenizers");
    if (it == spec.end() || !it->is_array()) {
      return InvalidArgumentError("pre_tokenizer Sequence needs a 'pretokenizers' array");
    }
    for (const auto& child : *it) TANDEM_RETURN_IF_ERROR(AddSteps(child, depth + 1, steps));
    return Status::Ok();
  }
  if (type == "Split") {
    step.kind = Kind::kSplit;
    const auto& pattern = spec.value("pattern", nlohmann::json::object());
    if (pattern.contains("String") && pattern["String"].is_string()) {
      step.literal = pattern["String"].get<std::string>();
      if (step.literal.empty()) return InvalidArgumentError("Split with an empty pattern");
    } else if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      TANDEM_ASSIGN_OR_RETURN(Regex re, Regex::Compile(pattern["Regex"].get<std::string>()));
      step.regex = std::move(re);
    } else {
      return InvalidArgumentError("Split pre_tokenizer needs pattern.String or pattern.Regex");
    }
    const std::string behavior = spec.value("behavior", std::string("Isolated"));
    if (behavior == "Isolated") {
      step.behavior = Behavior::kIsolated;
    } else if (behavior == "Removed") {
      step.behavior = Behavior::kRemoved;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = Behavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      step.behavior = Behavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      step.behavior = Behavior::kContiguous;
    } else {
      return InvalidArgumentError("unsupported Split behavior '" + behavior + "'");
    }
    step.invert = spec.value("invert", false);
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
    step.add_prefix_space = spec.value("add_prefix_space", true);
    if (spec.value("use_regex", true)) {
      TANDEM_ASSIGN_OR_RETURN(Regex re, Regex::Compile(kGpt2Pattern));
      step.regex = std::move(re);
    }
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.replacement = spec.value("replacement", std::string("\xE2\x96\x81"));
    step.prepend_scheme = spec.value("prepend_scheme", std::string());
    if (step.prepend_scheme.empty()) {
      step.prepend_scheme = spec.value("add_prefix_space", true) ? "always" : "never";
    }
    step.split = spec.value("split", true);
  } else if (type == "Whitespace" || type == "WhitespaceSplit" || type == "Digits") {
    step.kind = Kind::kSplit;
    std::string pattern = R"(\w+|[^\w\s]+)";
    if (type == "WhitespaceSplit") {
      pattern = R"(\s+)";
      step.behavior = Behavior::kRemoved;
    } else if (type == "Digits") {
      pattern = R"(\p{Nd})";
      step.behavior = spec.value("individual_digits", false) ? Behavior::kIsolated : Behavior::kContiguous;
    } else {
      step.invert = true;
      step.behavior = Behavior::kRemoved;
    }
    TANDEM_ASSIGN_OR_RETURN(Regex re, Regex::Compile(pattern));
    step.regex = std::move(re);
  } else {
    return InvalidArgumentError("unsupported pre_tokenizer type '" + type + "'");
  }
  steps->push_back(std::move(step));
  return Status::Ok();
}

StatusOr<PreTokenizer> PreTokenizer::FromJson(const nlohmann::json& spec) {
  PreTokenizer p;
  TANDEM_RETURN_IF_ERROR(AddSteps(spec, 0, &p.steps_));
  return p;
}

StatusOr<std::vector<std::pair<size_t, size_t>>> PreTokenizer::Matches(const Step& step, std::string_view text) {
  if (step.regex) return step.regex->FindAll(text);
  std::vector<std::pair<size_t, size_t>> out;
  size_t pos = 0;
  while ((pos = text.find(step.literal, pos)) != std::string_view::npos) {
    out.emplace_back(pos, pos + step.literal.size());
    pos += step.literal.size();
  }
  return out;
}

Status PreTokenizer::ApplySplit(const Step& step, std::string_view text, std::vector<std::string>* out) {
  TANDEM_ASSIGN_OR_RETURN(auto matches, Matches(step, text));
  // Pieces as (begin, end, is_match) covering the whole text.
  struct Piece {
    size_t begin, end;
    bool match;
  };
  std::vector<Piece> pieces;
  size_t last = 0;
  for (const auto& [b, e] : matches) {
    if (b > last) pieces.push_back({last, b, step.invert});
    pieces.push_back({b, e, !step.invert});
    last = e;
  }
  if (last < text.size()) pieces.push_back({last, text.size(), step.invert});

  // Mirrors the Hugging Face fold: a match merges with its neighbour only when
  // that neighbour is not itself a match.
  std::vector<std::pair<size_t, size_t>> result;
  bool previous_match = false;
  if (step.behavior == Behavior::kMergedWithNext) {
    for (size_t i = pieces.size(); i-- > 0;) {
      const Piece& p = pieces[i];
      if (p.match && !previous_match && !result.empty()) {
        result.back().first = p.begin;
      } else {
        result.emplace_back(p.begin, p.end);
      }
      previous_match = p.match;
    }
    std::reverse(result.begin(), result.end());
  } else {
    for (const Piece& p : pieces) {
      switch (step.behavior) {
        case Behavior::kRemoved:
          if (!p.match) result.emplace_back(p.begin, p.end);
          break;
        case Behavior::kMergedWithPrevious:
          if (p.match && !previous_match && !result.empty()) {
            result.back().second = p.end;
          } else {
            result.emplace_back(p.begin, p.end);
          }
          break;
        case Behavior::kContiguous:
          if (p.match == previous_match && !result.empty()) {
            result.back().second = p.end;
          } else {
            result.emplace_back(p.begin, p.end);
          }
          break;
        default: result.emplace_back(p.begin, p.end);
      }
      previous_match = p.match;
    }
  }
  for (const auto& [b, e] : result) {
    if (e > b) out->emplace_back(text.substr(b, e - b));
  }
  return Status::Ok();
}

Status PreTokenizer::Apply(const Step& step, std::string_view text, bool at_text_start,
                           std::vector<std::string>* out) const {
  switch (step.kind) {
    case Kind::kSplit: return ApplySplit(step, text, out);
    case Kind::kByteLevel: {
      std::string prefixed;
      if (step.add_prefix_space && !text.empty() && text.front() != ' ') {
        prefixed = " " + std::string(text);
        text = prefixed;
      }
      if (!step.regex) {
        out->push_back(ByteLevelEncode(text));
        return Status::Ok();
      }
      TANDEM_ASSIGN_OR_RETURN(auto matches, step.regex->FindAll(text));
      size_t last = 0;
      for (const auto& [b, e] : matches) {
        if (b > last) out->push_back(ByteLevelEncode(text.substr(last, b - last)));
        out->push_back(ByteLevelEncode(text.substr(b, e - b)));
        last = e;
      }
      if (last < text.size()) out->push_back(ByteLevelEncode(text.substr(last)));
      return Status::Ok();
    }
    case Kind::kMetaspace: {
      std::string s = ReplaceAll(text, " ", step.replacement);
      const bool prepend = step.prepend_scheme == "always" || (step.prepend_scheme == "first" && at_text_start);
      if (prepend && s.compare(0, step.replacement.size(), step.replacement) != 0) {
        s = step.replacement + s;
      }
      if (!step.split) {
        out->push_back(std::move(s));
        return Status::Ok();
      }
      Step split_step{};
      split_step.kind = Kind::kSplit;
      split_step.literal = step.replacement;
      split_step.behavior = Behavior::kMergedWithNext;
      return ApplySplit(split_step, s, out);
    }
  }
  return Status::Ok();
}

Status PreTokenizer::Split(std::string_view text, bool at_text_start, std::vector<std::string>* words) const {
  if (steps_.empty()) {
    if (!text.empty()) words->emplace_back(text);
    return Status::Ok();
  }
  std::vector<std::string> current{std::string(text)};
  std::vector<std::string> next;
  for (const Step& step : steps_) {
    next.clear();
    for (size_t i = 0; i < current.size(); ++i) {
      TANDEM_RETURN_IF_ERROR(Apply(step, current[i], at_text_start && i == 0, &next));
    }
    current.swap(next);
  }
  for (auto& w : current) {
    if (!w.empty()) words->push_back(std::move(w));
  }
  return Status::Ok();
}

}  // namespace tandem::tokenizer
