#include "common/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace tandem::tokenizer {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

StatusOr<Regex> Regex::Compile(std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                   &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(error_code, buffer, sizeof(buffer));
    return InvalidArgumentError("bad regex '" + std::string(pattern) + "' at offset " + std::to_string(error_offset) +
                                ": " + reinterpret_cast<const char*>(buffer));
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  holder->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return Regex(std::move(holder));
}

std::string Regex::Escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    const bool word =
        (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u >= 0x80 || u == '_';
    if (!word) out.push_back('\\');
    out.push_back(c);
  }
  // A backslash before a space or control byte is still a literal in PCRE2.
  return out;
}

StatusOr<std::vector<std::pair<size_t, size_t>>> Regex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  if (md == nullptr) return InternalError("pcre2_match_data_create failed");
  size_t offset = 0;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  Status status;
  while (offset <= text.size()) {
    const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), offset, 0, md, nullptr)
                              : pcre2_match(code_->code, subject, text.size(), offset, 0, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR buffer[256];
      pcre2_get_error_message(rc, buffer, sizeof(buffer));
      status = InvalidArgumentError(std::string("regex match failed: ") + reinterpret_cast<const char*>(buffer));
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = ov[0], end = ov[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      // Empty match: step over one whole character.
      offset = end + 1;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) {
        ++offset;
      }
    }
  }
  pcre2_match_data_free(md);
  if (!status.ok()) return status;
  return matches;
}

}  // namespace tandem::tokenizer
