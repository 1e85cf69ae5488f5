#include "router/utf8_stream.h"

#include <cstdint>

namespace tandem::router {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

enum class Scan { kComplete, kIncomplete, kInvalid };

// Looks at the sequence starting at text[0]. On kComplete and kInvalid sets
// *length to the bytes consumed (the maximal invalid subpart is >= 1 byte).
Scan ScanOne(std::string_view text, size_t* length) {
  const auto b0 = static_cast<uint8_t>(text[0]);
  if (b0 < 0x80) {
    *length = 1;
    return Scan::kComplete;
  }
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // excludes surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *length = 1;
    return Scan::kInvalid;
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= text.size()) return Scan::kIncomplete;
    const auto b = static_cast<uint8_t>(text[i]);
    const uint8_t min = i == 1 ? lo : 0x80;
    const uint8_t max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) {
      *length = i;
      return Scan::kInvalid;
    }
  }
  *length = need;
  return Scan::kComplete;
}

// Appends the valid form of text to *out; returns the offset where a trailing
// incomplete sequence starts (text.size() if none).
size_t AppendSanitized(std::string_view text, std::string* out) {
  size_t i = 0;
  while (i < text.size()) {
    size_t length = 0;
    switch (ScanOne(text.substr(i), &length)) {
      case Scan::kComplete:
        out->append(text.substr(i, length));
        i += length;
        break;
      case Scan::kInvalid:
        out->append(kReplacement);
        i += length;
        break;
      case Scan::kIncomplete: return i;
    }
  }
  return i;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t length = 0;
    if (ScanOne(text.substr(i), &length) != Scan::kComplete) return false;
    i += length;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (AppendSanitized(text, &out) < text.size()) out.append(kReplacement);
  return out;
}

std::string Utf8Assembler::Add(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  const size_t done = AppendSanitized(pending_, &out);
  pending_.erase(0, done);
  return out;
}

std::string Utf8Assembler::Finish() {
  std::string out = pending_.empty() ? std::string() : std::string(kReplacement);
  pending_.clear();
  return out;
}

}  // namespace tandem::router
