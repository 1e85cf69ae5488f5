// Builders for OpenAI-shaped response bodies and stream chunks
// (text_completion / chat.completion / chat.completion.chunk).
// Thread rule: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "router/engine_client.h"
#include "router/openai_request.h"
#include "router/tool_call_output.h"

namespace tandem::router {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt_tokens_details.cached_tokens
  nlohmann::json timing;      // usage.timing when the request asked for it (include_timing); null: left out
};

// Where one request's time went (include_timing), seconds. The router's own stages are
// on its clock; `nodes` are durations the nodes measured on theirs (first choice).
struct RequestTiming {
  double router_queue = 0;               // admission wait at the router
  std::optional<NodeStageTimes> nodes;   // decode queue, prefill queue, prefill, KV transfer tail, KV wait
  double first_token = 0;                // arrival at the router to the first token there (TTFT)
  std::optional<double> first_decode_step;  // first token to the second (first choice)
  std::optional<double> decode;          // second token to the last (first choice)
  std::optional<double> total;           // arrival to the end
};

// usage.timing: each stage in seconds (a stage not known is left out).
nlohmann::json TimingJson(const RequestTiming& timing);
// The server-timing header value: "router-queue;dur=1.250, prefill;dur=..." (milliseconds).
std::string ServerTimingHeader(const RequestTiming& timing);

// What every body and chunk of one response shares.
struct ResponseMeta {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

// A token as logprobs show it: its text's raw bytes and its logprob.
struct LogprobToken {
  std::string bytes;  // may end inside a UTF-8 sequence; "token" shows it lossily
  float logprob = 0;  // -inf shows as -9999.0, as vLLM does
};

// One output token's logprobs: the token, the most likely tokens, and (completions)
// where its text starts in the choice's text, in characters.
struct ChoiceLogprob {
  LogprobToken token;
  std::vector<LogprobToken> top;
  int64_t text_offset = 0;
  bool has_logprob = true;  // false for an echoed prompt's first token: null logprob, null top
};

struct ChoiceOutput {
  std::string text;
  FinishReason finish_reason = FinishReason::kLength;
  // Every sampled token's, when the request asked for logprobs and is not streamed (a stream
  // sends them with its text events instead).
  std::vector<ChoiceLogprob> logprobs;
  // Chat with tools: the calls parsed out of the output (`text` is then the content
  // outside them; message.content is null when it is empty).
  std::vector<ToolCallOutput> tool_calls;
};

// "cmpl-<32 hex>" or "chatcmpl-<32 hex>".
std::string NewResponseId(ApiKind kind);
// "cmpl-<request_id>" or "chatcmpl-<request_id>" (a client-chosen request_id).
std::string ResponseIdFor(ApiKind kind, const std::string& request_id);
const char* FinishReasonName(FinishReason reason);
nlohmann::json UsageJson(const Usage& usage);

// The non-streaming body; choices[i] has index i.
// With `logprobs`, each choice's "logprobs" holds its entries (else null).
nlohmann::json CompletionBody(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, const Usage& usage,
                              bool logprobs);

// The "logprobs" object of a choice or chunk: chat's {"content": [...]}, or the
// completions' {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
nlohmann::json LogprobsJson(ApiKind kind, const std::vector<ChoiceLogprob>& entries);

// One streaming chunk for choice `index`: `text` as delta, `finish_reason`
// when set, the assistant role when `with_role` (chat's first chunk), and
// "usage": null when `usage_null` (include_usage streams). `logprobs`: the
// entries of the tokens this chunk delivers, or null for a request without.
nlohmann::json StreamChunk(const ResponseMeta& meta, int32_t index, const std::string& text,
                           std::optional<FinishReason> finish_reason, bool with_role, bool usage_null,
                           const std::vector<ChoiceLogprob>* logprobs = nullptr);

// A chat chunk for choice `index` with the given `delta` object (content or
// tool_calls), as StreamChunk otherwise.
nlohmann::json ChatDeltaChunk(const ResponseMeta& meta, int32_t index, nlohmann::json delta,
                              std::optional<FinishReason> finish_reason, bool usage_null,
                              const std::vector<ChoiceLogprob>* logprobs = nullptr);

// The final include_usage chunk: empty choices, the usage object.
nlohmann::json UsageChunk(const ResponseMeta& meta, const Usage& usage);

}  // namespace tandem::router
