#include "router/chat_messages.h"

#include <algorithm>

#include "router/openai_request.h"

namespace tandem::router {
namespace {

using nlohmann::json;

constexpr size_t kMaxToolCallsPerMessage = 128;
constexpr int32_t kMaxArgumentsDepth = 32;

// One entry of an assistant message's tool_calls, as the templates read it:
// {"id"?, "type": "function", "function": {"name", "arguments": <object>}}. The
// client sends arguments as a JSON string (OpenAI) or an object; as vLLM does, a
// string is parsed into the object the templates expect (`arguments | tojson`,
// `arguments | items`); empty means {}.
ReadError ReadToolCall(const json& call, const std::string& param, json* out) {
  if (!call.is_object()) return BadRequest(param + " must be an object", param);
  if (const json* type = FindField(call, "type"); type != nullptr && *type != "function") {
    return BadRequest(param + ".type must be \"function\"", param + ".type");
  }
  const json* function = FindField(call, "function");
  if (function == nullptr || !function->is_object()) {
    return BadRequest(param + ".function must be an object", param + ".function");
  }
  const json* name = FindField(*function, "name");
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return BadRequest(param + ".function.name must be a non-empty string", param + ".function.name");
  }
  const std::string args_param = param + ".function.arguments";
  json arguments = json::object();
  if (const json* args = FindField(*function, "arguments")) {
    if (args->is_object()) {
      arguments = *args;
    } else if (!args->is_string()) {
      return BadRequest(args_param + " must be a JSON string of an object", args_param);
    } else if (!args->get_ref<const std::string&>().empty()) {
      if (ParseJsonBody(args->get_ref<const std::string&>(), kMaxArgumentsDepth, &arguments)) {
        return BadRequest(args_param + " must be a JSON object (as a string)", args_param);
      }
    }
  }
  json normalized = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", std::move(arguments)}}}};
  if (const json* id = FindField(call, "id")) {
    if (!id->is_string()) return BadRequest(param + ".id must be a string", param + ".id");
    normalized["id"] = *id;
  }
  *out = std::move(normalized);
  return std::nullopt;
}

// An assistant message's non-empty tool_calls into normalized["tool_calls"]
// (left out when empty: Llama 3.1's template tests `'tool_calls' in message`).
ReadError ReadToolCalls(const json& m, const std::string& param, const std::string& role, json* normalized) {
  const json* calls = FindField(m, "tool_calls");
  if (calls == nullptr) return std::nullopt;
  if (!calls->is_array()) return BadRequest(param + " must be a list", param);
  if (calls->empty()) return std::nullopt;
  if (role != "assistant") return BadRequest(param + " is only allowed on assistant messages", param);
  if (calls->size() > kMaxToolCallsPerMessage) {
    return BadRequest(param + " has more than " + std::to_string(kMaxToolCallsPerMessage) + " entries", param);
  }
  json out = json::array();
  for (size_t j = 0; j < calls->size(); ++j) {
    json call;
    if (ReadError e = ReadToolCall((*calls)[j], param + "[" + std::to_string(j) + "]", &call)) return e;
    out.push_back(std::move(call));
  }
  (*normalized)["tool_calls"] = std::move(out);
  return std::nullopt;
}

ReadError ReadContent(const json& message, const std::string& param, const std::string& role, std::string* out) {
  const json* content = FindField(message, "content");
  if (content == nullptr) {
    if (role == "assistant") return std::nullopt;  // e.g. an assistant turn that only called tools
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
    const json* type = FindField(part, "type");
    if (type == nullptr || !type->is_string() || *type != "text") {
      return BadRequest(part_param + ".type: only \"text\" content parts are supported", part_param + ".type");
    }
    const json* text = FindField(part, "text");
    if (text == nullptr || !text->is_string()) {
      return BadRequest(part_param + ".text must be a string", part_param + ".text");
    }
    if (j > 0) out->push_back('\n');
    out->append(text->get_ref<const std::string&>());
  }
  return std::nullopt;
}

void NoteIgnored(const std::string& name, std::vector<std::string>* ignored) {
  if (std::find(ignored->begin(), ignored->end(), name) == ignored->end()) ignored->push_back(name);
}

ReadError ReadMessage(const json& m, const std::string& param, json* out, std::vector<std::string>* ignored) {
  if (!m.is_object()) return BadRequest(param + " must be an object", param);
  const json* role = FindField(m, "role");
  if (role == nullptr || !role->is_string()) {
    return BadRequest(param + ".role is required and must be a string", param + ".role");
  }
  std::string role_name = role->get<std::string>();
  if (role_name == "developer") role_name = "system";
  if (role_name != "system" && role_name != "user" && role_name != "assistant" && role_name != "tool") {
    return BadRequest(param + ".role must be one of system, user, assistant, tool", param + ".role");
  }
  std::string content;
  if (ReadError e = ReadContent(m, param + ".content", role_name, &content)) return e;
  json normalized = {{"role", role_name}, {"content", std::move(content)}};
  if (ReadError e = ReadToolCalls(m, param + ".tool_calls", role_name, &normalized)) return e;
  for (const char* extra : {"name", "tool_call_id"}) {
    if (const json* x = FindField(m, extra)) {
      if (!x->is_string()) return BadRequest(param + "." + extra + " must be a string", param + "." + extra);
      normalized[extra] = *x;
    }
  }
  for (const auto& [key, value] : m.items()) {
    if (key != "role" && key != "content" && key != "name" && key != "tool_call_id" && key != "tool_calls") {
      NoteIgnored("messages[]." + key, ignored);
    }
  }
  *out = std::move(normalized);
  return std::nullopt;
}

}  // namespace

ReadError ReadChatMessages(const json& body, int32_t max_messages, json* out, std::vector<std::string>* ignored) {
  const json* v = FindField(body, "messages");
  if (v == nullptr) return BadRequest("messages is required", "messages");
  if (!v->is_array()) return BadRequest("messages must be a list of message objects", "messages");
  if (v->empty()) return BadRequest("messages must not be empty", "messages");
  if (static_cast<int64_t>(v->size()) > max_messages) {
    return BadRequest("messages has more than " + std::to_string(max_messages) + " entries", "messages");
  }
  *out = json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    json message;
    if (ReadError e = ReadMessage((*v)[i], "messages[" + std::to_string(i) + "]", &message, ignored)) return e;
    out->push_back(std::move(message));
  }
  return std::nullopt;
}

ReadError ReadChatTemplateKwargs(const json& body, json* out) {
  const json* v = FindField(body, "chat_template_kwargs");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return BadRequest("chat_template_kwargs must be an object", "chat_template_kwargs");
  // The router sets these itself (`tools` from the request's `tools`).
  for (const char* reserved : {"messages", "add_generation_prompt", "bos_token", "eos_token", "tools"}) {
    if (v->contains(reserved)) {
      return BadRequest(std::string("chat_template_kwargs may not set ") + reserved,
                        std::string("chat_template_kwargs.") + reserved);
    }
  }
  *out = *v;
  return std::nullopt;
}

}  // namespace tandem::router
