// UTF-8 helpers shared by the tokenizer and the chat-template renderer: code
// point iteration, encoding, lossy repair (invalid bytes -> U+FFFD exactly like
// Rust's String::from_utf8_lossy and the WHATWG decoder), and the GPT-2
// byte-to-unicode table used by ByteLevel. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tokenizer {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length in bytes of the valid UTF-8 sequence starting at text[pos], or 0 if
// the bytes there are not a complete, valid sequence.
int ValidUtf8SequenceLength(std::string_view text, size_t pos);

// Decodes the code point at text[*pos] and advances *pos. Invalid bytes decode
// as U+FFFD and advance by one maximal invalid subpart.
char32_t NextCodePoint(std::string_view text, size_t* pos);

void AppendUtf8(char32_t cp, std::string* out);

// Replaces every maximal invalid subpart with U+FFFD.
std::string Utf8Lossy(std::string_view bytes);

bool IsValidUtf8(std::string_view text);

// Number of trailing bytes that form an incomplete (but so far valid) UTF-8
// sequence prefix; 0 when the text ends on a character boundary.
int IncompleteUtf8Tail(std::string_view text);

// Unicode White_Space (as Rust's char::is_whitespace).
bool IsUnicodeWhitespace(char32_t cp);

// GPT-2 byte <-> printable code point map used by ByteLevel.
const std::array<char32_t, 256>& ByteToUnicode();
// Returns the byte for a ByteLevel code point, or -1.
int UnicodeToByte(char32_t cp);

}  // namespace tandem::tokenizer
