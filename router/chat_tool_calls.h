// ChatToolCalls: the tool-call side of one chat request across its choices:
// which parser applies (tool_choice auto: the model's format; required: the
// forced JSON array; a named function: its forced arguments; none or no tools:
// nothing), the stream deltas of each choice, the calls of a whole response,
// and the finish reason the client sees ("tool_calls" as vLLM gives it: auto
// when a call was made, required when one was made and the model stopped;
// a named function keeps "stop", as OpenAI does).
// Thread rule: one owner (the call's strand).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "router/api_error.h"
#include "router/openai_response.h"
#include "router/tool_call_output.h"
#include "router/tool_request.h"

namespace tandem::router {

class ChatToolCalls {
 public:
  ChatToolCalls() = default;

  // For a chat request: sets *structured_output for required / named. A 400
  // naming tool_choice when it is auto with tools and `model_format` is kNone.
  std::optional<ApiError> Configure(const ToolRequest& request, ToolCallFormat model_format,
                                    std::string* structured_output);
  // The output is parsed (there are tools and tool_choice is not none).
  bool active() const { return options_.format != ToolCallFormat::kNone; }

  // Streamed: the chat `delta` objects choice `index`'s next text makes (maybe none).
  std::vector<nlohmann::json> Feed(int32_t index, const std::string& text);
  // Streamed: the deltas held back at the choice's end.
  std::vector<nlohmann::json> Finish(int32_t index);
  // The finish reason shown for a choice that ended with `engine_reason`.
  FinishReason ShownFinishReason(int32_t index, FinishReason engine_reason) const;

  // Whole response: splits each choice's text into content and tool_calls and
  // sets the finish reason shown.
  void Apply(std::vector<ChoiceOutput>* outputs) const;

 private:
  ToolChoice choice_ = ToolChoice::kNone;
  ToolParseOptions options_;
  std::vector<std::unique_ptr<ToolCallParser>> parsers_;  // per choice, made on first use
};

}  // namespace tandem::router
