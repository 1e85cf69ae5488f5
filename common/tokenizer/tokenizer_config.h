// The parts of a model's tokenizer_config.json the server needs: bos/eos token
// strings (plain strings or {"content": ...} objects), add_bos_token /
// add_eos_token, and the chat templates it carries. Plain data; thread-safe
// once loaded.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/base/status.h"

namespace tandem::tokenizer {

// Config files larger than this are rejected.
inline constexpr size_t kMaxTokenizerConfigBytes = 64u << 20;

struct TokenizerConfig {
  std::optional<std::string> bos_token;  // e.g. "<|begin_of_text|>"; unset when null/absent
  std::optional<std::string> eos_token;  // e.g. "<|eot_id|>"
  std::optional<bool> add_bos_token;     // unset when the file does not say
  std::optional<bool> add_eos_token;
  // Chat templates by name; a single string template is stored as "default".
  std::map<std::string, std::string> chat_templates;

  // Parses tokenizer_config.json text. InvalidArgument on malformed JSON or
  // ill-typed fields.
  static StatusOr<TokenizerConfig> FromJson(std::string_view json_text);
  // Reads `<dir>/tokenizer_config.json` (NotFound if missing) and, when present,
  // `<dir>/chat_template.jinja` (stored as "default", overriding the config's).
  static StatusOr<TokenizerConfig> FromModelDir(const std::string& dir);
};

// Reads a whole file of at most `max_bytes`; NotFound / InvalidArgument.
StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes);

}  // namespace tandem::tokenizer
