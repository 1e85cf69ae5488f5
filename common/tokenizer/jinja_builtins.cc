#include "common/tokenizer/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include <utf8proc.h>

#include "common/tokenizer/jinja_methods.h"
#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer::jinja {
namespace {

Status Error(const std::string& message) { return InvalidArgumentError(message); }
StatusOr<int64_t> Length(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return int64_t{0};
    case Value::Type::kString: return CodePointLength(v.AsString());
    case Value::Type::kList: return static_cast<int64_t>(v.AsList().size());
    case Value::Type::kDict: return static_cast<int64_t>(v.AsDict().items.size());
    default: return Error("object of type '" + v.TypeName() + "' has no len()");
  }
}
std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Attribute lookup for map/selectattr/sort(attribute=...): dotted paths.
Value Attribute(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = GetItem(cur, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

Value CaseKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.IsString()) return Value(MapCase(v.AsString(), false));
  return v;
}

StatusOr<std::vector<Value>> SortedItems(const Value& input, bool reverse, bool case_sensitive,
                                         const Value* attribute) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, input.Items());
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : items) {
    Value key = attribute != nullptr && attribute->IsString() ? Attribute(item, attribute->AsString()) : item;
    keyed.emplace_back(CaseKey(key, case_sensitive), std::move(item));
  }
  Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    auto c = CompareValues(a.first, b.first);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  if (!error.ok()) return error;
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

StatusOr<Value> PyRound(const Value& v, int64_t precision) {
  if (!v.IsNumber()) return Error("round: not a number");
  if (precision < 0 || precision > 30) return Error("round: bad precision");
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), v.AsDouble());
  return Value(std::strtod(buf, nullptr));
}
bool BoolArg(const Value* v, bool fallback) { return v == nullptr ? fallback : v->Truthy(); }

}  // namespace

StatusOr<bool> ApplyTest(BuiltinContext& ctx, const std::string& name, const Value& v, CallArgs& args) {
  const Value* a0 = args.Get(0, "");
  using T = Value::Type;
  if (name == "defined") return !v.IsUndefined();
  if (name == "undefined") return v.IsUndefined();
  if (name == "none") return v.IsNone();
  if (name == "boolean") return v.type() == T::kBool;
  if (name == "true") return v.type() == T::kBool && v.AsBool();
  if (name == "false") return v.type() == T::kBool && !v.AsBool();
  if (name == "integer") return v.type() == T::kInt;
  if (name == "float") return v.type() == T::kFloat;
  if (name == "number") return v.IsNumber();
  if (name == "string") return v.IsString();
  if (name == "mapping") return v.IsDict() && !v.IsNamespace();
  if (name == "iterable") return v.IsString() || v.IsList() || (v.IsDict() && !v.IsNamespace()) || v.IsUndefined();
  if (name == "sequence") return v.IsString() || v.IsList() || (v.IsDict() && !v.IsNamespace());
  if (name == "callable") return v.IsCallable();
  if (name == "odd" || name == "even") {
    if (v.type() != T::kInt) return Error("odd/even test needs an integer");
    return (v.AsInt() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    if (a0 == nullptr || !v.IsNumber() || !a0->IsNumber() || a0->AsInt() == 0) return Error("bad divisibleby");
    return v.AsInt() % a0->AsInt() == 0;
  }
  if (name == "lower" || name == "upper") {
    if (!v.IsString()) return false;
    CallArgs none;
    TANDEM_ASSIGN_OR_RETURN(Value r, StringMethod(v, name == "lower" ? "islower" : "isupper", none));
    return r.AsBool();
  }
  if (a0 == nullptr) return Error("test '" + name + "' needs an argument, or is unknown");
  if (name == "eq" || name == "equalto" || name == "==") return ValuesEqual(v, *a0);
  if (name == "ne" || name == "!=") return !ValuesEqual(v, *a0);
  if (name == "sameas") return ValuesEqual(v, *a0) && v.type() == a0->type();
  if (name == "in") {
    CallArgs unused;
    if (a0->IsString()) return v.IsString() && a0->AsString().find(v.AsString()) != std::string::npos;
    TANDEM_ASSIGN_OR_RETURN(auto items, a0->Items());
    for (const auto& item : items) {
      if (ValuesEqual(item, v)) return true;
    }
    return false;
  }
  if (name == "lt" || name == "<" || name == "lessthan" || name == "le" || name == "<=" || name == "gt" ||
      name == ">" || name == "greaterthan" || name == "ge" || name == ">=") {
    TANDEM_ASSIGN_OR_RETURN(int c, CompareValues(v, *a0));
    if (name == "lt" || name == "<" || name == "lessthan") return c < 0;
    if (name == "le" || name == "<=") return c <= 0;
    if (name == "gt" || name == ">" || name == "greaterthan") return c > 0;
    return c >= 0;
  }
  (void)ctx;
  return Error("no test named '" + name + "'");
}

StatusOr<Value> ApplyFilter(BuiltinContext& ctx, const std::string& name, const Value& v, CallArgs& args) {
  const Value* a0 = args.Get(0, "");
  if (name == "safe") return v;
  if (name == "string") return Value(v.Str());
  if (name == "upper") return Value(MapCase(v.Str(), true));
  if (name == "lower") return Value(MapCase(v.Str(), false));
  if (name == "capitalize") return Value(Capitalize(v.Str()));
  if (name == "title") return Value(Title(v.Str()));
  if (name == "trim") return Value(PyStrip(v.Str(), args.Get(0, "chars"), true, true));
  if (name == "escape" || name == "e") return Value(HtmlEscape(v.Str()));
  if (name == "length" || name == "count") {
    TANDEM_ASSIGN_OR_RETURN(int64_t n, Length(v));
    return Value(n);
  }
  if (name == "default" || name == "d") {
    const Value fallback = args.Get(0, "default_value") ? *args.Get(0, "default_value") : Value("");
    const bool boolean = BoolArg(args.Get(1, "boolean"), false);
    if (v.IsUndefined() || (boolean && !v.Truthy())) return fallback;
    return v;
  }
  if (name == "tojson") {
    TANDEM_ASSIGN_OR_RETURN(int64_t indent, IntArg(args.Get(0, "indent"), -1));
    if (indent > 64) return Error("tojson: indent too large");
    TANDEM_ASSIGN_OR_RETURN(std::string json, v.ToJson(static_cast<int>(indent)));
    return Value(std::move(json));
  }
  if (name == "items") {
    if (v.IsUndefined()) return Value::List({});
    if (!v.IsDict()) return Error("items filter needs a mapping");
    CallArgs none;
    return DictMethod(v, "items", none);
  }
  if (name == "dictsort") {
    if (!v.IsDict()) return Error("dictsort needs a mapping");
    CallArgs none;
    TANDEM_ASSIGN_OR_RETURN(Value items, DictMethod(v, "items", none));
    std::vector<std::pair<Value, Value>> keyed;
    const bool by_value = args.Get(1, "by") && args.Get(1, "by")->Str() == "value";
    for (const auto& pair : items.AsList()) {
      keyed.emplace_back(CaseKey(pair.AsList()[by_value ? 1 : 0], BoolArg(args.Get(0, "case_sensitive"), false)), pair);
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
      auto c = CompareValues(a.first, b.first);
      return c.ok() && *c < 0;
    });
    const bool reverse = BoolArg(args.Get(2, "reverse"), false);
    if (reverse) std::reverse(keyed.begin(), keyed.end());
    std::vector<Value> out;
    for (auto& [k, p] : keyed) out.push_back(p);
    return Value::List(std::move(out));
  }
  if (name == "list") {
    TANDEM_ASSIGN_OR_RETURN(auto items, v.Items());
    return Value::List(std::move(items));
  }
  if (name == "first" || name == "last") {
    TANDEM_ASSIGN_OR_RETURN(auto items, v.Items());
    if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.IsString()) {
      std::u32string u = ToU32(v.AsString());
      std::reverse(u.begin(), u.end());
      return Value(FromU32(u));
    }
    TANDEM_ASSIGN_OR_RETURN(auto items, v.Items());
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (name == "join") {
    TANDEM_ASSIGN_OR_RETURN(auto items, v.Items());
    const std::string sep = a0 ? a0->Str() : "";
    const Value* attribute = args.Get(1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += sep;
      out += (attribute ? Attribute(items[i], attribute->Str()) : items[i]).Str();
    }
    return Value(std::move(out));
  }
  if (name == "replace") {
    const Value* b = args.Get(1, "new");
    if (a0 == nullptr || b == nullptr) return Error("replace needs two arguments");
    TANDEM_ASSIGN_OR_RETURN(int64_t count, IntArg(args.Get(2, "count"), -1));
    return Value(PyReplace(v.Str(), a0->Str(), b->Str(), count));
  }
  if (name == "int") {
    if (v.IsNumber()) return Value(static_cast<int64_t>(v.AsInt()));
    if (v.IsString()) {
      const std::string s = PyStrip(v.AsString(), nullptr, true, true);
      char* end = nullptr;
      const long long r = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end != nullptr && *end == '\0') return Value(static_cast<int64_t>(r));
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end != nullptr && *end == '\0') return Value(static_cast<int64_t>(d));
    }
    return a0 ? *a0 : Value(int64_t{0});
  }
  if (name == "float") {
    if (v.IsNumber()) return Value(v.AsDouble());
    if (v.IsString()) {
      const std::string s = PyStrip(v.AsString(), nullptr, true, true);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end != nullptr && *end == '\0') return Value(d);
    }
    return a0 ? *a0 : Value(0.0);
  }
  if (name == "abs") {
    if (v.type() == Value::Type::kFloat) return Value(std::fabs(v.AsDouble()));
    if (v.IsNumber()) return Value(static_cast<int64_t>(std::llabs(v.AsInt())));
    return Error("bad operand type for abs()");
  }
  if (name == "round") {
    TANDEM_ASSIGN_OR_RETURN(int64_t precision, IntArg(args.Get(0, "precision"), 0));
    return PyRound(v, precision);
  }
  if (name == "sum") {
    TANDEM_ASSIGN_OR_RETURN(auto items, v.Items());
    Value total = args.Get(1, "start") ? *args.Get(1, "start") : Value(int64_t{0});
    const Value* attribute = args.Get(0, "attribute");
    for (const auto& item : items) {
      const Value x = attribute ? Attribute(item, attribute->Str()) : item;
      if (!x.IsNumber() || !total.IsNumber()) return Error("sum: unsupported operand");
      if (x.type() == Value::Type::kFloat || total.type() == Value::Type::kFloat) {
        total = Value(total.AsDouble() + x.AsDouble());
      } else {
        total = Value(static_cast<int64_t>(total.AsInt() + x.AsInt()));
      }
    }
    return total;
  }
  if (name == "sort" || name == "max" || name == "min" || name == "unique") {
    const bool case_sensitive = BoolArg(args.Get(name == "sort" ? 1 : 0, "case_sensitive"), false);
    const Value* attribute = args.Get(name == "sort" ? 2 : 1, "attribute");
    if (name == "unique") {
      TANDEM_ASSIGN_OR_RETURN(auto items, v.Items());
      std::vector<Value> out, seen;
      for (const auto& item : items) {
        const Value key = CaseKey(attribute ? Attribute(item, attribute->Str()) : item, case_sensitive);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return ValuesEqual(s, key); })) {
          seen.push_back(key);
          out.push_back(item);
        }
      }
      return Value::List(std::move(out));
    }
    const bool reverse = name == "sort" && BoolArg(args.Get(0, "reverse"), false);
    TANDEM_ASSIGN_OR_RETURN(auto sorted, SortedItems(v, reverse, case_sensitive, attribute));
    if (name == "sort") return Value::List(std::move(sorted));
    if (sorted.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
    return name == "min" ? sorted.front() : sorted.back();
  }
  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    TANDEM_ASSIGN_OR_RETURN(auto items, v.Items());
    std::vector<Value> out;
    if (name == "map") {
      const Value* attribute = args.Get(99, "attribute");
      if (attribute != nullptr) {
        const Value* fallback = args.Get(99, "default");
        for (const auto& item : items) {
          Value x = Attribute(item, attribute->Str());
          out.push_back(x.IsUndefined() && fallback ? *fallback : x);
        }
        return Value::List(std::move(out));
      }
      if (a0 == nullptr || !a0->IsString()) return Error("map needs a filter name or attribute=");
      CallArgs rest;
      rest.positional.assign(args.positional.begin() + 1, args.positional.end());
      rest.keyword = args.keyword;
      for (const auto& item : items) {
        TANDEM_ASSIGN_OR_RETURN(Value x, ctx.CallFilter(a0->AsString(), item, rest));
        out.push_back(std::move(x));
      }
      return Value::List(std::move(out));
    }
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool want = name == "select" || name == "selectattr";
    size_t next = 0;
    std::string attr;
    if (by_attr) {
      if (a0 == nullptr) return Error(name + " needs an attribute name");
      attr = a0->Str();
      next = 1;
    }
    const Value* test = args.Get(next, "");
    CallArgs rest;
    if (args.positional.size() > next + 1) {
      rest.positional.assign(args.positional.begin() + next + 1, args.positional.end());
    }
    for (const auto& item : items) {
      const Value x = by_attr ? Attribute(item, attr) : item;
      bool ok;
      if (test == nullptr) {
        ok = x.Truthy();
      } else {
        TANDEM_ASSIGN_OR_RETURN(ok, ctx.CallTest(test->Str(), x, rest));
      }
      if (ok == want) out.push_back(item);
    }
    return Value::List(std::move(out));
  }
  if (name == "attr") {
    if (a0 == nullptr) return Error("attr needs a name");
    return GetItem(v, Value(a0->Str()));
  }
  if (name == "indent") {
    const Value* width = args.Get(0, "width");
    const std::string pad =
        width == nullptr
            ? "    "
            : (width->IsString() ? width->AsString() : std::string(std::clamp<int64_t>(width->AsInt(), 0, 256), ' '));
    const bool first = BoolArg(args.Get(1, "first"), false);
    const bool blank = BoolArg(args.Get(2, "blank"), false);
    CallArgs none;
    TANDEM_ASSIGN_OR_RETURN(Value lines_v, StringMethod(Value(v.Str() + "\n"), "splitlines", none));
    const auto& lines = lines_v.AsList();
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i].AsString();
      if (i > 0) out += "\n";
      if (i > 0 && (blank || !line.empty())) out += pad;
      out += line;
    }
    return Value(first ? pad + out : out);
  }
  if (name == "truncate") {
    TANDEM_ASSIGN_OR_RETURN(int64_t length, IntArg(args.Get(0, "length"), 255));
    const bool killwords = BoolArg(args.Get(1, "killwords"), false);
    const std::string end = args.Get(2, "end") ? args.Get(2, "end")->Str() : "...";
    TANDEM_ASSIGN_OR_RETURN(int64_t leeway, IntArg(args.Get(3, "leeway"), 5));
    const std::u32string s = ToU32(v.Str());
    const int64_t end_len = CodePointLength(end);
    if (static_cast<int64_t>(s.size()) <= length + leeway) return Value(v.Str());
    if (length < end_len) return Error("truncate: length is shorter than the end marker");
    std::u32string cut = s.substr(0, length - end_len);
    if (killwords) return Value(FromU32(cut) + end);
    const size_t space = cut.rfind(U' ');
    if (space != std::u32string::npos) cut = cut.substr(0, space);
    return Value(FromU32(cut) + end);
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(PySplit(v.Str(), nullptr, -1).size()));
  if (name == "center") {
    TANDEM_ASSIGN_OR_RETURN(int64_t width, IntArg(args.Get(0, "width"), 80));
    const std::string s = v.Str();
    const int64_t len = CodePointLength(s);
    if (width <= len || width > 4096) return Value(s);
    const int64_t total = width - len, left = total / 2 + (total & width & 1);
    return Value(std::string(left, ' ') + s + std::string(total - left, ' '));
  }
  return Error("no filter named '" + name + "'");
}

ValueDict MakeGlobals() {
  ValueDict g;
  g.Set("range", Value::Callable("range", [](CallArgs& args) -> StatusOr<Value> {
          int64_t start = 0, stop = 0, step = 1;
          for (const auto& a : args.positional) {
            if (a.type() != Value::Type::kInt && a.type() != Value::Type::kBool) return Error("range() needs integers");
          }
          if (args.positional.size() == 1) {
            stop = args.positional[0].AsInt();
          } else if (args.positional.size() >= 2) {
            start = args.positional[0].AsInt();
            stop = args.positional[1].AsInt();
            if (args.positional.size() >= 3) step = args.positional[2].AsInt();
          } else {
            return Error("range expected at least 1 argument");
          }
          if (step == 0) return Error("range() arg 3 must not be zero");
          std::vector<Value> out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.size() >= 100000) return Error("range too large");
            out.emplace_back(i);
          }
          return Value::List(std::move(out));
        }));
  auto make_dict = [](bool ns) {
    return [ns](CallArgs& args) -> StatusOr<Value> {
      ValueDict d;
      if (!args.positional.empty() && args.positional[0].IsDict()) d = args.positional[0].AsDict();
      for (auto& [k, v] : args.keyword) d.Set(k, v);
      return Value::Dict(std::move(d), ns);
    };
  };
  g.Set("namespace", Value::Callable("namespace", make_dict(true)));
  g.Set("dict", Value::Callable("dict", make_dict(false)));
  g.Set("raise_exception", Value::Callable("raise_exception", [](CallArgs& args) -> StatusOr<Value> {
          const Value* message = args.Get(0, "message");
          // FailedPrecondition marks a deliberate raise; ChatTemplate reports its message as is.
          return FailedPreconditionError(message ? message->Str() : "raise_exception called");
        }));
  g.Set("strftime_now", Value::Callable("strftime_now", [](CallArgs& args) -> StatusOr<Value> {
          const Value* format = args.Get(0, "format");
          if (format == nullptr || !format->IsString()) return Error("strftime_now needs a format string");
          const std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[256];
          const size_t n = std::strftime(buf, sizeof(buf), format->AsString().c_str(), &tm);
          return Value(std::string(buf, n));
        }));
  return g;
}

}  // namespace tandem::tokenizer::jinja