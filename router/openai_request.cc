#include "router/openai_request.h"

#include <cmath>
#include <limits>

namespace tandem::router {
namespace {

using nlohmann::json;
using Error = std::optional<ApiError>;

// A field that is missing or null counts as absent (clients send explicit nulls).
const json* Find(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

Error ReadInt(const json& body, const char* name, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  const json* v = Find(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return BadRequest(std::string(name) + " must be an integer", name);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return BadRequest(std::string(name) + " must be at most " + std::to_string(hi), name);
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    return BadRequest(std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                          std::to_string(x),
                      name);
  }
  *out = x;
  return std::nullopt;
}

// Reads a number into *out when present; range [lo, hi], lo excluded when lo_open.
Error ReadFloat(const json& body, const char* name, double lo, double hi, bool lo_open, float* out) {
  const json* v = Find(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return BadRequest(std::string(name) + " must be a number", name);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x > hi || x < lo || (lo_open && x == lo)) {
    return BadRequest(std::string(name) + " must be in " + (lo_open ? "(" : "[") + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]",
                      name);
  }
  *out = static_cast<float>(x);
  return std::nullopt;
}

Error ReadBool(const json& body, const char* name, bool* out) {
  const json* v = Find(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return BadRequest(std::string(name) + " must be a boolean", name);
  *out = v->get<bool>();
  return std::nullopt;
}

Error ReadTokenId(const json& v, int32_t vocab_size, const std::string& param, TokenId* out) {
  if (!v.is_number_integer()) return BadRequest(param + " must be an integer token id", param);
  const bool in_range = !v.is_number_unsigned() || v.get<uint64_t>() < uint64_t{1} << 31;
  const int64_t id = in_range ? v.get<int64_t>() : -1;
  if (!in_range || id < 0 || id >= vocab_size) {
    return BadRequest(param + " is not a valid token id (vocabulary size " + std::to_string(vocab_size) + ")", param);
  }
  *out = static_cast<TokenId>(id);
  return std::nullopt;
}

Error ReadTokenList(const json& v, int32_t vocab_size, const std::string& param, std::vector<TokenId>* out) {
  if (v.empty()) return BadRequest(param + " must not be empty", param);
  out->reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    TokenId id = 0;
    if (Error e = ReadTokenId(v[i], vocab_size, param + "[" + std::to_string(i) + "]", &id)) {
      return e;
    }
    out->push_back(id);
  }
  return std::nullopt;
}

Error ReadModel(const json& body, ApiRequest* out) {
  const json* v = Find(body, "model");
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return BadRequest("model must be a string", "model");
  out->model = v->get<std::string>();
  return std::nullopt;
}

Error ReadStop(const json& body, const RequestLimits& limits, ApiRequest* out) {
  const json* v = Find(body, "stop");
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
  if (const json* ids = Find(body, "stop_token_ids")) {
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

Error RejectUnsupported(const json& body) {
  if (const json* v = Find(body, "logprobs")) {
    const bool off = (v->is_boolean() && !v->get<bool>()) || (v->is_number_integer() && *v == 0);
    if (!off) return BadRequest("logprobs are not supported", "logprobs");
  }
  if (const json* v = Find(body, "top_logprobs")) {
    if (!(v->is_number_integer() && *v == 0)) {
      return BadRequest("top_logprobs is not supported", "top_logprobs");
    }
  }
  if (const json* v = Find(body, "echo")) {
    if (!v->is_boolean()) return BadRequest("echo must be a boolean", "echo");
    if (v->get<bool>()) return BadRequest("echo is not supported", "echo");
  }
  if (const json* v = Find(body, "suffix")) {
    if (!v->is_string() || !v->get<std::string>().empty()) {
      return BadRequest("suffix is not supported", "suffix");
    }
  }
  if (const json* v = Find(body, "logit_bias")) {
    if (!v->is_object()) return BadRequest("logit_bias must be an object", "logit_bias");
    if (!v->empty()) return BadRequest("logit_bias is not supported", "logit_bias");
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

// Fields shared by both endpoints.
Error ReadCommon(const json& body, const RequestLimits& limits, ApiRequest* out) {
  if (Error e = ReadModel(body, out)) return e;
  if (Error e = RejectUnsupported(body)) return e;
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  std::optional<int64_t> max_tokens, max_completion_tokens, min_tokens, n, top_k, seed, best_of;
  if (Error e = ReadInt(body, "max_tokens", 1, kMaxInt32, &max_tokens)) return e;
  if (Error e = ReadInt(body, "max_completion_tokens", 1, kMaxInt32, &max_completion_tokens)) {
    return e;
  }
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
  if (Error e = ReadInt(body, "top_k", -1, limits.vocab_size, &top_k)) return e;
  out->sampling.top_k = top_k && *top_k > 0 ? static_cast<int32_t>(*top_k) : 0;
  if (Error e =
          ReadInt(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &seed)) {
    return e;
  }
  if (seed) out->sampling.seed = static_cast<uint64_t>(*seed);
  SamplingParams& s = out->sampling;
  if (Error e = ReadFloat(body, "temperature", 0.0, 2.0, false, &s.temperature)) return e;
  if (Error e = ReadFloat(body, "top_p", 0.0, 1.0, true, &s.top_p)) return e;
  if (Error e = ReadFloat(body, "min_p", 0.0, 1.0, false, &s.min_p)) return e;
  if (Error e = ReadFloat(body, "presence_penalty", -2.0, 2.0, false, &s.presence_penalty)) return e;
  if (Error e = ReadFloat(body, "frequency_penalty", -2.0, 2.0, false, &s.frequency_penalty)) {
    return e;
  }
  if (Error e = ReadFloat(body, "repetition_penalty", 0.0, 2.0, true, &s.repetition_penalty)) {
    return e;
  }
  if (Error e = ReadBool(body, "ignore_eos", &out->ignore_eos)) return e;
  if (Error e = ReadDecoding(body, out)) return e;
  if (Error e = ReadBool(body, "stream", &out->stream)) return e;
  if (const json* opts = Find(body, "stream_options")) {
    if (!opts->is_object()) return BadRequest("stream_options must be an object", "stream_options");
    if (Error e = ReadBool(*opts, "include_usage", &out->include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  return ReadStop(body, limits, out);
}

Error ReadPrompts(const json& body, const RequestLimits& limits, ApiRequest* out) {
  const json* v = Find(body, "prompt");
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

Error ReadContent(const json& message, const std::string& param, const std::string& role, std::string* out) {
  const json* content = Find(message, "content");
  if (content == nullptr) {
    if (role == "assistant") return std::nullopt;  // e.g. a message with only tool_calls
    return BadRequest(param + " is required", param);
  }
  if (content->is_string()) {
    *out = content->get<std::string>();
    return std::nullopt;
  }
  if (!content->is_array()) {
    return BadRequest(param + " must be a string or a list of content parts", param);
  }
  for (size_t j = 0; j < content->size(); ++j) {
    const json& part = (*content)[j];
    const std::string part_param = param + "[" + std::to_string(j) + "]";
    if (!part.is_object()) return BadRequest(part_param + " must be an object", part_param);
    const json* type = Find(part, "type");
    if (type == nullptr || !type->is_string() || *type != "text") {
      return BadRequest(part_param + ".type: only \"text\" content parts are supported", part_param + ".type");
    }
    const json* text = Find(part, "text");
    if (text == nullptr || !text->is_string()) {
      return BadRequest(part_param + ".text must be a string", part_param + ".text");
    }
    if (j > 0) out->push_back('\n');
    out->append(text->get_ref<const std::string&>());
  }
  return std::nullopt;
}

Error ReadMessages(const json& body, const RequestLimits& limits, ApiRequest* out) {
  const json* v = Find(body, "messages");
  if (v == nullptr) return BadRequest("messages is required", "messages");
  if (!v->is_array()) return BadRequest("messages must be a list of message objects", "messages");
  if (v->empty()) return BadRequest("messages must not be empty", "messages");
  if (static_cast<int64_t>(v->size()) > limits.max_messages) {
    return BadRequest("messages has more than " + std::to_string(limits.max_messages) + " entries", "messages");
  }
  out->messages = json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return BadRequest(param + " must be an object", param);
    const json* role = Find(m, "role");
    if (role == nullptr || !role->is_string()) {
      return BadRequest(param + ".role is required and must be a string", param + ".role");
    }
    std::string role_name = role->get<std::string>();
    if (role_name == "developer") role_name = "system";
    if (role_name != "system" && role_name != "user" && role_name != "assistant" && role_name != "tool") {
      return BadRequest(param + ".role must be one of system, user, assistant, tool", param + ".role");
    }
    std::string content;
    if (Error e = ReadContent(m, param + ".content", role_name, &content)) return e;
    json normalized = {{"role", role_name}, {"content", std::move(content)}};
    for (const char* extra : {"name", "tool_call_id"}) {
      if (const json* x = Find(m, extra)) {
        if (!x->is_string()) {
          return BadRequest(param + "." + extra + " must be a string", param + "." + extra);
        }
        normalized[extra] = *x;
      }
    }
    out->messages.push_back(std::move(normalized));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseCompletionRequest(const json& body, const RequestLimits& limits, ApiRequest* out) {
  out->kind = ApiKind::kCompletion;
  if (Error e = ReadCommon(body, limits, out)) return e;
  if (Error e = ReadPrompts(body, limits, out)) return e;
  if (static_cast<int64_t>(out->prompts.size()) * out->n > limits.max_prompts) {
    return BadRequest("number of prompts times n exceeds " + std::to_string(limits.max_prompts), "n");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseChatRequest(const json& body, const RequestLimits& limits, ApiRequest* out) {
  out->kind = ApiKind::kChat;
  if (Error e = ReadCommon(body, limits, out)) return e;
  if (Error e = ReadMessages(body, limits, out)) return e;
  if (Error e = ReadBool(body, "add_generation_prompt", &out->add_generation_prompt)) return e;
  return std::nullopt;
}

}  // namespace tandem::router
