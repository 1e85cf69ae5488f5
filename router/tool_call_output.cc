#include "router/tool_call_output.h"

namespace tandem::router {

using nlohmann::json;

ParsedToolOutput CollectToolEvents(const std::vector<ToolParseEvent>& events) {
  ParsedToolOutput out;
  std::string content;
  for (const ToolParseEvent& e : events) {
    switch (e.kind) {
      case ToolParseEvent::Kind::kContent: content += e.text; break;
      case ToolParseEvent::Kind::kCallBegin: out.calls.push_back({e.id, e.text, ""}); break;
      case ToolParseEvent::Kind::kArguments:
        if (e.index >= 0 && e.index < static_cast<int32_t>(out.calls.size())) out.calls[e.index].arguments += e.text;
        break;
    }
  }
  if (!content.empty()) out.content = std::move(content);
  return out;
}

ParsedToolOutput ParseToolOutput(const ToolParseOptions& options, std::string_view text) {
  ToolCallParser parser(options.format, options.max_calls, options.named_function);
  std::vector<ToolParseEvent> events;
  parser.Feed(text, &events);
  parser.Finish(&events);
  ParsedToolOutput out = CollectToolEvents(events);
  if (options.format == ToolCallFormat::kArguments) return out;
  for (const ToolCallOutput& call : out.calls) {
    if (!json::accept(call.arguments)) {
      ParsedToolOutput plain;
      if (!text.empty()) plain.content = std::string(text);
      return plain;
    }
  }
  return out;
}

json ToolEventDelta(const ToolParseEvent& event) {
  switch (event.kind) {
    case ToolParseEvent::Kind::kContent: return {{"content", event.text}};
    case ToolParseEvent::Kind::kCallBegin:
      return {{"tool_calls",
               {{{"index", event.index},
                 {"id", event.id},
                 {"type", "function"},
                 {"function", {{"name", event.text}, {"arguments", ""}}}}}}};
    case ToolParseEvent::Kind::kArguments: break;
  }
  return {{"tool_calls", {{{"index", event.index}, {"function", {{"arguments", event.text}}}}}}};
}

json ToolCallsJson(const std::vector<ToolCallOutput>& calls) {
  json list = json::array();
  for (const ToolCallOutput& c : calls) {
    list.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return list;
}

}  // namespace tandem::router
