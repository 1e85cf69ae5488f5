#include "common/tokenizer/tokenizer_config.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace tandem::tokenizer {
namespace {

// A token field is a string, {"content": string, ...} or null.
StatusOr<std::optional<std::string>> TokenField(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return std::optional<std::string>((*it)["content"].get<std::string>());
  }
  return InvalidArgumentError(std::string("tokenizer_config '") + key + "' must be a string or {content}");
}

StatusOr<std::optional<bool>> BoolField(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return InvalidArgumentError(std::string("tokenizer_config '") + key + "' must be a bool");
  return std::optional<bool>(it->get<bool>());
}

}  // namespace

StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open " + path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<size_t>(size) > max_bytes) {
    return InvalidArgumentError(path + " is too large or unreadable");
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), size);
  if (!in) return NotFoundError("cannot read " + path);
  return text;
}

StatusOr<TokenizerConfig> TokenizerConfig::FromJson(std::string_view json_text) {
  if (json_text.size() > kMaxTokenizerConfigBytes) return InvalidArgumentError("tokenizer_config.json too large");
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError("tokenizer_config.json is not a JSON object");
  }
  TokenizerConfig c;
  TANDEM_ASSIGN_OR_RETURN(c.bos_token, TokenField(j, "bos_token"));
  TANDEM_ASSIGN_OR_RETURN(c.eos_token, TokenField(j, "eos_token"));
  TANDEM_ASSIGN_OR_RETURN(c.add_bos_token, BoolField(j, "add_bos_token"));
  TANDEM_ASSIGN_OR_RETURN(c.add_eos_token, BoolField(j, "add_eos_token"));
  const auto ct = j.find("chat_template");
  if (ct != j.end() && !ct->is_null()) {
    if (ct->is_string()) {
      c.chat_templates["default"] = ct->get<std::string>();
    } else if (ct->is_array()) {
      for (const auto& entry : *ct) {
        if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
            !entry.contains("template") || !entry["template"].is_string()) {
          return InvalidArgumentError("chat_template list entries need string 'name' and 'template'");
        }
        c.chat_templates[entry["name"].get<std::string>()] = entry["template"].get<std::string>();
      }
    } else {
      return InvalidArgumentError("chat_template must be a string or a list of {name, template}");
    }
  }
  return c;
}

StatusOr<TokenizerConfig> TokenizerConfig::FromModelDir(const std::string& dir) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(dir + "/tokenizer_config.json", kMaxTokenizerConfigBytes));
  auto config = FromJson(text);
  if (!config.ok()) return config.status().WithContext(dir + "/tokenizer_config.json");
  auto jinja = ReadFileToString(dir + "/chat_template.jinja", kMaxTokenizerConfigBytes);
  if (jinja.ok()) {
    config->chat_templates["default"] = *std::move(jinja);
  } else if (jinja.status().code() != StatusCode::kNotFound) {
    return jinja.status();
  }
  return config;
}

}  // namespace tandem::tokenizer
