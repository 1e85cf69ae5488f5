#include "router/chat_messages.h"

#include <algorithm>

namespace tandem::router {
namespace {

using nlohmann::json;

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
  if (const json* calls = FindField(m, "tool_calls")) {
    if (!calls->is_array()) return BadRequest(param + ".tool_calls must be a list", param + ".tool_calls");
    if (!calls->empty()) {
      return BadRequest(param + ".tool_calls is not supported by this server: tool calling is not implemented",
                        param + ".tool_calls", "unsupported_parameter");
    }
  }
  std::string content;
  if (ReadError e = ReadContent(m, param + ".content", role_name, &content)) return e;
  json normalized = {{"role", role_name}, {"content", std::move(content)}};
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
  // The router sets these itself; `tools` would render tool definitions, and tool calling is not implemented.
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
