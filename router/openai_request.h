// Parsing and validation of OpenAI request bodies into plain structs.
//
// Everything the client controls is checked here, with an ApiError naming the
// bad `param`. Checks that need the tokenized prompt (context length,
// min_tokens against the default max_tokens) happen later, in the handler.
// Which fields exist and what each does: request_fields.h; unknown fields are
// ignored and listed in ApiRequest::ignored_fields. Thread rule: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/ids.h"
#include "router/api_error.h"
#include "router/engine_client.h"
#include "router/tool_request.h"

namespace tandem::router {

// One completions prompt: text, or token ids given directly.
struct PromptInput {
  bool is_token_ids = false;
  std::string text;                // when !is_token_ids; non-empty
  std::vector<TokenId> token_ids;  // when is_token_ids; non-empty, each in [0, vocab)
};

enum class ApiKind { kCompletion, kChat };

struct ApiRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;                    // as requested; empty = not given
  std::vector<PromptInput> prompts;     // kCompletion: >= 1
  nlohmann::json messages;              // kChat: normalized [{role, content[, name, tool_call_id, tool_calls]}]
  bool add_generation_prompt = true;    // kChat
  nlohmann::json chat_template_kwargs;  // kChat: object of extra template variables, or null
  ToolRequest tools;                    // kChat: tools, tool_choice, parallel_tool_calls
  bool add_special_tokens = true;       // text prompts: BOS etc.; chat default false (the template has them)
  std::optional<int32_t> max_tokens;    // max_tokens / max_completion_tokens; >= 1 (0 with echo)
  int32_t min_tokens = 0;               // <= max_tokens when that is given
  bool ignore_eos = false;
  std::vector<std::string> stop;  // non-empty strings
  std::vector<TokenId> stop_token_ids;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  int32_t n = 1;
  SamplingParams sampling;
  std::vector<std::pair<TokenId, float>> logit_bias;  // ids distinct, in [0, vocab); bias in [-100, 100]
  int32_t logprobs = -1;  // -1: none; k in [0, kMaxTopLogprobs]: each token's logprob and the top k
  bool echo = false;              // completions: the prompt before the completion (and its logprobs)
  std::string structured_output;  // response_format / guided_json as the nodes enforce it; empty: free text
  bool stream = false;
  bool include_usage = false;               // stream_options.include_usage
  bool include_timing = false;              // usage.timing and the server-timing header (an extension)
  std::string request_id;                   // client-chosen response id suffix; empty = a random one
  std::optional<int32_t> priority;          // lower = more urgent (priority_class.h); nullopt = the key's default
  std::vector<std::string> ignored_fields;  // fields the router does not know (header x-tandem-ignored-fields)
};

inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr size_t kMaxLogitBiasEntries = 1024;

struct RequestLimits {
  int32_t vocab_size = 32000;
  int32_t max_n = 16;
  int32_t max_prompts = 64;  // also caps prompts * n
  int32_t max_messages = 1024;
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 256;
  int32_t max_json_depth = 32;
};

// Parses a request body: rejects nesting deeper than max_depth, malformed or
// truncated JSON, invalid UTF-8, lone surrogate escapes, and a non-object top level.
std::optional<ApiError> ParseJsonBody(std::string_view body, int32_t max_depth, nlohmann::json* out);

// Validate a parsed body for /v1/completions and /v1/chat/completions.
std::optional<ApiError> ParseCompletionRequest(const nlohmann::json& body, const RequestLimits& limits,
                                               ApiRequest* out);
std::optional<ApiError> ParseChatRequest(const nlohmann::json& body, const RequestLimits& limits, ApiRequest* out);

}  // namespace tandem::router
