#include "common/tokenizer/chat_template.h"

#include "common/tokenizer/jinja_interpreter.h"
#include "common/tokenizer/jinja_parser.h"
#include "common/tokenizer/tokenizer_config.h"

namespace tandem::tokenizer {

struct ChatTemplate::Parsed {
  jinja::NodeList nodes;
};

StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string source) {
  TANDEM_ASSIGN_OR_RETURN(jinja::NodeList nodes, jinja::ParseTemplate(source));
  ChatTemplate t;
  t.source_ = std::make_shared<const std::string>(std::move(source));
  auto parsed = std::make_shared<Parsed>();
  parsed->nodes = std::move(nodes);
  t.parsed_ = std::move(parsed);
  return t;
}

StatusOr<ChatTemplate> ChatTemplate::FromModelDir(const std::string& dir, std::string_view name) {
  TANDEM_ASSIGN_OR_RETURN(TokenizerConfig config, TokenizerConfig::FromModelDir(dir));
  const std::string key = name.empty() ? "default" : std::string(name);
  const auto it = config.chat_templates.find(key);
  if (it == config.chat_templates.end()) {
    return NotFoundError("model in " + dir + " has no chat template named '" + key + "'");
  }
  auto t = FromSource(it->second);
  if (!t.ok()) return t.status().WithContext("chat template '" + key + "' of " + dir);
  return t;
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& messages, const ChatRenderOptions& options) const {
  if (!messages.is_array()) return InvalidArgumentError("messages must be an array");
  if (!options.extra_context.is_null() && !options.extra_context.is_object()) {
    return InvalidArgumentError("extra_context must be an object");
  }
  jinja::ValueDict vars;
  if (options.extra_context.is_object()) {
    for (const auto& [k, v] : options.extra_context.items()) vars.Set(k, jinja::Value::FromJson(v));
  }
  vars.Set("messages", jinja::Value::FromJson(messages));
  if (!options.tools.is_null()) vars.Set("tools", jinja::Value::FromJson(options.tools));
  vars.Set("add_generation_prompt", jinja::Value(options.add_generation_prompt));
  if (options.bos_token) vars.Set("bos_token", jinja::Value(*options.bos_token));
  if (options.eos_token) vars.Set("eos_token", jinja::Value(*options.eos_token));
  jinja::Interpreter interpreter(jinja::RenderLimits{});
  auto out = interpreter.Render(parsed_->nodes, std::move(vars));
  if (out.ok()) return out;
  const Status& s = out.status();
  if (s.code() == StatusCode::kFailedPrecondition) return InvalidArgumentError(s.message());
  if (s.code() == StatusCode::kInvalidArgument) return InvalidArgumentError("chat template error: " + s.message());
  return s;
}

}  // namespace tandem::tokenizer
