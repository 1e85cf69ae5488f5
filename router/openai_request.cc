#include "router/openai_request.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "router/chat_messages.h"
#include "router/priority_class.h"
#include "router/request_fields.h"
#include "router/request_reader.h"
#include "router/response_format.h"

namespace tandem::router {
namespace {

using nlohmann::json;
using Error = std::optional<ApiError>;

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxRequestIdBytes = 128;

Error ReadModel(const json& body, ApiRequest* out) {
  const json* v = FindField(body, "model");
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return BadRequest("model must be a string", "model");
  out->model = v->get<std::string>();
  return std::nullopt;
}

Error ReadStop(const json& body, const RequestLimits& limits, ApiRequest* out) {
  const json* v = FindField(body, "stop");
  if (v != nullptr) {
    std::vector<json> items;
    if (v->is_string()) {
      items.push_back(*v);
    } else if (v->is_array()) {
      items.assign(v->begin(), v->end());
    } else {
      return BadRequest("stop must be a string or a list of strings", "stop");
    }
    if (static_cast<int64_t>(items.size()) > limits.max_stop_strings) {
      return BadRequest("stop has more than " + std::to_string(limits.max_stop_strings) + " entries", "stop");
    }
    for (const json& item : items) {
      if (!item.is_string()) return BadRequest("stop must be a string or a list of strings", "stop");
      std::string s = item.get<std::string>();
      if (s.empty()) return BadRequest("stop strings must not be empty", "stop");
      if (static_cast<int64_t>(s.size()) > limits.max_stop_string_bytes) {
        return BadRequest("a stop string is longer than " + std::to_string(limits.max_stop_string_bytes) + " bytes",
                          "stop");
      }
      out->stop.push_back(std::move(s));
    }
  }
  if (const json* ids = FindField(body, "stop_token_ids")) {
    if (!ids->is_array()) return BadRequest("stop_token_ids must be a list", "stop_token_ids");
    if (static_cast<int64_t>(ids->size()) > limits.max_stop_strings) {
      return BadRequest("stop_token_ids has too many entries", "stop_token_ids");
    }
    for (const json& id : *ids) {
      TokenId token = 0;
      if (Error e = ReadTokenId(id, limits.vocab_size, "stop_token_ids", &token)) return e;
      out->stop_token_ids.push_back(token);
    }
  }
  if (Error e = ReadBool(body, "include_stop_str_in_output", &out->include_stop_str_in_output)) return e;
  return std::nullopt;
}

Error ReadLengths(const json& body, const RequestLimits& limits, ApiRequest* out) {
  std::optional<int64_t> max_tokens, max_completion_tokens, min_tokens, n, best_of;
  // 0 only with echo (the prompt's logprobs alone); the endpoints check that.
  if (Error e = ReadInt(body, "max_tokens", 0, kMaxInt32, &max_tokens)) return e;
  if (Error e = ReadInt(body, "max_completion_tokens", 0, kMaxInt32, &max_completion_tokens)) return e;
  if (max_completion_tokens) max_tokens = max_completion_tokens;
  if (max_tokens) out->max_tokens = static_cast<int32_t>(*max_tokens);
  if (Error e = ReadInt(body, "min_tokens", 0, kMaxInt32, &min_tokens)) return e;
  out->min_tokens = static_cast<int32_t>(min_tokens.value_or(0));
  if (max_tokens && out->min_tokens > *max_tokens) {
    return BadRequest("min_tokens (" + std::to_string(out->min_tokens) + ") must not exceed max_tokens (" +
                          std::to_string(*max_tokens) + ")",
                      "min_tokens");
  }
  if (Error e = ReadInt(body, "n", 1, limits.max_n, &n)) return e;
  out->n = static_cast<int32_t>(n.value_or(1));
  if (Error e = ReadInt(body, "best_of", 1, limits.max_n, &best_of)) return e;
  if (best_of && *best_of != out->n) return BadRequest("best_of is not supported", "best_of");
  return std::nullopt;
}

Error ReadSampling(const json& body, const RequestLimits& limits, SamplingParams* s) {
  std::optional<int64_t> top_k, seed;
  if (Error e = ReadInt(body, "top_k", -1, limits.vocab_size, &top_k)) return e;
  s->top_k = top_k && *top_k > 0 ? static_cast<int32_t>(*top_k) : 0;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  if (Error e = ReadInt(body, "seed", kMin, kMax, &seed)) return e;
  if (seed) s->seed = static_cast<uint64_t>(*seed);
  if (Error e = ReadFloat(body, "temperature", 0.0, 2.0, false, &s->temperature)) return e;
  if (Error e = ReadFloat(body, "top_p", 0.0, 1.0, true, &s->top_p)) return e;
  if (Error e = ReadFloat(body, "min_p", 0.0, 1.0, false, &s->min_p)) return e;
  if (Error e = ReadFloat(body, "presence_penalty", -2.0, 2.0, false, &s->presence_penalty)) return e;
  if (Error e = ReadFloat(body, "frequency_penalty", -2.0, 2.0, false, &s->frequency_penalty)) return e;
  if (Error e = ReadFloat(body, "repetition_penalty", 0.0, 2.0, true, &s->repetition_penalty)) return e;
  return std::nullopt;
}

// Completions: logprobs = k, an integer in [0, 20]. Chat: logprobs true, with
// top_logprobs = k in [0, 20] (0 when left out); top_logprobs needs logprobs.
Error ReadLogprobs(const json& body, ApiKind kind, ApiRequest* out) {
  const json* v = FindField(body, "logprobs");
  if (kind == ApiKind::kCompletion) {
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (!v->is_number_integer() || *v < 0 || *v > kMaxTopLogprobs) {
      return BadRequest("logprobs must be an integer in [0, " + std::to_string(kMaxTopLogprobs) + "]", "logprobs");
    }
    out->logprobs = v->get<int32_t>();
    return std::nullopt;
  }
  bool logprobs = false;
  if (Error e = ReadBool(body, "logprobs", &logprobs)) return e;
  std::optional<int64_t> top;
  if (Error e = ReadInt(body, "top_logprobs", 0, kMaxTopLogprobs, &top)) return e;
  if (top && !logprobs) return BadRequest("top_logprobs requires logprobs to be true", "top_logprobs");
  if (logprobs) out->logprobs = static_cast<int32_t>(top.value_or(0));
  return std::nullopt;
}

// logit_bias: {"<token id>": bias in [-100, 100], ...}, ids in the vocabulary, each once.
Error ReadLogitBias(const json& body, const RequestLimits& limits, ApiRequest* out) {
  const json* v = FindField(body, "logit_bias");
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_object()) return BadRequest("logit_bias must be an object of token id -> bias", "logit_bias");
  if (v->size() > kMaxLogitBiasEntries) {
    return BadRequest("logit_bias has more than " + std::to_string(kMaxLogitBiasEntries) + " entries", "logit_bias");
  }
  for (const auto& [key, bias] : v->items()) {
    TokenId id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || key.empty() || id < 0 || id >= limits.vocab_size) {
      return BadRequest("logit_bias keys must be token ids in [0, " + std::to_string(limits.vocab_size) + "), got \"" +
                            key.substr(0, 32) + "\"",
                        "logit_bias");
    }
    if (!bias.is_number() || !(bias.get<double>() >= -100.0 && bias.get<double>() <= 100.0)) {
      return BadRequest("logit_bias values must be numbers in [-100, 100] (token " + key + ")", "logit_bias");
    }
    out->logit_bias.emplace_back(id, bias.get<float>());
  }
  std::vector<TokenId> ids;
  for (const auto& [id, bias] : out->logit_bias) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) {
    return BadRequest("logit_bias names a token id twice", "logit_bias");
  }
  return std::nullopt;
}

// skip_special_tokens, and spaces_between_special_tokens: true (the default) is
// the tokenizer's own decoding, which is what the decoder does; false changes
// nothing while special tokens are skipped, and is refused when they are not.
Error ReadDecoding(const json& body, ApiRequest* out) {
  if (Error e = ReadBool(body, "skip_special_tokens", &out->skip_special_tokens)) return e;
  bool spaces_between = true;
  if (Error e = ReadBool(body, "spaces_between_special_tokens", &spaces_between)) return e;
  if (!spaces_between && !out->skip_special_tokens) {
    return BadRequest(
        "spaces_between_special_tokens false is not supported by this server when skip_special_tokens is false",
        "spaces_between_special_tokens", "unsupported_parameter");
  }
  return std::nullopt;
}

Error ReadStreaming(const json& body, ApiRequest* out) {
  if (Error e = ReadBool(body, "stream", &out->stream)) return e;
  const json* opts = FindField(body, "stream_options");
  if (opts == nullptr) return std::nullopt;
  if (!opts->is_object()) return BadRequest("stream_options must be an object", "stream_options");
  if (Error e = ReadBool(*opts, "include_usage", &out->include_usage)) {
    e->param = "stream_options.include_usage";
    return e;
  }
  bool continuous = false;
  if (Error e = ReadBool(*opts, "continuous_usage_stats", &continuous)) {
    e->param = "stream_options.continuous_usage_stats";
    return e;
  }
  if (continuous) {
    return BadRequest("stream_options.continuous_usage_stats is not supported by this server",
                      "stream_options.continuous_usage_stats", "unsupported_parameter");
  }
  for (const auto& [key, value] : opts->items()) {
    if (key != "include_usage" && key != "continuous_usage_stats")
      out->ignored_fields.push_back("stream_options." + key);
  }
  return std::nullopt;
}

// request_id: printable and short, since it becomes the response id.
Error ReadRequestId(const json& body, ApiRequest* out) {
  const json* v = FindField(body, "request_id");
  if (v == nullptr) return std::nullopt;
  const std::string bad =
      "request_id must be 1 to " + std::to_string(kMaxRequestIdBytes) + " characters of [A-Za-z0-9_.:-]";
  if (!v->is_string()) return BadRequest(bad, "request_id");
  const std::string& id = v->get_ref<const std::string&>();
  bool ok = !id.empty() && id.size() <= kMaxRequestIdBytes;
  for (char c : id) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                c == ':' || c == '-');
  }
  if (!ok) return BadRequest(bad, "request_id");
  out->request_id = id;
  return std::nullopt;
}

Error ReadPriority(const json& body, ApiRequest* out) {
  std::optional<int64_t> priority;
  if (Error e = ReadInt(body, "priority", kMinPriority, kMaxPriority, &priority)) return e;
  if (priority) out->priority = static_cast<int32_t>(*priority);
  return std::nullopt;
}

// Fields shared by both endpoints; the field table runs first.
Error ReadCommon(const json& body, RequestBody body_kind, const RequestLimits& limits, ApiRequest* out) {
  if (Error e = CheckRequestFields(body, body_kind, &out->ignored_fields)) return e;
  if (Error e = ReadModel(body, out)) return e;
  if (Error e = ReadLengths(body, limits, out)) return e;
  if (Error e = ReadSampling(body, limits, &out->sampling)) return e;
  if (Error e = ReadBool(body, "ignore_eos", &out->ignore_eos)) return e;
  if (Error e = ReadBool(body, "add_special_tokens", &out->add_special_tokens)) return e;
  if (Error e = ReadDecoding(body, out)) return e;
  if (Error e = ReadStreaming(body, out)) return e;
  if (Error e = ReadRequestId(body, out)) return e;
  if (Error e = ReadPriority(body, out)) return e;
  if (Error e = ReadLogprobs(body, out->kind, out)) return e;
  if (Error e = ReadLogitBias(body, limits, out)) return e;
  if (Error e = ReadBool(body, "include_timing", &out->include_timing)) return e;
  if (Error e = ReadResponseFormat(body, &out->structured_output)) return e;
  return ReadStop(body, limits, out);
}

Error ReadPrompts(const json& body, const RequestLimits& limits, ApiRequest* out) {
  const json* v = FindField(body, "prompt");
  if (v == nullptr) return BadRequest("prompt is required", "prompt");
  if (v->is_string()) {
    if (v->get_ref<const std::string&>().empty()) return BadRequest("prompt is empty", "prompt");
    out->prompts.push_back({false, v->get<std::string>(), {}});
    return std::nullopt;
  }
  if (!v->is_array()) {
    return BadRequest("prompt must be a string, a list of strings or a list of token ids", "prompt");
  }
  if (v->empty()) return BadRequest("prompt is empty", "prompt");
  const json& first = v->front();
  if (first.is_number()) {  // one prompt as token ids
    PromptInput prompt{true, {}, {}};
    if (Error e = ReadTokenList(*v, limits.vocab_size, "prompt", &prompt.token_ids)) return e;
    out->prompts.push_back(std::move(prompt));
    return std::nullopt;
  }
  if (static_cast<int64_t>(v->size()) > limits.max_prompts) {
    return BadRequest("prompt has more than " + std::to_string(limits.max_prompts) + " entries", "prompt");
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    const std::string param = "prompt[" + std::to_string(i) + "]";
    if (first.is_string() && item.is_string()) {
      if (item.get_ref<const std::string&>().empty()) return BadRequest(param + " is empty", param);
      out->prompts.push_back({false, item.get<std::string>(), {}});
    } else if (first.is_array() && item.is_array()) {
      PromptInput prompt{true, {}, {}};
      if (Error e = ReadTokenList(item, limits.vocab_size, param, &prompt.token_ids)) return e;
      out->prompts.push_back(std::move(prompt));
    } else {
      return BadRequest(param + ": a prompt list must be all strings or all token-id lists", param);
    }
  }
  return std::nullopt;
}

// max_tokens 0 asks for no completion: only an echoed prompt makes a response of it.
Error CheckZeroMaxTokens(const ApiRequest& r) {
  if (r.max_tokens == 0 && !r.echo) {
    return BadRequest("max_tokens must be at least 1 (0 only with echo on completions)", "max_tokens");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseCompletionRequest(const json& body, const RequestLimits& limits, ApiRequest* out) {
  out->kind = ApiKind::kCompletion;
  out->add_special_tokens = true;
  if (Error e = ReadCommon(body, kCompletionsBody, limits, out)) return e;
  if (Error e = ReadBool(body, "echo", &out->echo)) return e;
  if (Error e = CheckZeroMaxTokens(*out)) return e;
  if (Error e = ReadPrompts(body, limits, out)) return e;
  if (static_cast<int64_t>(out->prompts.size()) * out->n > limits.max_prompts) {
    return BadRequest("number of prompts times n exceeds " + std::to_string(limits.max_prompts), "n");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseChatRequest(const json& body, const RequestLimits& limits, ApiRequest* out) {
  out->kind = ApiKind::kChat;
  out->add_special_tokens = false;  // the chat template writes the special tokens itself
  if (Error e = ReadCommon(body, kChatBody, limits, out)) return e;
  bool echo = false;
  if (Error e = ReadBool(body, "echo", &echo)) return e;
  if (echo) {
    return BadRequest("echo is not supported by this server on chat completions (completions only)", "echo",
                      "unsupported_parameter");
  }
  if (Error e = CheckZeroMaxTokens(*out)) return e;
  if (Error e = ReadChatMessages(body, limits.max_messages, &out->messages, &out->ignored_fields)) return e;
  if (Error e = ReadBool(body, "add_generation_prompt", &out->add_generation_prompt)) return e;
  if (Error e = ReadChatTemplateKwargs(body, &out->chat_template_kwargs)) return e;
  return ReadToolRequest(body, &out->tools);
}

}  // namespace tandem::router
