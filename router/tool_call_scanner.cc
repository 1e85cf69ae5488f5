#include "router/tool_call_scanner.h"

#include <nlohmann/json.hpp>

namespace tandem::router {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

size_t ToolCallScanner::Feed(std::string_view text) {
  size_t taken = 0;
  while (taken < text.size() && !done_ && !failed_) {
    const char c = text[taken++];
    text_ += c;
    Step(c);
  }
  return taken;
}

void ToolCallScanner::Step(char c) {
  const bool in_value = depth_ >= 2 || (depth_ == 1 && in_string_ && state_ == State::kValue) ||
                        state_ == State::kScalar;
  if (in_string_) {
    if (capturing_ && in_value) arguments_ += c;
    if (depth_ == 1) token_ += c;
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      if (depth_ == 1 && state_ == State::kKey) {
        key_ = std::move(token_);
        token_.clear();
        state_ = State::kColon;
      } else if (depth_ == 1) {
        EndValue();
      }
    }
    return;
  }
  if (depth_ >= 2) {  // inside an object or array value
    if (capturing_) arguments_ += c;
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (++depth_ > kMaxDepth) Fail();
    } else if (c == '}' || c == ']') {
      if (--depth_ == 1) EndValue();
    }
    return;
  }
  StepTopLevel(c);
}

void ToolCallScanner::StepTopLevel(char c) {
  switch (state_) {
    case State::kStart:
      if (c == '{') {
        depth_ = 1;
        state_ = State::kKey;
      } else if (!IsBlank(c)) {
        Fail();
      }
      return;
    case State::kKey:
      if (c == '"') {
        in_string_ = true;
        token_ = "\"";
      } else if (c == '}') {
        done_ = true;
      } else if (!IsBlank(c)) {
        Fail();
      }
      return;
    case State::kColon:
      if (c == ':') {
        state_ = State::kValue;
      } else if (!IsBlank(c)) {
        Fail();
      }
      return;
    case State::kValue:
      if (!IsBlank(c)) StartValue(c);
      return;
    case State::kScalar:
      if (c == ',' || c == '}' || IsBlank(c)) {
        EndValue();
        if (!failed_) StepTopLevel(c);  // the byte that ended it belongs to what follows
      } else if (capturing_) {
        arguments_ += c;
      }
      return;
    case State::kAfterValue:
      if (c == ',') {
        state_ = State::kKey;
      } else if (c == '}') {
        done_ = true;
      } else if (!IsBlank(c)) {
        Fail();
      }
      return;
  }
}

void ToolCallScanner::StartValue(char c) {
  const bool is_arguments = key_ == "\"arguments\"" || key_ == "\"parameters\"";
  capturing_ = is_arguments && !arguments_key_seen_;
  if (capturing_) {
    arguments_key_seen_ = true;
    arguments_ += c;
  }
  if (c == '"') {
    in_string_ = true;
    token_ = "\"";
  } else if (c == '{' || c == '[') {
    depth_ = 2;
  } else if (c == '}' || c == ']' || c == ',' || c == ':') {
    Fail();
  } else {
    state_ = State::kScalar;
  }
}

void ToolCallScanner::EndValue() {
  if (key_ == "\"name\"" && !name_) {
    // Only a string value leaves its text in token_; anything else is not a name.
    const nlohmann::json name = token_.empty() ? nlohmann::json()
                                               : nlohmann::json::parse(token_, nullptr, /*allow_exceptions=*/false);
    if (!name.is_string() || name.get_ref<const std::string&>().empty()) return Fail();
    name_ = name.get<std::string>();
  }
  capturing_ = false;
  token_.clear();
  state_ = State::kAfterValue;
}

}  // namespace tandem::router
