// Jinja builtins used by chat templates: filters, tests, methods of str/dict/
// list values, and the global functions (range, namespace, dict,
// raise_exception, strftime_now). Pure functions over Values; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/base/status.h"
#include "common/tokenizer/jinja_value.h"

namespace tandem::tokenizer::jinja {

// Calls back into the renderer so filters like map('upper') / select('odd')
// can reuse other filters and tests.
class BuiltinContext {
 public:
  virtual ~BuiltinContext() = default;
  virtual StatusOr<Value> CallFilter(const std::string& name, const Value& input, CallArgs& args) = 0;
  virtual StatusOr<bool> CallTest(const std::string& name, const Value& input, CallArgs& args) = 0;
};

StatusOr<Value> ApplyFilter(BuiltinContext& ctx, const std::string& name, const Value& input,
                            CallArgs& args);
StatusOr<bool> ApplyTest(BuiltinContext& ctx, const std::string& name, const Value& input,
                         CallArgs& args);

// `obj.name` where obj is a str/dict/list: a bound method, or Undefined when
// there is none (dict keys are looked up by the caller).
Value GetMethod(const Value& obj, const std::string& name);

// Globals visible to every template.
ValueDict MakeGlobals();

// Jinja's getattr/getitem semantics: dict key, list/str index (negative ok),
// else Undefined with a hint for the error message.
Value GetItem(const Value& obj, const Value& key);

// Python-style str.strip family on code points.
std::string PyStrip(const std::string& s, const Value* chars, bool left, bool right);

}  // namespace tandem::tokenizer::jinja
