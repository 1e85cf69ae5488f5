// Streaming detokenization: ids arrive one at a time and Add returns the text
// they complete. Emitted text is always valid UTF-8 (a partial multibyte
// character is held back until it completes), decoder effects such as
// SentencePiece's leading-space strip are honored by decoding a short window
// of previous ids, a run of byte-fallback tokens is held until it ends (HF
// decodes the run as one unit), and the concatenation of every Add plus Finish equals
// Tokenizer::Decode of all ids.
//
// Thread rule: one per stream; not thread-safe. The tokenizer must outlive it.
#pragma once

#include <string>
#include <vector>

#include "common/base/ids.h"
#include "common/tokenizer/tokenizer.h"

namespace tandem::tokenizer {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Newly completed text (may be empty).
  std::string Add(TokenId id);
  // Whatever is still held back; invalid tail bytes become U+FFFD like HF.
  std::string Finish();

 private:
  std::string DecodeRange(size_t begin, size_t end) const;

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<TokenId> ids_;
  size_t prefix_offset_ = 0;  // window start: ids before it are settled
  size_t read_offset_ = 0;    // ids before it have been emitted
  bool in_byte_run_ = false;  // the last visible id was a byte-fallback piece
};

}  // namespace tandem::tokenizer
