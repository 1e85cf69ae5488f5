// The byte automaton inside a JSON string: UTF-8 validation (a token may end
// mid-character), escapes, and the code point count. Shared by the stepper and
// the per-vocabulary string tables so both agree byte for byte.
// Thread rule: pure functions.
#pragma once

#include <cstdint>

namespace tandem::grammar {

// Steps of the string automaton (a frame's `sub`).
inline constexpr uint8_t kStrClean = 0;  // between characters
inline constexpr uint8_t kStrEscape = 1;  // after a backslash
inline constexpr uint8_t kStrHex4 = 2;  // after "\u": 4 hex digits to go
inline constexpr uint8_t kStrHex3D = 3;  // after "\uD": a hex digit 0-7 (no surrogates), then 2 more
inline constexpr uint8_t kStrHex3 = 4;
inline constexpr uint8_t kStrHex2 = 5;
inline constexpr uint8_t kStrHex1 = 6;
inline constexpr uint8_t kStrCont1 = 7;  // UTF-8: 1 continuation byte to go
inline constexpr uint8_t kStrCont2 = 8;  // 2 to go
inline constexpr uint8_t kStrCont2E0 = 9;  // 2 to go, the first in A0-BF (after E0)
inline constexpr uint8_t kStrCont2ED = 10;  // 2 to go, the first in 80-9F (after ED: no surrogates)
inline constexpr uint8_t kStrCont3 = 11;  // 3 to go
inline constexpr uint8_t kStrCont3F0 = 12;  // 3 to go, the first in 90-BF
inline constexpr uint8_t kStrCont3F4 = 13;  // 3 to go, the first in 80-8F
inline constexpr uint8_t kNumStringSteps = 14;

// Result of one byte: next step, or kStrReject / kStrClose (an unescaped '"' between characters).
inline constexpr uint8_t kStrReject = 0xFF;
inline constexpr uint8_t kStrClose = 0xFE;

inline bool IsHexDigit(uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Sets *starts_char when the byte begins a new character (counted toward length bounds).
inline uint8_t StringByte(uint8_t step, uint8_t c, bool* starts_char) {
  *starts_char = false;
  switch (step) {
    case kStrClean:
      if (c == '"') return kStrClose;
      if (c < 0x20) return kStrReject;
      *starts_char = true;
      if (c == '\\') return kStrEscape;
      if (c < 0x80) return kStrClean;
      if (c >= 0xC2 && c <= 0xDF) return kStrCont1;
      if (c == 0xE0) return kStrCont2E0;
      if (c == 0xED) return kStrCont2ED;
      if (c >= 0xE1 && c <= 0xEF) return kStrCont2;
      if (c == 0xF0) return kStrCont3F0;
      if (c >= 0xF1 && c <= 0xF3) return kStrCont3;
      if (c == 0xF4) return kStrCont3F4;
      *starts_char = false;
      return kStrReject;
    case kStrEscape:
      if (c == 'u') return kStrHex4;
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
        return kStrClean;
      }
      return kStrReject;
    case kStrHex4:
      if (c == 'd' || c == 'D') return kStrHex3D;
      return IsHexDigit(c) ? kStrHex3 : kStrReject;
    case kStrHex3D: return (c >= '0' && c <= '7') ? kStrHex2 : kStrReject;
    case kStrHex3: return IsHexDigit(c) ? kStrHex2 : kStrReject;
    case kStrHex2: return IsHexDigit(c) ? kStrHex1 : kStrReject;
    case kStrHex1: return IsHexDigit(c) ? kStrClean : kStrReject;
    case kStrCont1: return (c >= 0x80 && c <= 0xBF) ? kStrClean : kStrReject;
    case kStrCont2: return (c >= 0x80 && c <= 0xBF) ? kStrCont1 : kStrReject;
    case kStrCont2E0: return (c >= 0xA0 && c <= 0xBF) ? kStrCont1 : kStrReject;
    case kStrCont2ED: return (c >= 0x80 && c <= 0x9F) ? kStrCont1 : kStrReject;
    case kStrCont3: return (c >= 0x80 && c <= 0xBF) ? kStrCont2 : kStrReject;
    case kStrCont3F0: return (c >= 0x90 && c <= 0xBF) ? kStrCont2 : kStrReject;
    case kStrCont3F4: return (c >= 0x80 && c <= 0x8F) ? kStrCont2 : kStrReject;
    default: return kStrReject;
  }
}

}  // namespace tandem::grammar
