// The `decoder` section of tokenizer.json: turns token strings back into text.
// Supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence.
// Immutable after FromJson; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace tandem::tokenizer {

class Decoder {
 public:
  // `spec` may be null (tokens are concatenated as they are).
  static StatusOr<Decoder> FromJson(const nlohmann::json& spec);

  // Applies the chain to `tokens` and concatenates the result. The result is
  // always valid UTF-8 (invalid bytes become U+FFFD).
  std::string Decode(std::vector<std::string> tokens) const;
  // The same concatenation as raw bytes, not made valid UTF-8.
  std::string DecodeBytes(std::vector<std::string> tokens) const;
  // True when the chain has ByteFallback: a run of <0xXX> tokens decodes as
  // one unit (all U+FFFD if the run is invalid UTF-8).
  bool has_byte_fallback() const;

 private:
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  struct Step {
    Kind kind;
    std::string pattern, content;  // Replace; Strip content; Metaspace replacement
    int start = 0, stop = 0;       // Strip
    bool prepend = true;           // Metaspace: strip the first token's leading space
  };
  static Status AddSteps(const nlohmann::json& spec, int depth, std::vector<Step>* steps);
  static void Apply(const Step& step, std::vector<std::string>* tokens);
  std::vector<Step> steps_;
};

// "<0xAB>"-style byte token.
bool IsByteFallbackToken(const std::string& token);

}  // namespace tandem::tokenizer
