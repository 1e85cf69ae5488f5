// Jinja builtins used by chat templates: filters, tests, and the global
// functions (range, namespace, dict,
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

StatusOr<Value> ApplyFilter(BuiltinContext& ctx, const std::string& name, const Value& input, CallArgs& args);
StatusOr<bool> ApplyTest(BuiltinContext& ctx, const std::string& name, const Value& input, CallArgs& args);

// Globals visible to every template.
ValueDict MakeGlobals();

}  // namespace tandem::tokenizer::jinja
