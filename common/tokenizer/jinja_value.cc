#include "common/tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer::jinja {
namespace {

constexpr int kMaxJsonDepth = 128;

// Python's float repr: shortest round-trip digits, fixed notation for
// exponents in [-4, 16), else d.ddde+XX.
std::string PythonFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(-exp - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return sign + out;
  }
  std::string mant = digits.substr(0, 1);
  if (digits.size() > 1) mant += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return sign + mant + ebuf;
}

std::string PythonStringRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

const Value* ValueDict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ValueDict::Set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<std::string>(std::move(hint));
  return v;
}
Value Value::None() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}
Value::Value(bool b) : type_(Type::kBool), b_(b), i_(b ? 1 : 0) {}
Value::Value(int64_t i) : type_(Type::kInt), i_(i) {}
Value::Value(double d) : type_(Type::kFloat), d_(d) {}
Value::Value(std::string s) : type_(Type::kString), s_(std::make_shared<std::string>(std::move(s))) {}

Value Value::List(std::vector<Value> items, bool tuple) {
  Value v;
  v.type_ = Type::kList;
  v.tuple_ = tuple;
  v.list_ = std::make_shared<std::vector<Value>>(std::move(items));
  return v;
}

Value Value::Dict(ValueDict dict, bool is_namespace) {
  Value v;
  v.type_ = Type::kDict;
  v.namespace_ = is_namespace;
  v.dict_ = std::make_shared<ValueDict>(std::move(dict));
  return v;
}

Value Value::Callable(std::string name, Function fn) {
  Value v;
  v.type_ = Type::kCallable;
  v.s_ = std::make_shared<std::string>(std::move(name));
  v.fn_ = std::make_shared<Function>(std::move(fn));
  return v;
}

Value Value::FromJson(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return None();
    case nlohmann::json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(FromJson(e));
      return List(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      ValueDict d;
      for (const auto& [k, e] : j.items()) d.items.emplace_back(k, FromJson(e));
      return Dict(std::move(d));
    }
    default: return None();
  }
}

bool Value::Truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool: return b_;
    case Type::kInt: return i_ != 0;
    case Type::kFloat: return d_ != 0.0;
    case Type::kString: return !s_->empty();
    case Type::kList: return !list_->empty();
    case Type::kDict: return namespace_ || !dict_->items.empty();
    case Type::kCallable: return true;
  }
  return false;
}

std::string Value::Str() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kString: return *s_;
    default: return Repr();
  }
}

std::string Value::Repr() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kNone: return "None";
    case Type::kBool: return b_ ? "True" : "False";
    case Type::kInt: return std::to_string(i_);
    case Type::kFloat: return PythonFloat(d_);
    case Type::kString: return PythonStringRepr(*s_);
    case Type::kList: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (tuple_ && list_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Type::kDict: {
      if (namespace_) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        if (!first) out += ", ";
        first = false;
        out += PythonStringRepr(k) + ": " + v.Repr();
      }
      return out + "}";
    }
    case Type::kCallable: return "<function " + *s_ + ">";
  }
  return "";
}

StatusOr<std::string> Value::ToJson(int indent, int depth) const {
  if (depth > kMaxJsonDepth) return InvalidArgumentError("tojson: value nested too deeply");
  const std::string nl = indent >= 0 ? "\n" + std::string((depth + 1) * indent, ' ') : "";
  const std::string nl_end = indent >= 0 ? "\n" + std::string(depth * indent, ' ') : "";
  const std::string item_sep = indent >= 0 ? "," : ", ";
  switch (type_) {
    case Type::kUndefined: return InvalidArgumentError("Object of type Undefined is not JSON serializable");
    case Type::kNone: return std::string("null");
    case Type::kBool: return std::string(b_ ? "true" : "false");
    case Type::kInt: return std::to_string(i_);
    case Type::kFloat:
      if (std::isnan(d_)) return std::string("NaN");
      if (std::isinf(d_)) return std::string(d_ > 0 ? "Infinity" : "-Infinity");
      return PythonFloat(d_);
    case Type::kString: return JsonString(*s_);
    case Type::kList: {
      if (list_->empty()) return std::string("[]");
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += item_sep;
        out += nl;
        TANDEM_ASSIGN_OR_RETURN(std::string item, (*list_)[i].ToJson(indent, depth + 1));
        out += item;
      }
      return out + nl_end + "]";
    }
    case Type::kDict: {
      if (namespace_) return InvalidArgumentError("Object of type Namespace is not JSON serializable");
      if (dict_->items.empty()) return std::string("{}");
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        if (!first) out += item_sep;
        first = false;
        out += nl + JsonString(k) + ": ";
        TANDEM_ASSIGN_OR_RETURN(std::string item, v.ToJson(indent, depth + 1));
        out += item;
      }
      return out + nl_end + "}";
    }
    case Type::kCallable: return InvalidArgumentError("Object of type function is not JSON serializable");
  }
  return std::string();
}

StatusOr<std::vector<Value>> Value::Items() const {
  switch (type_) {
    case Type::kUndefined: return std::vector<Value>();
    case Type::kList: return *list_;
    case Type::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, v] : dict_->items) keys.emplace_back(k);
      return keys;
    }
    case Type::kString: {
      std::vector<Value> chars;
      size_t pos = 0;
      while (pos < s_->size()) {
        const size_t start = pos;
        NextCodePoint(*s_, &pos);
        chars.emplace_back(s_->substr(start, pos - start));
      }
      return chars;
    }
    default: return InvalidArgumentError("'" + TypeName() + "' object is not iterable");
  }
}

std::string Value::TypeName() const {
  switch (type_) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kList: return tuple_ ? "tuple" : "list";
    case Type::kDict: return namespace_ ? "Namespace" : "dict";
    case Type::kCallable: return "function";
  }
  return "?";
}

const Value* CallArgs::Get(size_t i, std::string_view name) const {
  if (i < positional.size()) return &positional[i];
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

bool ValuesEqual(const Value& a, const Value& b) {
  if (a.IsNumber() && b.IsNumber()) {
    if (a.type() == Value::Type::kFloat || b.type() == Value::Type::kFloat) {
      return a.AsDouble() == b.AsDouble();
    }
    return a.AsInt() == b.AsInt();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone: return true;
    case Value::Type::kString: return a.AsString() == b.AsString();
    case Value::Type::kList: {
      const auto &x = a.AsList(), &y = b.AsList();
      if (x.size() != y.size() || a.IsTuple() != b.IsTuple()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!ValuesEqual(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Type::kDict: {
      const auto &x = a.AsDict(), &y = b.AsDict();
      if (a.IsNamespace() || b.IsNamespace()) return &x == &y;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.Find(k);
        if (other == nullptr || !ValuesEqual(v, *other)) return false;
      }
      return true;
    }
    case Value::Type::kCallable: return &a.AsFunction() == &b.AsFunction();
    default: return false;
  }
}

StatusOr<int> CompareValues(const Value& a, const Value& b) {
  if (a.IsNumber() && b.IsNumber()) {
    const double x = a.AsDouble(), y = b.AsDouble();
    if (a.type() != Value::Type::kFloat && b.type() != Value::Type::kFloat) {
      return a.AsInt() < b.AsInt() ? -1 : (a.AsInt() > b.AsInt() ? 1 : 0);
    }
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.IsString() && b.IsString()) {
    // UTF-8 byte order equals code point order.
    const int c = a.AsString().compare(b.AsString());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.IsList() && b.IsList()) {
    const auto &x = a.AsList(), &y = b.AsList();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (ValuesEqual(x[i], y[i])) continue;
      return CompareValues(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return InvalidArgumentError("'<' not supported between instances of '" + a.TypeName() + "' and '" + b.TypeName() +
                              "'");
}

std::u32string ToU32(std::string_view s) {
  std::u32string out;
  size_t pos = 0;
  while (pos < s.size()) out.push_back(NextCodePoint(s, &pos));
  return out;
}

std::string FromU32(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

}  // namespace tandem::tokenizer::jinja
