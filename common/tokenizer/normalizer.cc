#include "common/tokenizer/normalizer.h"

#include <utf8proc.h>

#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer {
namespace {

constexpr int kMaxDepth = 16;

StatusOr<std::string> Utf8procMap(std::string_view text, int options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    return InvalidArgumentError(std::string("unicode normalization failed: ") + utf8proc_errmsg(n));
  }
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  free(out);
  return result;
}

std::string Lowercase(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    AppendUtf8(static_cast<char32_t>(utf8proc_tolower(NextCodePoint(text, &pos))), &out);
  }
  return out;
}

// Replaces every regex match.
StatusOr<std::string> RegexReplace(const Regex& regex, std::string_view text, std::string_view content) {
  TANDEM_ASSIGN_OR_RETURN(auto matches, regex.FindAll(text));
  std::string out;
  size_t last = 0;
  for (const auto& [b, e] : matches) {
    out.append(text.substr(last, b - last));
    out.append(content);
    last = e;
  }
  out.append(text.substr(last));
  return out;
}

std::string_view StripWhitespace(std::string_view text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end) {
      size_t p = begin;
      if (!IsUnicodeWhitespace(NextCodePoint(text, &p))) break;
      begin = p;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t p = start;
      if (!IsUnicodeWhitespace(NextCodePoint(text, &p))) break;
      end = start;
    }
  }
  return text.substr(begin, end - begin);
}

}  // namespace

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  size_t last = 0;
  while (true) {
    const size_t hit = text.find(from, last);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(last, hit - last));
    out.append(to);
    last = hit + from.size();
  }
  out.append(text.substr(last));
  return out;
}

Status Normalizer::AddSteps(const nlohmann::json& spec, int depth, std::vector<Step>* steps) {
  if (spec.is_null()) return Status::Ok();
  if (depth > kMaxDepth) return InvalidArgumentError("normalizer nesting too deep");
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    return InvalidArgumentError("normalizer must be an object with a string 'type'");
  }
  const std::string type = spec["type"].get<std::string>();
  Step step{};
  if (type == "Sequence") {
    const auto it = spec.find("normalizers");
    if (it == spec.end() || !it->is_array()) {
      return InvalidArgumentError("normalizer Sequence needs a 'normalizers' array");
    }
    for (const auto& child : *it) TANDEM_RETURN_IF_ERROR(AddSteps(child, depth + 1, steps));
    return Status::Ok();
  } else if (type == "NFC") {
    step.kind = Kind::kNfc;
  } else if (type == "NFD") {
    step.kind = Kind::kNfd;
  } else if (type == "NFKC") {
    step.kind = Kind::kNfkc;
  } else if (type == "NFKD") {
    step.kind = Kind::kNfkd;
  } else if (type == "Lowercase") {
    step.kind = Kind::kLowercase;
  } else if (type == "Prepend") {
    step.kind = Kind::kPrepend;
    step.pattern = spec.value("prepend", std::string());
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    step.strip_left = spec.value("strip_left", true);
    step.strip_right = spec.value("strip_right", true);
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    step.content = spec.value("content", std::string());
    const auto& pattern = spec.value("pattern", nlohmann::json::object());
    if (pattern.contains("String") && pattern["String"].is_string()) {
      step.pattern = pattern["String"].get<std::string>();
      if (step.pattern.empty()) return InvalidArgumentError("Replace with an empty pattern");
    } else if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      TANDEM_ASSIGN_OR_RETURN(Regex re, Regex::Compile(pattern["Regex"].get<std::string>()));
      step.regex = std::move(re);
    } else {
      return InvalidArgumentError("Replace normalizer needs pattern.String or pattern.Regex");
    }
  } else {
    return InvalidArgumentError("unsupported normalizer type '" + type + "'");
  }
  steps->push_back(std::move(step));
  return Status::Ok();
}

StatusOr<Normalizer> Normalizer::FromJson(const nlohmann::json& spec) {
  Normalizer n;
  TANDEM_RETURN_IF_ERROR(AddSteps(spec, 0, &n.steps_));
  return n;
}

StatusOr<std::string> Normalizer::Normalize(std::string_view text) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kNfc: {
        TANDEM_ASSIGN_OR_RETURN(s, Utf8procMap(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE));
        break;
      }
      case Kind::kNfd: {
        TANDEM_ASSIGN_OR_RETURN(s, Utf8procMap(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
        break;
      }
      case Kind::kNfkc: {
        TANDEM_ASSIGN_OR_RETURN(s, Utf8procMap(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
        break;
      }
      case Kind::kNfkd: {
        TANDEM_ASSIGN_OR_RETURN(s, Utf8procMap(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT));
        break;
      }
      case Kind::kLowercase: s = Lowercase(s); break;
      case Kind::kPrepend:
        // Hugging Face prepends only to non-empty text.
        if (!s.empty()) s = step.pattern + s;
        break;
      case Kind::kStrip: s = std::string(StripWhitespace(s, step.strip_left, step.strip_right)); break;
      case Kind::kReplace:
        if (step.regex) {
          TANDEM_ASSIGN_OR_RETURN(s, RegexReplace(*step.regex, s, step.content));
        } else {
          s = ReplaceAll(s, step.pattern, step.content);
        }
        break;
    }
  }
  return s;
}

}  // namespace tandem::tokenizer
