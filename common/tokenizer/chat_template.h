// A model's chat template (Jinja2, as shipped in tokenizer_config.json or
// chat_template.jinja) rendered the way Hugging Face transformers renders it:
// trim_blocks + lstrip_blocks, loop controls, json.dumps-style tojson,
// raise_exception. Parsing happens once; Render walks the tree.
//
// Thread rule: immutable after creation; Render is thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace tandem::tokenizer {

namespace jinja {
struct Node;
}

struct ChatRenderOptions {
  bool add_generation_prompt = true;     // append the assistant-turn header
  std::optional<std::string> bos_token;  // exposed as `bos_token` when set
  std::optional<std::string> eos_token;  // exposed as `eos_token` when set
  nlohmann::json tools;                  // exposed as `tools` unless null
  nlohmann::json extra_context;          // object: more top-level variables (e.g. enable_thinking)
};

class ChatTemplate {
 public:
  // From a model directory: chat_template.jinja, else tokenizer_config.json's
  // chat_template (string, or list of {name, template}; picks "default", or
  // `name` when given). NotFound when the model has no (such) template.
  static StatusOr<ChatTemplate> FromModelDir(const std::string& dir, std::string_view name = "");
  // InvalidArgument with the line number on a syntax error.
  static StatusOr<ChatTemplate> FromSource(std::string source);

  // `messages` must be an array. Template errors and raise_exception(...)
  // give InvalidArgument carrying the message (raise_exception's verbatim);
  // exceeding the output/step/depth limits gives ResourceExhausted.
  StatusOr<std::string> Render(const nlohmann::json& messages, const ChatRenderOptions& options) const;

  const std::string& source() const { return *source_; }

 private:
  struct Parsed;
  ChatTemplate() = default;
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace tandem::tokenizer
