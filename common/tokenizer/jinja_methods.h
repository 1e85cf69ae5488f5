// Python/Jinja operations on strings, dicts and lists used by the template
// renderer: str methods (strip, split, startswith, ...), dict methods (items,
// get, ...), attribute/item lookup, and the text helpers filters share.
// Pure functions over Values; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "common/tokenizer/jinja_value.h"

namespace tandem::tokenizer::jinja {

// `obj.name` where obj is a str/dict/list: a bound method, or Undefined when
// there is none (dict keys are looked up by the caller).
Value GetMethod(const Value& obj, const std::string& name);
// Jinja's getattr/getitem semantics: dict key, list/str index (negative ok),
// else Undefined with a hint for the error message.
Value GetItem(const Value& obj, const Value& key);

StatusOr<Value> StringMethod(const Value& self, const std::string& name, CallArgs& args);
StatusOr<Value> DictMethod(const Value& self, const std::string& name, CallArgs& args);

// Python str semantics on code points.
std::string PyStrip(const std::string& s, const Value* chars, bool left, bool right);
std::string PyReplace(const std::string& s, const std::string& from, const std::string& to, int64_t count);
std::vector<std::string> PySplit(const std::string& s, const Value* sep, int64_t maxsplit);
std::string MapCase(std::string_view s, bool upper);
std::string Capitalize(std::string_view s);
std::string Title(std::string_view s);
int64_t CodePointLength(std::string_view s);

// Argument helpers: an integer argument (or `fallback` when absent/None).
StatusOr<int64_t> IntArg(const Value* v, int64_t fallback);
Status RequireString(const Value& v, const char* what);

}  // namespace tandem::tokenizer::jinja
