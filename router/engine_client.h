// EngineClient: the router's narrow view of whatever generates tokens
// (the node cluster behind placement, or a fake in tests). The HTTP layer only
// talks to this interface; the integrator plugs the real cluster client in.
//
// Thread rule: implementations are thread-safe; Submit and Cancel may be called
// from any thread. Callbacks may run on any thread (including inside Submit),
// but for one request they run one at a time, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/base/ids.h"
#include "common/base/status.h"
#include "router/priority_class.h"

namespace tandem::router {

// Sampling knobs, already validated by the router (ranges in openai_request.h).
struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  float top_p = 1.0f;               // (0, 1]
  int32_t top_k = 0;                // 0 = disabled, else >= 1
  float min_p = 0.0f;               // [0, 1]
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  float repetition_penalty = 1.0f;  // (0, 2]; 1 = off
  std::optional<uint64_t> seed;     // per-request sampling seed
};

// One sampled token's logprob and the most likely tokens' (GenerateRequest::logprobs).
struct TopLogprob {
  TokenId token_id = 0;
  float logprob = 0;  // -inf for a token the sampling masked
};
struct TokenLogprobs {
  float logprob = 0;
  std::vector<TopLogprob> top;  // highest first
};

// Where a request's time went on the nodes (proto StageTimes), seconds.
struct NodeStageTimes {
  double decode_queue = 0;   // decode: the Reserve's arrival to its KV reserved (remote prefill)
  double prefill_queue = 0;  // the node that prefilled: arrival to admission
  double prefill = 0;        // the node that prefilled: admission to the first token
  double kv_transfer = 0;    // prefill node: the first token to the last KV write done
  double kv_wait = 0;        // decode: KV reserved to the KV landed with the first token (remote prefill)
};

// One sequence to generate. An OpenAI request with n choices or several
// prompts becomes several GenerateRequests with distinct request ids.
struct GenerateRequest {
  RequestId request_id = 0;               // unique per router process
  std::vector<TokenId> prompt_token_ids;  // non-empty, each in [0, vocab)
  SamplingParams sampling;
  int32_t max_tokens = 16;              // >= 1; prompt + max_tokens <= context
  int32_t min_tokens = 0;               // [0, max_tokens]: EOS and stop_token_ids are masked until this many
  std::vector<TokenId> stop_token_ids;  // extra ids that end the sequence (besides EOS)
  bool ignore_eos = false;              // keep going past EOS until max_tokens
  std::vector<std::pair<TokenId, float>> logit_bias;  // ids distinct, in [0, vocab); bias in [-100, 100]
  int32_t logprobs = -1;                // -1: none; k in [0, 20]: each token's logprob and the top k
  // Structured output the nodes enforce: {"type":"json_object"} or {"type":"json_schema","schema":{...}}
  // (common/grammar): response_format, guided_json, or a tool_choice of required / a named function.
  // Empty: free text.
  std::string structured_output;
  int32_t prompt_logprobs = -1;         // -1: none; k in [0, 20]: the prompt's logprobs (echo), top k each
  bool trace_timing = false;            // the nodes log its stage times at info
  std::string tenant_id;                // the cache salt is derived from it
  PriorityClass priority = PriorityClass::kInteractive;  // the nodes' queue and preemption order
  Nanos deadline_ns = 0;                // Clock::Real() time; 0 = none
};

enum class FinishReason {
  kStop,       // EOS or a stop token id was sampled (that token is in the last batch)
  kLength,     // max_tokens tokens were generated
  kToolCalls,  // the router's own: a chat choice that ended in tool calls (never from an engine)
};

struct GenerateResult {
  FinishReason finish_reason = FinishReason::kLength;
  int32_t num_cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
};

// Exactly one of on_finish / on_error ends a request; nothing is called after it.
// After Cancel() the engine may end the request with on_error(Cancelled) or
// not at all; the router ignores anything that arrives after it cancelled.
struct StreamCallbacks {
  // Newly sampled tokens, in order. Every sampled token counts, including a
  // final EOS or stop token (it is `usage.completion_tokens`). `logprobs` has one
  // entry per token when the request asked for logprobs, else none.
  std::function<void(std::vector<TokenId> token_ids, std::vector<TokenLogprobs> logprobs)> on_tokens;
  std::function<void(const GenerateResult& result)> on_finish;
  // Optional: prompt tokens served from the prefix cache, as soon as the engine knows
  // (with the first tokens). A request the router ends early (a stop string) gets no
  // on_finish, so this is where its usage.cached_tokens comes from; on_finish's
  // num_cached_prompt_tokens repeats it.
  std::function<void(int32_t num_cached_prompt_tokens)> on_cached;
  // With (before) the first tokens when the request asked for prompt logprobs: one entry
  // per prompt token after the first.
  std::function<void(std::vector<TokenLogprobs> prompt_logprobs)> on_prompt_logprobs;
  // Optional: the node stage times, with (before) the first tokens.
  std::function<void(const NodeStageTimes& times)> on_stage_times;
  // Status codes map to HTTP: InvalidArgument 400, ResourceExhausted 429 (a
  // refusal before any output; after output it is a 500 server_error),
  // Unavailable 503, DeadlineExceeded 504, anything else 500. A streamed
  // request's head is sent with its first output, so an error before that is
  // an HTTP status too, after it an SSE error event.
  std::function<void(const Status& status)> on_error;
};

class EngineClient {
 public:
  virtual ~EngineClient() = default;
  // Starts generating. The callbacks own whatever they capture until the
  // request ends.
  virtual void Submit(GenerateRequest request, StreamCallbacks callbacks) = 0;
  // Stops a request (client gone, stop string matched, deadline). Unknown or
  // finished ids are ignored.
  virtual void Cancel(RequestId request_id) = 0;
};

}  // namespace tandem::router
