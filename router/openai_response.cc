#include "router/openai_response.h"

#include <fmt/format.h>

#include <cmath>
#include <tuple>

#include "common/base/ids.h"
#include "router/utf8_stream.h"

namespace tandem::router {

using nlohmann::json;

std::string NewResponseId(ApiKind kind) { return ResponseIdFor(kind, RandomHexId()); }

std::string ResponseIdFor(ApiKind kind, const std::string& request_id) {
  return (kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-") + request_id;
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kToolCalls: return "tool_calls";
    case FinishReason::kLength: break;
  }
  return "length";
}

json UsageJson(const Usage& usage) {
  json out = {{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
  if (!usage.timing.is_null()) out["timing"] = usage.timing;
  return out;
}

namespace {

// The stages in the order a request passes them: (name in usage.timing, in server-timing, seconds).
std::vector<std::tuple<const char*, const char*, double>> Stages(const RequestTiming& t) {
  std::vector<std::tuple<const char*, const char*, double>> out = {
      {"router_queue", "router-queue", t.router_queue}};
  if (t.nodes) {
    out.insert(out.end(), {{"decode_queue", "decode-queue", t.nodes->decode_queue},
                           {"prefill_queue", "prefill-queue", t.nodes->prefill_queue},
                           {"prefill", "prefill", t.nodes->prefill},
                           {"kv_transfer", "kv-transfer", t.nodes->kv_transfer},
                           {"kv_wait", "kv-wait", t.nodes->kv_wait}});
  }
  out.emplace_back("first_token", "first-token", t.first_token);
  if (t.first_decode_step) out.emplace_back("first_decode_step", "first-decode-step", *t.first_decode_step);
  if (t.decode) out.emplace_back("decode", "decode", *t.decode);
  if (t.total) out.emplace_back("total", "total", *t.total);
  return out;
}

}  // namespace

json TimingJson(const RequestTiming& timing) {
  json out = json::object();
  for (const auto& [name, header, seconds] : Stages(timing)) out[name] = seconds;
  return out;
}

std::string ServerTimingHeader(const RequestTiming& timing) {
  std::string out;
  for (const auto& [name, header, seconds] : Stages(timing)) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{};dur={:.3f}", header, seconds * 1e3);
  }
  return out;
}

namespace {

json Envelope(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

// JSON has no -inf: a masked token's logprob shows as -9999.0 (vLLM's floor).
double ShownLogprob(float logprob) { return std::isfinite(logprob) ? std::max(-9999.0, double{logprob}) : -9999.0; }

json ChatLogprobToken(const LogprobToken& t) {
  json bytes = json::array();
  for (unsigned char c : t.bytes) bytes.push_back(static_cast<int>(c));
  return {{"token", SanitizeUtf8(t.bytes)}, {"logprob", ShownLogprob(t.logprob)}, {"bytes", std::move(bytes)}};
}

}  // namespace

json LogprobsJson(ApiKind kind, const std::vector<ChoiceLogprob>& entries) {
  if (kind == ApiKind::kChat) {
    json content = json::array();
    for (const ChoiceLogprob& e : entries) {
      json entry = ChatLogprobToken(e.token);
      json top = json::array();
      for (const LogprobToken& t : e.top) top.push_back(ChatLogprobToken(t));
      entry["top_logprobs"] = std::move(top);
      content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const ChoiceLogprob& e : entries) {
    const std::string token = SanitizeUtf8(e.token.bytes);
    tokens.push_back(token);
    offsets.push_back(e.text_offset);
    if (!e.has_logprob) {  // an echoed prompt's first token: nothing came before it
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      continue;
    }
    token_logprobs.push_back(ShownLogprob(e.token.logprob));
    // As the legacy API does: the sampled token is always among its top entries.
    json top = json::object();
    for (const LogprobToken& t : e.top) {
      const std::string text = SanitizeUtf8(t.bytes);
      if (!top.contains(text)) top[text] = ShownLogprob(t.logprob);
    }
    if (!top.contains(token)) top[token] = ShownLogprob(e.token.logprob);
    top_logprobs.push_back(std::move(top));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

json CompletionBody(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, const Usage& usage,
                    bool logprobs) {
  const bool chat = meta.kind == ApiKind::kChat;
  json body = Envelope(meta, chat ? "chat.completion" : "text_completion");
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    json choice = {{"index", i}};
    if (chat) {
      const ChoiceOutput& c = choices[i];
      const bool no_content = !c.tool_calls.empty() && c.text.empty();
      choice["message"] = {{"role", "assistant"}, {"content", no_content ? json(nullptr) : json(c.text)}};
      if (!c.tool_calls.empty()) choice["message"]["tool_calls"] = ToolCallsJson(c.tool_calls);
    } else {
      choice["text"] = choices[i].text;
    }
    choice["logprobs"] = logprobs ? LogprobsJson(meta.kind, choices[i].logprobs) : json(nullptr);
    choice["finish_reason"] = FinishReasonName(choices[i].finish_reason);
    list.push_back(std::move(choice));
  }
  body["choices"] = std::move(list);
  body["usage"] = UsageJson(usage);
  return body;
}

json StreamChunk(const ResponseMeta& meta, int32_t index, const std::string& text,
                 std::optional<FinishReason> finish_reason, bool with_role, bool usage_null,
                 const std::vector<ChoiceLogprob>* logprobs) {
  const bool chat = meta.kind == ApiKind::kChat;
  json chunk = Envelope(meta, chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", index}};
  if (chat) {
    json delta = json::object();
    if (with_role) delta["role"] = "assistant";
    if (with_role || !text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs != nullptr ? LogprobsJson(meta.kind, *logprobs) : json(nullptr);
  choice["finish_reason"] = finish_reason ? json(FinishReasonName(*finish_reason)) : json(nullptr);
  chunk["choices"] = json::array({std::move(choice)});
  if (usage_null) chunk["usage"] = nullptr;
  return chunk;
}

json ChatDeltaChunk(const ResponseMeta& meta, int32_t index, json delta, std::optional<FinishReason> finish_reason,
                    bool usage_null, const std::vector<ChoiceLogprob>* logprobs) {
  json chunk = Envelope(meta, "chat.completion.chunk");
  json choice = {{"index", index}, {"delta", std::move(delta)}};
  choice["logprobs"] = logprobs != nullptr ? LogprobsJson(meta.kind, *logprobs) : json(nullptr);
  choice["finish_reason"] = finish_reason ? json(FinishReasonName(*finish_reason)) : json(nullptr);
  chunk["choices"] = json::array({std::move(choice)});
  if (usage_null) chunk["usage"] = nullptr;
  return chunk;
}

json UsageChunk(const ResponseMeta& meta, const Usage& usage) {
  json chunk = Envelope(meta, meta.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
  chunk["choices"] = json::array();
  chunk["usage"] = UsageJson(usage);
  return chunk;
}

}  // namespace tandem::router
