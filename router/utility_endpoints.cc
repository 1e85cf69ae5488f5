#include "router/utility_endpoints.h"

#include "router/chat_messages.h"
#include "router/openai_request.h"
#include "router/request_fields.h"

namespace tandem::router {
namespace {

using nlohmann::json;

JsonReply ErrorReply(const ApiError& error, std::vector<std::string> ignored = {}) {
  return {error.http_status, error.ToBody(), std::move(ignored)};
}

ApiError ModelNotFound(std::string_view name) {
  ApiError error = BadRequest("The model `" + std::string(name) + "` does not exist.", "model", "model_not_found");
  error.http_status = 404;
  return error;
}

// Parses the body and checks its fields and model; *body_json is the object.
ReadError ReadUtilityBody(const RouterContext& context, std::string_view body, RequestBody kind, json* body_json,
                          std::vector<std::string>* ignored) {
  if (ReadError e = ParseJsonBody(body, context.config.max_json_depth, body_json)) return e;
  if (ReadError e = CheckRequestFields(*body_json, kind, ignored)) return e;
  if (const json* model = FindField(*body_json, "model")) {
    if (!model->is_string()) return BadRequest("model must be a string", "model");
    if (*model != context.ModelName()) return ModelNotFound(model->get<std::string>());
  }
  return std::nullopt;
}

// The prompt ids of a /tokenize body: a text prompt or chat messages.
ReadError TokenizeIds(const RouterContext& context, const json& body, std::vector<std::string>* ignored,
                      std::vector<TokenId>* ids) {
  const TextCodec& codec = *context.deps.codec;
  const json* prompt = FindField(body, "prompt");
  const bool chat = FindField(body, "messages") != nullptr;
  if ((prompt != nullptr) == chat) return BadRequest("give exactly one of prompt and messages", "prompt");
  bool add_special = !chat;  // vLLM's defaults: the chat template writes its own special tokens
  if (ReadError e = ReadBool(body, "add_special_tokens", &add_special)) return e;
  std::string text;
  if (chat) {
    ChatRenderOptions options;
    json messages;
    if (ReadError e = ReadChatMessages(body, context.config.max_messages, &messages, ignored)) return e;
    if (ReadError e = ReadBool(body, "add_generation_prompt", &options.add_generation_prompt)) return e;
    if (ReadError e = ReadChatTemplateKwargs(body, &options.template_kwargs)) return e;
    StatusOr<std::string> rendered = codec.RenderChat(messages, options);
    if (!rendered.ok()) return ApiErrorFromStatus(rendered.status(), "messages");
    text = std::move(*rendered);
  } else {
    if (!prompt->is_string()) return BadRequest("prompt must be a string", "prompt");
    text = prompt->get<std::string>();
  }
  StatusOr<std::vector<TokenId>> encoded = codec.Encode(text, add_special);
  if (!encoded.ok()) return ApiErrorFromStatus(encoded.status(), chat ? "messages" : "prompt");
  *ids = std::move(*encoded);
  return std::nullopt;
}

}  // namespace

json ModelObject(const RouterContext& context) {
  return {{"id", context.ModelName()},
          {"object", "model"},
          {"created", context.deps.model.created},
          {"owned_by", "tandem"},
          {"max_model_len", context.deps.model.max_context_tokens}};
}

JsonReply RetrieveModel(const RouterContext& context, std::string_view id) {
  if (id != context.ModelName()) return ErrorReply(ModelNotFound(id));
  return {200, DumpJson(ModelObject(context)), {}};
}

JsonReply HandleTokenize(const RouterContext& context, std::string_view body) {
  json request;
  std::vector<std::string> ignored;
  if (ReadError e = ReadUtilityBody(context, body, kTokenizeBody, &request, &ignored)) return ErrorReply(*e, ignored);
  std::vector<TokenId> ids;
  if (ReadError e = TokenizeIds(context, request, &ignored, &ids)) return ErrorReply(*e, ignored);
  json reply = {{"count", ids.size()}, {"max_model_len", context.deps.model.max_context_tokens}, {"tokens", ids}};
  return {200, DumpJson(reply), std::move(ignored)};
}

JsonReply HandleDetokenize(const RouterContext& context, std::string_view body) {
  json request;
  std::vector<std::string> ignored;
  if (ReadError e = ReadUtilityBody(context, body, kDetokenizeBody, &request, &ignored)) return ErrorReply(*e, ignored);
  const json* tokens = FindField(request, "tokens");
  if (tokens == nullptr) return ErrorReply(BadRequest("tokens is required", "tokens"), ignored);
  std::vector<TokenId> ids;
  if (ReadError e = ReadTokenList(*tokens, context.deps.model.vocab_size, "tokens", &ids, /*allow_empty=*/true)) {
    return ErrorReply(*e, ignored);
  }
  StatusOr<std::string> text = context.deps.codec->Decode(ids, /*skip_special_tokens=*/false);
  if (!text.ok()) return ErrorReply(ApiErrorFromStatus(text.status(), "tokens"), ignored);
  return {200, DumpJson(json{{"prompt", *text}}), std::move(ignored)};
}

JsonReply VersionReply(std::string_view version) { return {200, DumpJson(json{{"version", version}}), {}}; }

std::optional<std::string> PercentDecode(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace tandem::router
