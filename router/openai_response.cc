#include "router/openai_response.h"

#include "common/base/ids.h"

namespace tandem::router {

using nlohmann::json;

std::string NewResponseId(ApiKind kind) { return ResponseIdFor(kind, RandomHexId()); }

std::string ResponseIdFor(ApiKind kind, const std::string& request_id) {
  return (kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-") + request_id;
}

const char* FinishReasonName(FinishReason reason) { return reason == FinishReason::kStop ? "stop" : "length"; }

json UsageJson(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

namespace {

json Envelope(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

}  // namespace

json CompletionBody(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, const Usage& usage) {
  const bool chat = meta.kind == ApiKind::kChat;
  json body = Envelope(meta, chat ? "chat.completion" : "text_completion");
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    json choice = {{"index", i}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
    } else {
      choice["text"] = choices[i].text;
    }
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = FinishReasonName(choices[i].finish_reason);
    list.push_back(std::move(choice));
  }
  body["choices"] = std::move(list);
  body["usage"] = UsageJson(usage);
  return body;
}

json StreamChunk(const ResponseMeta& meta, int32_t index, const std::string& text,
                 std::optional<FinishReason> finish_reason, bool with_role, bool usage_null) {
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
  choice["logprobs"] = nullptr;
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
