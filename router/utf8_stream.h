// UTF-8 helpers for streamed text: every byte the router sends is valid UTF-8.
//
// Utf8Assembler sits between a token decoder (which may end a piece in the
// middle of a multibyte character) and the client: it passes on complete
// characters, holds back a trailing partial one, and replaces invalid bytes
// with U+FFFD (one per maximal invalid subpart, as Unicode recommends).
// Thread rule: one owner at a time.
#pragma once

#include <string>
#include <string_view>

namespace tandem::router {

// True when `text` is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool IsValidUtf8(std::string_view text);

// Returns `text` with every invalid subpart replaced by U+FFFD (a truncated
// final sequence too).
std::string SanitizeUtf8(std::string_view text);

class Utf8Assembler {
 public:
  // Appends bytes; returns the longest valid prefix that is now complete.
  std::string Add(std::string_view bytes);
  // End of stream: a held-back partial character becomes U+FFFD.
  std::string Finish();
  // Bytes currently held back (0..3).
  size_t held_bytes() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace tandem::router
