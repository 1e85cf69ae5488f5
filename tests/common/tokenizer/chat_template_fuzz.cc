// Fuzz target for the chat-template parser and renderer: the input is
// template source, rendered over a fixed conversation. Any outcome is fine
// except a crash, a hang past the step limit, or a non-status failure.
#include <cstdint>
#include <string>

#include "common/tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::json messages = nlohmann::json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi \u00e9 \ud83d\ude00"},
    {"role": "assistant", "content": "Hello", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
    {"role": "user", "content": "Bye"}])");
  auto t = tandem::tokenizer::ChatTemplate::FromSource(std::string(reinterpret_cast<const char*>(data), size));
  if (!t.ok()) return 0;
  tandem::tokenizer::ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  (void)t->Render(messages, options);
  return 0;
}
