#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer {
namespace {

// Returns the length of the maximal subpart starting at pos (>=1) that is a
// valid prefix of some sequence, and sets *complete when it is a full one.
int ScanSequence(std::string_view s, size_t pos, bool* complete) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  *complete = false;
  if (b0 < 0x80) {
    *complete = true;
    return 1;
  }
  int need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  int len = 1;
  for (int i = 0; i < need; ++i) {
    if (pos + len >= s.size()) return len;
    const auto b = static_cast<unsigned char>(s[pos + len]);
    const unsigned char l = (i == 0) ? lo : 0x80, h = (i == 0) ? hi : 0xBF;
    if (b < l || b > h) return len;
    ++len;
  }
  *complete = true;
  return len;
}

}  // namespace

int ValidUtf8SequenceLength(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  bool complete = false;
  const int len = ScanSequence(text, pos, &complete);
  return complete ? len : 0;
}

char32_t NextCodePoint(std::string_view text, size_t* pos) {
  bool complete = false;
  const int len = ScanSequence(text, *pos, &complete);
  if (!complete) {
    *pos += len;
    return 0xFFFD;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(text.data() + *pos);
  char32_t cp;
  switch (len) {
    case 1: cp = p[0]; break;
    case 2: cp = ((p[0] & 0x1F) << 6) | (p[1] & 0x3F); break;
    case 3: cp = ((p[0] & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F); break;
    default: cp = ((p[0] & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  }
  *pos += len;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    bool complete = false;
    const int len = ScanSequence(bytes, pos, &complete);
    if (complete) {
      out.append(bytes.substr(pos, len));
    } else {
      out.append(kReplacementChar);
    }
    pos += len;
  }
  return out;
}

bool IsValidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const int len = ValidUtf8SequenceLength(text, pos);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

int IncompleteUtf8Tail(std::string_view text) {
  // A sequence is at most 4 bytes: look back up to 3 bytes for a lead byte.
  for (int back = 1; back <= 3 && back <= static_cast<int>(text.size()); ++back) {
    const size_t pos = text.size() - back;
    const auto b = static_cast<unsigned char>(text[pos]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte
    if (b < 0x80) return 0;
    bool complete = false;
    const int len = ScanSequence(text, pos, &complete);
    return (!complete && len == back) ? back : 0;
  }
  return 0;
}

bool IsUnicodeWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

const std::array<char32_t, 256>& ByteToUnicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

int UnicodeToByte(char32_t cp) {
  static const std::array<int, 512> inverse = [] {
    std::array<int, 512> inv{};
    inv.fill(-1);
    const auto& fwd = ByteToUnicode();
    for (int b = 0; b < 256; ++b) inv[fwd[b]] = b;
    return inv;
  }();
  return cp < 512 ? inverse[cp] : -1;
}

}  // namespace tandem::tokenizer
