#include "router/chat_tool_calls.h"

namespace tandem::router {

std::optional<ApiError> ChatToolCalls::Configure(const ToolRequest& request, ToolCallFormat model_format,
                                                 std::string* structured_output) {
  choice_ = request.choice;
  options_.max_calls = request.parallel_tool_calls ? 1 << 20 : 1;
  switch (request.choice) {
    case ToolChoice::kNone: return std::nullopt;
    case ToolChoice::kAuto:
      if (model_format == ToolCallFormat::kNone) {
        return BadRequest(
            "\"auto\" tool choice needs a tool-call parser: this model's chat template shows no known tool-call "
            "format; start the router with tool_call_parser set (hermes or llama3_json), or use tool_choice "
            "\"required\", a named function or \"none\"",
            "tool_choice");
      }
      options_.format = model_format;
      return std::nullopt;
    case ToolChoice::kRequired: options_.format = ToolCallFormat::kJsonArray; break;
    case ToolChoice::kNamed:
      options_.format = ToolCallFormat::kArguments;
      options_.named_function = request.named_function;
      break;
  }
  *structured_output = ToolChoiceStructuredOutput(request);
  return std::nullopt;
}

std::vector<nlohmann::json> ChatToolCalls::Feed(int32_t index, const std::string& text) {
  if (parsers_.size() <= static_cast<size_t>(index)) parsers_.resize(index + 1);
  auto& parser = parsers_[index];
  if (!parser) parser = std::make_unique<ToolCallParser>(options_.format, options_.max_calls, options_.named_function);
  std::vector<ToolParseEvent> events;
  parser->Feed(text, &events);
  std::vector<nlohmann::json> deltas;
  for (const ToolParseEvent& e : events) deltas.push_back(ToolEventDelta(e));
  return deltas;
}

std::vector<nlohmann::json> ChatToolCalls::Finish(int32_t index) {
  std::vector<nlohmann::json> deltas = Feed(index, "");
  std::vector<ToolParseEvent> events;
  parsers_[index]->Finish(&events);
  for (const ToolParseEvent& e : events) deltas.push_back(ToolEventDelta(e));
  return deltas;
}

FinishReason ChatToolCalls::ShownFinishReason(int32_t index, FinishReason engine_reason) const {
  const bool called = static_cast<size_t>(index) < parsers_.size() && parsers_[index] &&
                      parsers_[index]->num_calls() > 0;
  if (choice_ == ToolChoice::kAuto && called) return FinishReason::kToolCalls;
  if (choice_ == ToolChoice::kRequired && called && engine_reason == FinishReason::kStop) {
    return FinishReason::kToolCalls;
  }
  return engine_reason;
}

void ChatToolCalls::Apply(std::vector<ChoiceOutput>* outputs) const {
  if (!active()) return;
  for (ChoiceOutput& out : *outputs) {
    ParsedToolOutput parsed = ParseToolOutput(options_, out.text);
    out.text = parsed.content.value_or("");
    out.tool_calls = std::move(parsed.calls);
    const bool called = !out.tool_calls.empty();
    if (choice_ == ToolChoice::kAuto && called) out.finish_reason = FinishReason::kToolCalls;
    if (choice_ == ToolChoice::kRequired && called && out.finish_reason == FinishReason::kStop) {
      out.finish_reason = FinishReason::kToolCalls;
    }
  }
}

}  // namespace tandem::router
