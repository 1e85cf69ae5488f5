#include "common/tokenizer/decoder.h"

#include "common/tokenizer/normalizer.h"
#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer {
namespace {

constexpr int kMaxDepth = 16;

// ByteLevel: every code point of a token maps back to one byte; a token with
// a code point outside the table is kept as its own UTF-8 bytes.
void ByteLevelDecode(std::vector<std::string>* tokens) {
  std::string bytes;
  for (const std::string& t : *tokens) {
    const size_t mark = bytes.size();
    size_t pos = 0;
    bool mapped = true;
    while (pos < t.size()) {
      const int b = UnicodeToByte(NextCodePoint(t, &pos));
      if (b < 0) {
        mapped = false;
        break;
      }
      bytes.push_back(static_cast<char>(b));
    }
    if (!mapped) {
      bytes.resize(mark);
      bytes.append(t);
    }
  }
  tokens->assign(1, Utf8Lossy(bytes));
}

// "<0xAB>" -> 0xAB, else -1.
int ByteToken(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = t[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return -1;
    }
    v = v * 16 + d;
  }
  return v;
}

void ByteFallbackDecode(std::vector<std::string>* tokens) {
  std::vector<std::string> out;
  std::string pending;
  auto flush = [&] {
    if (pending.empty()) return;
    if (IsValidUtf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) out.emplace_back(kReplacementChar);
    }
    pending.clear();
  };
  for (std::string& t : *tokens) {
    const int b = ByteToken(t);
    if (b >= 0) {
      pending.push_back(static_cast<char>(b));
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  tokens->swap(out);
}

void StripDecode(const std::string& content, int start, int stop, std::vector<std::string>* tokens) {
  for (std::string& t : *tokens) {
    size_t begin = 0, end = t.size();
    for (int i = 0; i < start && t.compare(begin, content.size(), content) == 0 && begin < end; ++i) {
      begin += content.size();
    }
    for (int i = 0;
         i < stop && end >= begin + content.size() && t.compare(end - content.size(), content.size(), content) == 0;
         ++i) {
      end -= content.size();
    }
    t = t.substr(begin, end - begin);
  }
}

}  // namespace

Status Decoder::AddSteps(const nlohmann::json& spec, int depth, std::vector<Step>* steps) {
  if (spec.is_null()) return Status::Ok();
  if (depth > kMaxDepth) return InvalidArgumentError("decoder nesting too deep");
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    return InvalidArgumentError("decoder must be an object with a string 'type'");
  }
  const std::string type = spec["type"].get<std::string>();
  Step step{};
  if (type == "Sequence") {
    const auto it = spec.find("decoders");
    if (it == spec.end() || !it->is_array()) {
      return InvalidArgumentError("decoder Sequence needs a 'decoders' array");
    }
    for (const auto& child : *it) TANDEM_RETURN_IF_ERROR(AddSteps(child, depth + 1, steps));
    return Status::Ok();
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    step.content = spec.value("content", std::string(" "));
    step.start = spec.value("start", 0);
    step.stop = spec.value("stop", 0);
    if (step.content.empty()) return InvalidArgumentError("Strip decoder with empty content");
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    step.content = spec.value("content", std::string());
    const auto& pattern = spec.value("pattern", nlohmann::json::object());
    if (!pattern.contains("String") || !pattern["String"].is_string() || pattern["String"].get<std::string>().empty()) {
      return InvalidArgumentError("Replace decoder needs a non-empty pattern.String");
    }
    step.pattern = pattern["String"].get<std::string>();
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.pattern = spec.value("replacement", std::string("\xE2\x96\x81"));
    const std::string scheme = spec.value("prepend_scheme", std::string());
    step.prepend = scheme.empty() ? spec.value("add_prefix_space", true) : scheme != "never";
  } else {
    return InvalidArgumentError("unsupported decoder type '" + type + "'");
  }
  steps->push_back(std::move(step));
  return Status::Ok();
}

StatusOr<Decoder> Decoder::FromJson(const nlohmann::json& spec) {
  Decoder d;
  TANDEM_RETURN_IF_ERROR(AddSteps(spec, 0, &d.steps_));
  return d;
}

void Decoder::Apply(const Step& step, std::vector<std::string>* tokens) {
  switch (step.kind) {
    case Kind::kByteLevel: ByteLevelDecode(tokens); return;
    case Kind::kByteFallback: ByteFallbackDecode(tokens); return;
    case Kind::kFuse: {
      std::string all;
      for (const auto& t : *tokens) all += t;
      tokens->assign(1, std::move(all));
      return;
    }
    case Kind::kStrip: StripDecode(step.content, step.start, step.stop, tokens); return;
    case Kind::kReplace:
      for (auto& t : *tokens) t = ReplaceAll(t, step.pattern, step.content);
      return;
    case Kind::kMetaspace:
      for (size_t i = 0; i < tokens->size(); ++i) {
        std::string& t = (*tokens)[i];
        t = ReplaceAll(t, step.pattern, " ");
        if (i == 0 && step.prepend && !t.empty() && t[0] == ' ') t.erase(0, 1);
      }
      return;
  }
}

bool Decoder::has_byte_fallback() const {
  for (const Step& step : steps_) {
    if (step.kind == Kind::kByteFallback) return true;
  }
  return false;
}

bool IsByteFallbackToken(const std::string& token) { return ByteToken(token) >= 0; }

std::string Decoder::DecodeBytes(std::vector<std::string> tokens) const {
  for (const Step& step : steps_) Apply(step, &tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::string Decoder::Decode(std::vector<std::string> tokens) const { return Utf8Lossy(DecodeBytes(std::move(tokens))); }

}  // namespace tandem::tokenizer
