#include "common/tokenizer/jinja_methods.h"

#include <utf8proc.h>

#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer::jinja {
namespace {

Status Error(const std::string& message) { return InvalidArgumentError(message); }

Value StringList(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  for (const auto& p : parts) items.emplace_back(p);
  return Value::List(std::move(items));
}
}  // namespace

std::string MapCase(std::string_view s, bool upper) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = NextCodePoint(s, &pos);
    AppendUtf8(static_cast<char32_t>(upper ? utf8proc_toupper(c) : utf8proc_tolower(c)), &out);
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  if (s.empty()) return "";
  size_t pos = 0;
  const char32_t first = NextCodePoint(s, &pos);
  std::string out;
  AppendUtf8(static_cast<char32_t>(utf8proc_toupper(first)), &out);
  return out + MapCase(s.substr(pos), false);
}

// Jinja's title: words start after runs of [-\s({\[<].
std::string Title(std::string_view s) {
  std::string out;
  size_t pos = 0;
  bool word_start = true;
  while (pos < s.size()) {
    const char32_t c = NextCodePoint(s, &pos);
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsUnicodeWhitespace(c);
    AppendUtf8(static_cast<char32_t>(sep ? c : (word_start ? utf8proc_toupper(c) : utf8proc_tolower(c))), &out);
    word_start = sep;
  }
  return out;
}

int64_t CodePointLength(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}
std::string PyReplace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {
    std::string out;
    int64_t done = 0;
    size_t pos = 0;
    if (count != 0) {
      out += to;
      ++done;
    }
    while (pos < s.size()) {
      const size_t start = pos;
      NextCodePoint(s, &pos);
      out.append(s, start, pos - start);
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
    }
    return out;
  }
  std::string out;
  size_t last = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, last);
    if (hit == std::string::npos) break;
    out.append(s, last, hit - last);
    out += to;
    last = hit + from.size();
    ++done;
  }
  out.append(s, last, std::string::npos);
  return out;
}

std::vector<std::string> PySplit(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep == nullptr || sep->IsNone()) {
    size_t pos = 0;
    while (pos < s.size()) {
      size_t p = pos;
      while (p < s.size()) {
        size_t q = p;
        if (!IsUnicodeWhitespace(NextCodePoint(s, &q))) break;
        p = q;
      }
      if (p >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        std::string rest = s.substr(p);
        parts.push_back(PyStrip(rest, nullptr, false, true));
        return parts;
      }
      size_t e = p;
      while (e < s.size()) {
        size_t q = e;
        if (IsUnicodeWhitespace(NextCodePoint(s, &q))) break;
        e = q;
      }
      parts.push_back(s.substr(p, e - p));
      pos = e;
    }
    return parts;
  }
  const std::string& d = sep->AsString();
  size_t last = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t hit = s.find(d, last);
    if (hit == std::string::npos) break;
    parts.push_back(s.substr(last, hit - last));
    last = hit + d.size();
  }
  parts.push_back(s.substr(last));
  return parts;
}
StatusOr<int64_t> IntArg(const Value* v, int64_t fallback) {
  if (v == nullptr || v->IsNone()) return fallback;
  if (v->type() != Value::Type::kInt && v->type() != Value::Type::kBool) return Error("expected an integer argument");
  return v->AsInt();
}

Status RequireString(const Value& v, const char* what) {
  if (v.IsString()) return Status::Ok();
  return Error(std::string(what) + ": expected a string, got " + v.TypeName());
}
StatusOr<Value> StringMethod(const Value& self, const std::string& name, CallArgs& args) {
  const std::string& s = self.AsString();
  const Value* a0 = args.Get(0, "");
  if (name == "upper") return Value(MapCase(s, true));
  if (name == "lower") return Value(MapCase(s, false));
  if (name == "title") return Value(Title(s));
  if (name == "capitalize") return Value(Capitalize(s));
  if (name == "strip") return Value(PyStrip(s, a0, true, true));
  if (name == "lstrip") return Value(PyStrip(s, a0, true, false));
  if (name == "rstrip") return Value(PyStrip(s, a0, false, true));
  if (name == "split") {
    TANDEM_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(args.Get(1, "maxsplit"), -1));
    const Value* sep = args.Get(0, "sep");
    if (sep != nullptr && !sep->IsNone()) {
      TANDEM_RETURN_IF_ERROR(RequireString(*sep, "split"));
      if (sep->AsString().empty()) return Error("empty separator");
    }
    return StringList(PySplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    std::vector<std::string> lines;
    size_t last = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        lines.push_back(s.substr(last, i - last));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        last = i + 1;
      }
    }
    if (last < s.size()) lines.push_back(s.substr(last));
    return StringList(lines);
  }
  if (name == "startswith" || name == "endswith") {
    if (a0 == nullptr) return Error(name + " needs an argument");
    std::vector<Value> options = a0->IsList() ? a0->AsList() : std::vector<Value>{*a0};
    for (const Value& o : options) {
      TANDEM_RETURN_IF_ERROR(RequireString(o, name.c_str()));
      const std::string& p = o.AsString();
      const bool hit =
          p.size() <= s.size() &&
          (name == "startswith" ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
      if (hit) return Value(true);
    }
    return Value(false);
  }
  if (name == "replace") {
    const Value* b = args.Get(1, "");
    if (a0 == nullptr || b == nullptr) return Error("replace needs two arguments");
    TANDEM_RETURN_IF_ERROR(RequireString(*a0, "replace"));
    TANDEM_RETURN_IF_ERROR(RequireString(*b, "replace"));
    TANDEM_ASSIGN_OR_RETURN(int64_t count, IntArg(args.Get(2, "count"), -1));
    return Value(PyReplace(s, a0->AsString(), b->AsString(), count));
  }
  if (name == "find" || name == "count" || name == "index" || name == "rfind") {
    if (a0 == nullptr) return Error(name + " needs an argument");
    TANDEM_RETURN_IF_ERROR(RequireString(*a0, name.c_str()));
    const std::string& sub = a0->AsString();
    if (name == "count") {
      if (sub.empty()) return Value(CodePointLength(s) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    const size_t hit = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (hit == std::string::npos) {
      if (name == "index") return Error("substring not found");
      return Value(int64_t{-1});
    }
    return Value(CodePointLength(std::string_view(s).substr(0, hit)));
  }
  if (name == "join") {
    if (a0 == nullptr) return Error("join needs an argument");
    TANDEM_ASSIGN_OR_RETURN(auto items, a0->Items());
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += s;
      TANDEM_RETURN_IF_ERROR(RequireString(items[i], "join"));
      out += items[i].AsString();
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum" || name == "islower" ||
      name == "isupper") {
    if (s.empty()) return Value(false);
    size_t pos = 0;
    bool cased = false;
    while (pos < s.size()) {
      const char32_t c = NextCodePoint(s, &pos);
      const auto cat = utf8proc_category(c);
      const bool letter = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
      const bool digit = cat == UTF8PROC_CATEGORY_ND;
      bool ok = true;
      if (name == "isdigit") ok = digit;
      if (name == "isspace") ok = IsUnicodeWhitespace(c);
      if (name == "isalpha") ok = letter;
      if (name == "isalnum") ok = letter || digit;
      if (name == "islower") {
        ok = cat != UTF8PROC_CATEGORY_LU && cat != UTF8PROC_CATEGORY_LT;
        cased = cased || cat == UTF8PROC_CATEGORY_LL;
      }
      if (name == "isupper") {
        ok = cat != UTF8PROC_CATEGORY_LL && cat != UTF8PROC_CATEGORY_LT;
        cased = cased || cat == UTF8PROC_CATEGORY_LU;
      }
      if (!ok) return Value(false);
    }
    return Value((name == "islower" || name == "isupper") ? cased : true);
  }
  return Error("'str' object has no attribute '" + name + "'");
}

StatusOr<Value> DictMethod(const Value& self, const std::string& name, CallArgs& args) {
  const ValueDict& d = self.AsDict();
  if (name == "items") {
    std::vector<Value> items;
    for (const auto& [k, v] : d.items) items.push_back(Value::List({Value(k), v}, /*tuple=*/true));
    return Value::List(std::move(items));
  }
  if (name == "keys" || name == "values") {
    std::vector<Value> items;
    for (const auto& [k, v] : d.items) items.push_back(name == "keys" ? Value(k) : v);
    return Value::List(std::move(items));
  }
  if (name == "get") {
    const Value* key = args.Get(0, "key");
    if (key == nullptr) return Error("get needs a key");
    const Value* fallback = args.Get(1, "default");
    if (key->IsString()) {
      if (const Value* hit = d.Find(key->AsString())) return *hit;
    }
    return fallback != nullptr ? *fallback : Value::None();
  }
  return Error("'dict' object has no attribute '" + name + "'");
}
std::string PyStrip(const std::string& s, const Value* chars, bool left, bool right) {
  std::u32string u = ToU32(s);
  std::u32string set;
  const bool whitespace = chars == nullptr || chars->IsNone() || !chars->IsString();
  if (!whitespace) set = ToU32(chars->AsString());
  auto strip = [&](char32_t c) { return whitespace ? IsUnicodeWhitespace(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip(u[e - 1])) --e;
  }
  return FromU32(std::u32string_view(u).substr(b, e - b));
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.IsDict()) {
    if (key.IsString()) {
      if (const Value* v = obj.AsDict().Find(key.AsString())) return *v;
      return Value::Undefined("'dict object' has no attribute '" + key.AsString() + "'");
    }
    return Value::Undefined("'dict object' has no attribute '" + key.Str() + "'");
  }
  if ((obj.IsList() || obj.IsString()) && (key.type() == Value::Type::kInt || key.type() == Value::Type::kBool)) {
    if (obj.IsList()) {
      const auto& list = obj.AsList();
      int64_t i = key.AsInt();
      if (i < 0) i += static_cast<int64_t>(list.size());
      if (i >= 0 && i < static_cast<int64_t>(list.size())) return list[i];
      return Value::Undefined(obj.TypeName() + " object has no element " + key.Str());
    }
    const std::u32string u = ToU32(obj.AsString());
    int64_t i = key.AsInt();
    if (i < 0) i += static_cast<int64_t>(u.size());
    if (i >= 0 && i < static_cast<int64_t>(u.size())) return Value(FromU32(u.substr(i, 1)));
    return Value::Undefined("'str object' has no element " + key.Str());
  }
  if (obj.IsUndefined()) return obj;
  return Value::Undefined("'" + obj.TypeName() + " object' has no attribute '" + key.Str() + "'");
}

Value GetMethod(const Value& obj, const std::string& name) {
  static const char* const kStr[] = {"upper",   "lower",   "title",      "capitalize", "strip",    "lstrip",
                                     "rstrip",  "split",   "splitlines", "startswith", "endswith", "replace",
                                     "find",    "rfind",   "count",      "index",      "join",     "isdigit",
                                     "isspace", "isalpha", "isalnum",    "islower",    "isupper"};
  static const char* const kDict[] = {"items", "keys", "values", "get"};
  if (obj.IsString()) {
    for (const char* m : kStr) {
      if (name == m) {
        return Value::Callable(name, [obj, name](CallArgs& args) { return StringMethod(obj, name, args); });
      }
    }
  } else if (obj.IsDict() && !obj.IsNamespace()) {
    for (const char* m : kDict) {
      if (name == m) {
        return Value::Callable(name, [obj, name](CallArgs& args) { return DictMethod(obj, name, args); });
      }
    }
  } else if (obj.IsList() && (name == "append" || name == "pop" || name == "extend" || name == "insert")) {
    return Value::Callable(name, [name](CallArgs&) -> StatusOr<Value> {
      return Error("access to attribute '" + name + "' of 'list' object is unsafe");
    });
  }
  return Value::Undefined("'" + obj.TypeName() + " object' has no attribute '" + name + "'");
}
}  // namespace tandem::tokenizer::jinja
