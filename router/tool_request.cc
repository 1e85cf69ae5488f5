#include "router/tool_request.h"

#include <set>

namespace tandem::router {
namespace {

using nlohmann::json;

bool ValidToolName(const std::string& name) {
  if (name.empty() || name.size() > kMaxToolNameBytes) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// One entry of `tools` into its template form.
ReadError ReadTool(const json& tool, const std::string& param, json* out) {
  if (!tool.is_object()) return BadRequest(param + " must be an object", param);
  const json* type = FindField(tool, "type");
  if (type == nullptr || *type != "function") {
    return BadRequest(param + ".type must be \"function\"", param + ".type");
  }
  const json* function = FindField(tool, "function");
  if (function == nullptr || !function->is_object()) {
    return BadRequest(param + ".function must be an object", param + ".function");
  }
  const std::string fparam = param + ".function";
  const json* name = FindField(*function, "name");
  if (name == nullptr || !name->is_string() || !ValidToolName(name->get<std::string>())) {
    return BadRequest(fparam + ".name is required: 1 to " + std::to_string(kMaxToolNameBytes) +
                          " characters of [A-Za-z0-9_.-]",
                      fparam + ".name");
  }
  json normalized = {{"name", *name}};
  if (const json* d = FindField(*function, "description")) {
    if (!d->is_string()) return BadRequest(fparam + ".description must be a string", fparam + ".description");
    normalized["description"] = *d;
  }
  if (const json* p = FindField(*function, "parameters")) {
    if (!p->is_object()) {
      return BadRequest(fparam + ".parameters must be a JSON schema object", fparam + ".parameters");
    }
    normalized["parameters"] = *p;
  }
  if (const json* s = FindField(*function, "strict")) {
    if (!s->is_boolean()) return BadRequest(fparam + ".strict must be a boolean", fparam + ".strict");
    normalized["strict"] = *s;
  }
  *out = {{"type", "function"}, {"function", std::move(normalized)}};
  return std::nullopt;
}

ReadError ReadTools(const json& body, ToolRequest* out) {
  const json* v = FindField(body, "tools");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return BadRequest("tools must be a list of tool objects", "tools");
  if (v->size() > kMaxTools) return BadRequest("tools has more than " + std::to_string(kMaxTools) + " entries", "tools");
  if (v->empty()) return std::nullopt;
  out->tools = json::array();
  std::set<std::string> names;
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string param = "tools[" + std::to_string(i) + "]";
    json tool;
    if (ReadError e = ReadTool((*v)[i], param, &tool)) return e;
    const std::string& name = tool["function"]["name"].get_ref<const std::string&>();
    if (!names.insert(name).second) {
      return BadRequest("two tools are named \"" + name + "\"", param + ".function.name");
    }
    out->tools.push_back(std::move(tool));
  }
  return std::nullopt;
}

bool HasTool(const ToolRequest& r, const std::string& name) {
  if (!r.has_tools()) return false;
  for (const json& t : r.tools) {
    if (t["function"]["name"] == name) return true;
  }
  return false;
}

ReadError ReadToolChoice(const json& body, ToolRequest* out) {
  const json* v = FindField(body, "tool_choice");
  out->choice = out->has_tools() ? ToolChoice::kAuto : ToolChoice::kNone;
  if (v == nullptr) return std::nullopt;
  const std::string kinds = "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                            "\"function\": {\"name\": ...}}";
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "none") {
      out->choice = ToolChoice::kNone;
    } else if (s == "auto") {
      out->choice = out->has_tools() ? ToolChoice::kAuto : ToolChoice::kNone;
    } else if (s == "required") {
      if (!out->has_tools()) return BadRequest("tool_choice \"required\" needs tools", "tool_choice");
      out->choice = ToolChoice::kRequired;
    } else {
      return BadRequest(kinds, "tool_choice");
    }
    return std::nullopt;
  }
  if (!v->is_object()) return BadRequest(kinds, "tool_choice");
  const json* type = FindField(*v, "type");
  if (type == nullptr || *type != "function") {
    return BadRequest("tool_choice.type must be \"function\"", "tool_choice.type");
  }
  const json* function = FindField(*v, "function");
  const json* name = function != nullptr && function->is_object() ? FindField(*function, "name") : nullptr;
  if (name == nullptr || !name->is_string()) {
    return BadRequest("tool_choice.function.name must be a string", "tool_choice.function.name");
  }
  if (!HasTool(*out, name->get<std::string>())) {
    return BadRequest("tool_choice names the function \"" + name->get<std::string>().substr(0, 64) +
                          "\", which is not among the tools",
                      "tool_choice.function.name");
  }
  out->choice = ToolChoice::kNamed;
  out->named_function = name->get<std::string>();
  return std::nullopt;
}

json ParametersOf(const json& tool) {
  const json& function = tool["function"];
  if (function.contains("parameters")) return function["parameters"];
  return {{"type", "object"}, {"properties", json::object()}};
}

}  // namespace

ReadError ReadToolRequest(const json& body, ToolRequest* out) {
  if (ReadError e = ReadTools(body, out)) return e;
  if (ReadError e = ReadToolChoice(body, out)) return e;
  return ReadBool(body, "parallel_tool_calls", &out->parallel_tool_calls);
}

std::string ToolChoiceStructuredOutput(const ToolRequest& request) {
  json schema;
  if (request.choice == ToolChoice::kNamed) {
    for (const json& tool : request.tools) {
      if (tool["function"]["name"] == request.named_function) schema = ParametersOf(tool);
    }
  } else if (request.choice == ToolChoice::kRequired) {
    json any_of = json::array();
    for (const json& tool : request.tools) {
      json name = {{"type", "string"}, {"enum", {tool["function"]["name"]}}};
      any_of.push_back({{"type", "object"},
                        {"properties", {{"name", std::move(name)}, {"parameters", ParametersOf(tool)}}},
                        {"required", {"name", "parameters"}},
                        {"additionalProperties", false}});
    }
    schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", std::move(any_of)}}}};
    if (!request.parallel_tool_calls) schema["maxItems"] = 1;
  } else {
    return "";
  }
  return json({{"type", "json_schema"}, {"schema", std::move(schema)}}).dump();
}

}  // namespace tandem::router
