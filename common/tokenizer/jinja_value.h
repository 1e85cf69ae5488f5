// The value model of the chat-template renderer: Python/Jinja semantics for
// undefined, none, bool, int, float, str, list/tuple, dict (insertion
// ordered), namespace and callables. Lists and dicts have reference semantics
// like Python objects. Not thread-safe (values live inside one render).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace tandem::tokenizer::jinja {

class Value;
struct CallArgs;
using Function = std::function<StatusOr<Value>(CallArgs&)>;

struct ValueDict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
};

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // undefined
  static Value Undefined(std::string hint = "");
  static Value None();
  Value(bool b);                                    // NOLINT
  Value(int64_t i);                                 // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d);                                  // NOLINT
  Value(std::string s);                             // NOLINT
  Value(const char* s) : Value(std::string(s)) {}   // NOLINT
  static Value List(std::vector<Value> items, bool tuple = false);
  static Value Dict(ValueDict dict = {}, bool is_namespace = false);
  static Value Callable(std::string name, Function fn);
  static Value FromJson(const nlohmann::json& j);

  Type type() const { return type_; }
  bool IsUndefined() const { return type_ == Type::kUndefined; }
  bool IsNone() const { return type_ == Type::kNone; }
  bool IsString() const { return type_ == Type::kString; }
  bool IsNumber() const { return type_ == Type::kInt || type_ == Type::kFloat || type_ == Type::kBool; }
  bool IsList() const { return type_ == Type::kList; }
  bool IsTuple() const { return type_ == Type::kList && tuple_; }
  bool IsDict() const { return type_ == Type::kDict; }
  bool IsNamespace() const { return type_ == Type::kDict && namespace_; }
  bool IsCallable() const { return type_ == Type::kCallable; }

  bool AsBool() const { return b_; }
  int64_t AsInt() const { return type_ == Type::kFloat ? static_cast<int64_t>(d_) : i_; }
  double AsDouble() const { return type_ == Type::kFloat ? d_ : static_cast<double>(i_); }
  const std::string& AsString() const { return *s_; }
  std::vector<Value>& AsList() const { return *list_; }
  ValueDict& AsDict() const { return *dict_; }
  const Function& AsFunction() const { return *fn_; }
  const std::string& name() const { return *s_; }  // callable name / undefined hint

  bool Truthy() const;
  // Python str(): what {{ value }} prints.
  std::string Str() const;
  // Python repr(): used inside containers.
  std::string Repr() const;
  // json.dumps(value, ensure_ascii=False, indent=indent) (indent < 0: none).
  StatusOr<std::string> ToJson(int indent, int depth = 0) const;
  // Iteration items: list elements, dict keys, string characters.
  StatusOr<std::vector<Value>> Items() const;
  std::string TypeName() const;

 private:
  Type type_ = Type::kUndefined;
  bool b_ = false, tuple_ = false, namespace_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<std::string> s_;
  std::shared_ptr<std::vector<Value>> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<Function> fn_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Positional i, else keyword `name`, else nullptr.
  const Value* Get(size_t i, std::string_view name) const;
};

bool ValuesEqual(const Value& a, const Value& b);
// Python ordering for numbers, strings and lists; InvalidArgument otherwise.
StatusOr<int> CompareValues(const Value& a, const Value& b);

// Code point helpers for Python-style string indexing.
std::u32string ToU32(std::string_view s);
std::string FromU32(std::u32string_view s);

}  // namespace tandem::tokenizer::jinja
