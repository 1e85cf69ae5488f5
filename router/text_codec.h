// TextCodec: the router's narrow view of the tokenizer and chat template
// (common/tokenizer provides the real one; tests use a byte-level fake).
//
// Thread rule: Encode/RenderChat/NewDecoder/Decode are thread-safe; a TextDecoder is
// used by one thread at a time.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"

namespace tandem::router {

// Turns one sequence's token ids back into text, incrementally.
class TextDecoder {
 public:
  virtual ~TextDecoder() = default;
  // Text newly made final by `token_id` (may be empty, may end inside a UTF-8
  // sequence: the router holds partial sequences back).
  virtual std::string Add(TokenId token_id) = 0;
  // Whatever is still buffered at the end of the sequence.
  virtual std::string Finish() = 0;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;  // end with the assistant turn header
  nlohmann::json template_kwargs;     // null, or an object of extra template variables
  nlohmann::json tools;               // null, or the template's `tools`: [{"type": "function", "function": {...}}]
};

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  // Text (valid UTF-8) to ids. add_special: prepend BOS etc. as the model expects.
  virtual StatusOr<std::vector<TokenId>> Encode(std::string_view text, bool add_special) const = 0;
  // Renders normalized chat messages: a JSON array of objects with string
  // "role" and string "content" (plus optional "name", "tool_call_id", and
  // "tool_calls" with object arguments; chat_messages.h).
  // A template error is InvalidArgument with the template's message.
  virtual StatusOr<std::string> RenderChat(const nlohmann::json& messages, const ChatRenderOptions& options) const = 0;
  // A decoder for one output sequence; skip_special_tokens drops special tokens' text.
  virtual std::unique_ptr<TextDecoder> NewDecoder(bool skip_special_tokens) const = 0;
  // Ids to text (valid UTF-8; invalid bytes become U+FFFD). REQUIRES: each id in [0, vocab).
  virtual StatusOr<std::string> Decode(std::span<const TokenId> ids, bool skip_special_tokens) const = 0;
  // One token's text as raw bytes (a byte-level token may be part of a UTF-8
  // sequence; special tokens give their content), for logprobs. REQUIRES: id in [0, vocab).
  virtual std::string TokenBytes(TokenId id) const = 0;
};

}  // namespace tandem::router
