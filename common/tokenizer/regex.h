// A compiled PCRE2 pattern (UTF + UCP, so \p{L}, \s and \w are Unicode-aware as
// in the Oniguruma patterns of tokenizer.json). Immutable after Compile;
// thread-safe (each search allocates its own match data).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/status.h"

namespace tandem::tokenizer {

class Regex {
 public:
  // Fails with InvalidArgument naming the pattern and PCRE2's message.
  static StatusOr<Regex> Compile(std::string_view pattern);
  // Escapes `literal` so that it matches itself.
  static std::string Escape(std::string_view literal);

  // Every non-overlapping match in `text`, as [begin, end) byte offsets, left
  // to right. Empty matches are skipped. `text` must be valid UTF-8.
  StatusOr<std::vector<std::pair<size_t, size_t>>> FindAll(std::string_view text) const;

 private:
  struct Code;
  explicit Regex(std::shared_ptr<const Code> code) : code_(std::move(code)) {}
  std::shared_ptr<const Code> code_;
};

}  // namespace tandem::tokenizer
