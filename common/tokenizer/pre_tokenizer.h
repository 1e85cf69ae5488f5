// The `pre_tokenizer` section of tokenizer.json: splits normalized text into
// words for the model. Supported: Split (regex or string; Isolated, Removed,
// MergedWithPrevious, MergedWithNext, Contiguous; invert), ByteLevel (with the
// GPT-2 regex when use_regex), Metaspace (prepend_scheme always/first/never,
// split), Whitespace, WhitespaceSplit, Digits, Sequence.
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

class PreTokenizer {
 public:
  // `spec` may be null (the whole text is one word).
  static StatusOr<PreTokenizer> FromJson(const nlohmann::json& spec);

  // Appends the words of `text` to *words. `at_text_start` is true when `text`
  // begins at offset 0 of the caller's input (Metaspace prepend_scheme=first).
  Status Split(std::string_view text, bool at_text_start, std::vector<std::string>* words) const;

 private:
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    Kind kind;
    std::optional<Regex> regex;  // Split (regex form), ByteLevel use_regex
    std::string literal;         // Split (string form)
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    std::string replacement;        // Metaspace
    std::string prepend_scheme;     // Metaspace: always | first | never
    bool split = true;              // Metaspace
  };
  static Status AddSteps(const nlohmann::json& spec, int depth, std::vector<Step>* steps);
  static StatusOr<std::vector<std::pair<size_t, size_t>>> Matches(const Step& step, std::string_view text);
  static Status ApplySplit(const Step& step, std::string_view text, std::vector<std::string>* out);
  Status Apply(const Step& step, std::string_view text, bool at_text_start, std::vector<std::string>* out) const;

  std::vector<Step> steps_;
};

}  // namespace tandem::tokenizer
