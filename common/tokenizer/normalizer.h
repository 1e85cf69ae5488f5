// The `normalizer` section of tokenizer.json: a flat list of steps (Sequence is
// flattened) applied to text that is not an added token. Supported: NFC, NFD,
// NFKC, NFKD (utf8proc), Lowercase, Prepend, Replace (string or regex), Strip.
// Immutable after FromJson; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"
#include "common/tokenizer/regex.h"

namespace tandem::tokenizer {

class Normalizer {
 public:
  // `spec` may be null (no normalization). Unknown types -> InvalidArgument.
  static StatusOr<Normalizer> FromJson(const nlohmann::json& spec);

  bool empty() const { return steps_.empty(); }
  // REQUIRES: text is valid UTF-8.
  StatusOr<std::string> Normalize(std::string_view text) const;

 private:
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kPrepend, kReplace, kStrip };
  struct Step {
    Kind kind;
    std::string pattern;  // Replace (string form) / Prepend content
    std::string content;  // Replace content
    std::optional<Regex> regex;
    bool strip_left = false, strip_right = false;
  };
  static Status AddSteps(const nlohmann::json& spec, int depth, std::vector<Step>* steps);
  std::vector<Step> steps_;
};

// Replaces every occurrence of `from` (non-empty) in `text` by `to`.
std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to);

}  // namespace tandem::tokenizer
