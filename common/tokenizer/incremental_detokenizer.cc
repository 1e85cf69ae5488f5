#include "common/tokenizer/incremental_detokenizer.h"

#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer {
namespace {

bool EndsWithReplacement(const std::string& s) {
  return s.size() >= kReplacementChar.size() &&
         s.compare(s.size() - kReplacementChar.size(), kReplacementChar.size(), kReplacementChar) == 0;
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::DecodeRange(size_t begin, size_t end) const {
  auto text = tokenizer_.Decode(std::span<const TokenId>(ids_.data() + begin, end - begin), skip_special_tokens_);
  return text.ok() ? *std::move(text) : std::string();
}

std::string IncrementalDetokenizer::Add(TokenId id) {
  ids_.push_back(id);
  // A ByteFallback run decodes as a unit (an invalid byte later turns the
  // whole run into U+FFFD), so nothing is emitted until the run ends. Ids
  // that decode to nothing (unknown ids, skipped special tokens) are dropped
  // before the decoder and so do not end a run.
  if (tokenizer_.IsByteFallbackPiece(id)) {
    in_byte_run_ = true;
    return std::string();
  }
  const bool invisible = !tokenizer_.IdToToken(id).has_value() || (skip_special_tokens_ && tokenizer_.IsSpecial(id));
  if (invisible && in_byte_run_) return std::string();
  in_byte_run_ = false;
  const std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  const std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  // A trailing U+FFFD may be an incomplete character: wait for more ids.
  if (new_text.size() <= prefix_text.size() || EndsWithReplacement(new_text) ||
      new_text.compare(0, prefix_text.size(), prefix_text) != 0) {
    return std::string();
  }
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return new_text.substr(prefix_text.size());
}

std::string IncrementalDetokenizer::Finish() {
  const std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  const std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  prefix_offset_ = read_offset_ = ids_.size();
  if (new_text.size() <= prefix_text.size() || new_text.compare(0, prefix_text.size(), prefix_text) != 0) {
    return std::string();
  }
  return new_text.substr(prefix_text.size());
}

}  // namespace tandem::tokenizer
