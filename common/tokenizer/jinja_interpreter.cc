#include "common/tokenizer/jinja_interpreter.h"

#include <cmath>

#include "common/tokenizer/jinja_methods.h"

namespace tandem::tokenizer::jinja {
namespace {

Status Error(const Expr& e, const std::string& message) {
  return InvalidArgumentError("line " + std::to_string(e.line) + ": " + message);
}

Status UndefinedError(const Value& v, const std::string& fallback) {
  return InvalidArgumentError(v.name().empty() ? fallback : v.name());
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Status Interpreter::Step() {
  if (++steps_ > limits_.max_steps) return ResourceExhaustedError("chat template exceeded its step limit");
  return Status::Ok();
}

StatusOr<std::string> Interpreter::Render(const NodeList& nodes, ValueDict variables) {
  frames_.clear();
  frames_.push_back(std::make_shared<ValueDict>(MakeGlobals()));
  frames_.push_back(std::make_shared<ValueDict>(std::move(variables)));
  std::string out;
  TANDEM_RETURN_IF_ERROR(Exec(nodes, &out));
  return out;
}

Value Interpreter::Lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (const Value* v = (*it)->Find(name)) return *v;
  }
  return Value::Undefined("'" + name + "' is undefined");
}

Status Interpreter::Exec(const NodeList& nodes, std::string* out) {
  for (const NodePtr& node : nodes) {
    TANDEM_RETURN_IF_ERROR(ExecNode(*node, out));
    if (flow_ != Flow::kNormal) return Status::Ok();
  }
  return Status::Ok();
}

Status Interpreter::ExecNode(const Node& node, std::string* out) {
  TANDEM_RETURN_IF_ERROR(Step());
  switch (node.kind) {
    case Node::Kind::kText:
    case Node::Kind::kOutput: {
      std::string text;
      if (node.kind == Node::Kind::kText) {
        text = node.text;
      } else {
        TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*node.expr));
        text = v.Str();
      }
      output_bytes_ += text.size();
      if (output_bytes_ > limits_.max_output_bytes) {
        return ResourceExhaustedError("chat template output exceeds " + std::to_string(limits_.max_output_bytes) +
                                      " bytes");
      }
      out->append(text);
      return Status::Ok();
    }
    case Node::Kind::kIf:
      for (const auto& [cond, body] : node.branches) {
        TANDEM_ASSIGN_OR_RETURN(Value c, Eval(*cond));
        if (c.Truthy()) return Exec(body, out);
      }
      return Exec(node.body, out);
    case Node::Kind::kFor: return ExecFor(node, out);
    case Node::Kind::kSet: {
      TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*node.expr));
      return ExecSet(node, std::move(v));
    }
    case Node::Kind::kSetBlock: {
      std::string captured;
      TANDEM_RETURN_IF_ERROR(Exec(node.body, &captured));
      return ExecSet(node, Value(std::move(captured)));
    }
    case Node::Kind::kMacro: frames_.back()->Set(node.name, DefineMacro(node)); return Status::Ok();
    case Node::Kind::kBreak: flow_ = Flow::kBreak; return Status::Ok();
    case Node::Kind::kContinue: flow_ = Flow::kContinue; return Status::Ok();
  }
  return Status::Ok();
}

Status Interpreter::ExecSet(const Node& node, Value value) {
  if (node.targets.size() == 1) {
    const std::string& target = node.targets[0];
    const size_t dot = target.find('.');
    if (dot == std::string::npos) {
      frames_.back()->Set(target, std::move(value));
      return Status::Ok();
    }
    const Value ns = Lookup(target.substr(0, dot));
    if (!ns.IsNamespace()) {
      return InvalidArgumentError("line " + std::to_string(node.line) +
                                  ": cannot assign attribute on non-namespace object");
    }
    ns.AsDict().Set(target.substr(dot + 1), std::move(value));
    return Status::Ok();
  }
  TANDEM_ASSIGN_OR_RETURN(auto items, value.Items());
  if (items.size() != node.targets.size()) {
    return InvalidArgumentError("line " + std::to_string(node.line) + ": wrong number of values to unpack");
  }
  for (size_t i = 0; i < items.size(); ++i) frames_.back()->Set(node.targets[i], items[i]);
  return Status::Ok();
}

Status Interpreter::ExecFor(const Node& node, std::string* out) {
  TANDEM_ASSIGN_OR_RETURN(Value iterable, Eval(*node.expr));
  if (iterable.IsDict() && iterable.IsNamespace()) return InvalidArgumentError("namespace is not iterable");
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> all, iterable.Items());
  frames_.push_back(std::make_shared<ValueDict>());
  auto bind = [&](const Value& item) -> Status {
    if (node.targets.size() == 1) {
      frames_.back()->Set(node.targets[0], item);
      return Status::Ok();
    }
    TANDEM_ASSIGN_OR_RETURN(auto parts, item.Items());
    if (parts.size() != node.targets.size()) return InvalidArgumentError("for: wrong number of values to unpack");
    for (size_t i = 0; i < parts.size(); ++i) frames_.back()->Set(node.targets[i], parts[i]);
    return Status::Ok();
  };
  std::vector<Value> items;
  if (node.filter) {
    for (const Value& item : all) {
      TANDEM_RETURN_IF_ERROR(bind(item));
      TANDEM_ASSIGN_OR_RETURN(Value keep, Eval(*node.filter));
      if (keep.Truthy()) items.push_back(item);
    }
  } else {
    items = std::move(all);
  }
  Status status;
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n && status.ok(); ++i) {
    status = Step();
    if (!status.ok()) break;
    ValueDict loop;
    loop.Set("index", Value(i + 1));
    loop.Set("index0", Value(i));
    loop.Set("revindex", Value(n - i));
    loop.Set("revindex0", Value(n - i - 1));
    loop.Set("first", Value(i == 0));
    loop.Set("last", Value(i == n - 1));
    loop.Set("length", Value(n));
    loop.Set("depth", Value(int64_t{1}));
    loop.Set("depth0", Value(int64_t{0}));
    loop.Set("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    loop.Set("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
    loop.Set("cycle", Value::Callable("cycle", [i](CallArgs& args) -> StatusOr<Value> {
               if (args.positional.empty()) return InvalidArgumentError("no items for cycling given");
               return args.positional[i % args.positional.size()];
             }));
    frames_.back()->Set("loop", Value::Dict(std::move(loop)));
    status = bind(items[i]);
    if (status.ok()) status = Exec(node.body, out);
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  frames_.pop_back();
  TANDEM_RETURN_IF_ERROR(status);
  if (items.empty()) return Exec(node.else_body, out);
  return Status::Ok();
}

Value Interpreter::DefineMacro(const Node& node) {
  // Weak references: the macro lives in one of these frames, and a strong
  // capture would make a cycle that outlives the render.
  std::vector<std::weak_ptr<ValueDict>> captured(frames_.begin(), frames_.end());
  const Node* def = &node;
  return Value::Callable(node.name, [this, captured, def](CallArgs& args) -> StatusOr<Value> {
    if (++call_depth_ > limits_.max_call_depth) {
      --call_depth_;
      return ResourceExhaustedError("chat template macro recursion too deep");
    }
    auto frame = std::make_shared<ValueDict>();
    std::vector<Value> extra;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < def->params.size()) {
        frame->Set(def->params[i].first, args.positional[i]);
      } else {
        extra.push_back(args.positional[i]);
      }
    }
    ValueDict extra_kw;
    for (const auto& [k, v] : args.keyword) {
      bool known = false;
      for (const auto& p : def->params) known = known || p.first == k;
      if (known) {
        frame->Set(k, v);
      } else {
        extra_kw.Set(k, v);
      }
    }
    Frames saved = std::move(frames_);
    frames_.clear();
    for (const auto& weak : captured) {
      if (auto strong = weak.lock()) frames_.push_back(std::move(strong));
    }
    frames_.push_back(frame);
    Status status;
    for (const auto& [param, default_expr] : def->params) {
      if (frame->Find(param) != nullptr) continue;
      if (default_expr) {
        auto v = Eval(*default_expr);
        if (!v.ok()) {
          status = v.status();
          break;
        }
        frame->Set(param, *v);
      } else {
        frame->Set(param, Value::Undefined("'" + param + "' is undefined"));
      }
    }
    frame->Set("varargs", Value::List(std::move(extra)));
    frame->Set("kwargs", Value::Dict(std::move(extra_kw)));
    std::string out;
    if (status.ok()) status = Exec(def->body, &out);
    flow_ = Flow::kNormal;
    frames_ = std::move(saved);
    --call_depth_;
    if (!status.ok()) return status;
    return Value(std::move(out));
  });
}

Status Interpreter::EvalArgs(const Expr& e, size_t first, CallArgs* args) {
  for (size_t i = first; i < e.children.size(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i]));
    args->positional.push_back(std::move(v));
  }
  for (const auto& [k, expr] : e.kwargs) {
    TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*expr));
    args->keyword.emplace_back(k, std::move(v));
  }
  return Status::Ok();
}

StatusOr<Value> Interpreter::CallFilter(const std::string& name, const Value& input, CallArgs& args) {
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    return ResourceExhaustedError("chat template filter recursion too deep");
  }
  auto r = ApplyFilter(*this, name, input, args);
  --call_depth_;
  return r;
}

StatusOr<bool> Interpreter::CallTest(const std::string& name, const Value& input, CallArgs& args) {
  return ApplyTest(*this, name, input, args);
}

StatusOr<Value> Interpreter::EvalCall(const Expr& e) {
  const Expr& callee = *e.children[0];
  TANDEM_ASSIGN_OR_RETURN(Value fn, Eval(callee));
  if (fn.IsUndefined()) return UndefinedError(fn, "call of an undefined value");
  if (!fn.IsCallable()) return Error(e, "'" + fn.TypeName() + "' object is not callable");
  CallArgs args;
  TANDEM_RETURN_IF_ERROR(EvalArgs(e, 1, &args));
  return fn.AsFunction()(args);
}

StatusOr<Value> Interpreter::EvalSlice(const Expr& e) {
  TANDEM_ASSIGN_OR_RETURN(Value target, Eval(*e.children[0]));
  int64_t bounds[3] = {0, 0, 1};
  bool given[3] = {false, false, false};
  for (int i = 0; i < 3; ++i) {
    if (!e.children[i + 1]) continue;
    TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1]));
    if (v.IsNone()) continue;
    if (v.type() != Value::Type::kInt && v.type() != Value::Type::kBool)
      return Error(e, "slice indices must be integers");
    bounds[i] = v.AsInt();
    given[i] = true;
  }
  const int64_t step = bounds[2];
  if (step == 0) return Error(e, "slice step cannot be zero");
  std::vector<Value> items;
  std::u32string chars;
  if (target.IsString()) {
    chars = ToU32(target.AsString());
  } else if (target.IsList()) {
    items = target.AsList();
  } else {
    return Error(e, "'" + target.TypeName() + "' object is not subscriptable");
  }
  const int64_t len = target.IsString() ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(items.size());
  auto clamp = [&](int64_t v, bool is_given, int64_t def) {
    if (!is_given) return def;
    if (v < 0) v += len;
    if (step > 0) return std::clamp<int64_t>(v, 0, len);
    return std::clamp<int64_t>(v, -1, len - 1);
  };
  const int64_t start = clamp(bounds[0], given[0], step > 0 ? 0 : len - 1);
  const int64_t stop = clamp(bounds[1], given[1], step > 0 ? len : -1);
  std::vector<Value> out_items;
  std::u32string out_chars;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (target.IsString()) {
      out_chars.push_back(chars[i]);
    } else {
      out_items.push_back(items[i]);
    }
  }
  if (target.IsString()) return Value(FromU32(out_chars));
  return Value::List(std::move(out_items), target.IsTuple());
}

StatusOr<Value> Interpreter::EvalBinary(const std::string& op, const Value& a, const Value& b) {
  using T = Value::Type;
  if (op == "==") return Value(ValuesEqual(a, b));
  if (op == "!=") return Value(!ValuesEqual(a, b));
  if (op == "~") return Value(a.Str() + b.Str());
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.IsString()) {
      if (!a.IsString())
        return InvalidArgumentError("'in <string>' requires string as left operand, not " + a.TypeName());
      found = b.AsString().find(a.AsString()) != std::string::npos;
    } else if (b.IsDict()) {
      found = a.IsString() && b.AsDict().Find(a.AsString()) != nullptr;
    } else if (b.IsList() || b.IsUndefined()) {
      TANDEM_ASSIGN_OR_RETURN(auto items, b.Items());
      for (const auto& item : items) found = found || ValuesEqual(item, a);
    } else {
      return InvalidArgumentError("argument of type '" + b.TypeName() + "' is not iterable");
    }
    return Value(op == "in" ? found : !found);
  }
  if (a.IsUndefined()) return UndefinedError(a, "undefined value in '" + op + "'");
  if (b.IsUndefined()) return UndefinedError(b, "undefined value in '" + op + "'");
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    TANDEM_ASSIGN_OR_RETURN(int c, CompareValues(a, b));
    if (op == "<") return Value(c < 0);
    if (op == ">") return Value(c > 0);
    if (op == "<=") return Value(c <= 0);
    return Value(c >= 0);
  }
  const bool numbers = a.IsNumber() && b.IsNumber();
  const bool floats = numbers && (a.type() == T::kFloat || b.type() == T::kFloat);
  if (op == "+") {
    if (numbers)
      return floats ? Value(a.AsDouble() + b.AsDouble()) : Value(static_cast<int64_t>(a.AsInt() + b.AsInt()));
    if (a.IsString() && b.IsString()) return Value(a.AsString() + b.AsString());
    if (a.IsList() && b.IsList()) {
      std::vector<Value> items = a.AsList();
      items.insert(items.end(), b.AsList().begin(), b.AsList().end());
      return Value::List(std::move(items), a.IsTuple());
    }
  } else if (op == "-") {
    if (numbers)
      return floats ? Value(a.AsDouble() - b.AsDouble()) : Value(static_cast<int64_t>(a.AsInt() - b.AsInt()));
  } else if (op == "*") {
    if (numbers)
      return floats ? Value(a.AsDouble() * b.AsDouble()) : Value(static_cast<int64_t>(a.AsInt() * b.AsInt()));
    const Value* seq = a.IsString() || a.IsList() ? &a : (b.IsString() || b.IsList() ? &b : nullptr);
    const Value* count = seq == &a ? &b : &a;
    if (seq != nullptr && (count->type() == T::kInt || count->type() == T::kBool)) {
      const int64_t n = std::max<int64_t>(0, count->AsInt());
      const size_t unit = seq->IsString() ? seq->AsString().size() : seq->AsList().size();
      if (unit * static_cast<size_t>(n) > limits_.max_output_bytes)
        return ResourceExhaustedError("repetition too large");
      if (seq->IsString()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq->AsString();
        return Value(std::move(out));
      }
      std::vector<Value> out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->AsList().begin(), seq->AsList().end());
      return Value::List(std::move(out));
    }
  } else if (op == "/") {
    if (numbers) {
      if (b.AsDouble() == 0) return InvalidArgumentError("division by zero");
      return Value(a.AsDouble() / b.AsDouble());
    }
  } else if (op == "//" || op == "%") {
    if (numbers) {
      if (b.AsDouble() == 0) return InvalidArgumentError("integer division or modulo by zero");
      if (floats) {
        const double q = std::floor(a.AsDouble() / b.AsDouble());
        return op == "//" ? Value(q) : Value(a.AsDouble() - q * b.AsDouble());
      }
      const int64_t q = FloorDiv(a.AsInt(), b.AsInt());
      return op == "//" ? Value(q) : Value(static_cast<int64_t>(a.AsInt() - q * b.AsInt()));
    }
  } else if (op == "**") {
    if (numbers) {
      if (!floats && b.AsInt() >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < b.AsInt() && i < 64; ++i) r *= a.AsInt();
        return Value(r);
      }
      return Value(std::pow(a.AsDouble(), b.AsDouble()));
    }
  }
  return InvalidArgumentError("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" +
                              b.TypeName() + "'");
}

StatusOr<Value> Interpreter::Eval(const Expr& e) {
  TANDEM_RETURN_IF_ERROR(Step());
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.literal;
    case Expr::Kind::kName: return Lookup(e.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      for (const auto& child : e.children) {
        TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*child));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      ValueDict d;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        TANDEM_ASSIGN_OR_RETURN(Value k, Eval(*e.children[i]));
        TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1]));
        if (!k.IsString()) return Error(e, "dict keys must be strings");
        d.Set(k.AsString(), std::move(v));
      }
      return Value::Dict(std::move(d));
    }
    case Expr::Kind::kGetAttr: {
      TANDEM_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
      if (obj.IsUndefined()) return UndefinedError(obj, "'" + e.name + "' of an undefined value");
      Value method = GetMethod(obj, e.name);
      if (!method.IsUndefined()) return method;
      const bool numeric = !e.name.empty() && std::isdigit(static_cast<unsigned char>(e.name[0]));
      return GetItem(obj, numeric ? Value(static_cast<int64_t>(std::stoll(e.name))) : Value(e.name));
    }
    case Expr::Kind::kGetItem: {
      TANDEM_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
      TANDEM_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1]));
      if (obj.IsUndefined()) return UndefinedError(obj, "subscript of an undefined value");
      Value item = GetItem(obj, key);
      if (item.IsUndefined() && key.IsString() && !obj.IsDict()) return GetMethod(obj, key.AsString());
      return item;
    }
    case Expr::Kind::kSlice: return EvalSlice(e);
    case Expr::Kind::kCall: return EvalCall(e);
    case Expr::Kind::kFilter: {
      TANDEM_ASSIGN_OR_RETURN(Value input, Eval(*e.children[0]));
      CallArgs args;
      TANDEM_RETURN_IF_ERROR(EvalArgs(e, 1, &args));
      return CallFilter(e.name, input, args);
    }
    case Expr::Kind::kTest: {
      TANDEM_ASSIGN_OR_RETURN(Value input, Eval(*e.children[0]));
      CallArgs args;
      TANDEM_RETURN_IF_ERROR(EvalArgs(e, 1, &args));
      TANDEM_ASSIGN_OR_RETURN(bool r, CallTest(e.name, input, args));
      return Value(e.negated ? !r : r);
    }
    case Expr::Kind::kUnary: {
      TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
      if (e.name == "not") return Value(!v.Truthy());
      if (!v.IsNumber()) return Error(e, "bad operand type for unary " + e.name + ": '" + v.TypeName() + "'");
      if (e.name == "+") return v.type() == Value::Type::kBool ? Value(v.AsInt()) : v;
      return v.type() == Value::Type::kFloat ? Value(-v.AsDouble()) : Value(static_cast<int64_t>(-v.AsInt()));
    }
    case Expr::Kind::kBinary: {
      TANDEM_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0]));
      TANDEM_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1]));
      auto r = EvalBinary(e.name, a, b);
      if (!r.ok() && r.status().code() == StatusCode::kInvalidArgument)
        return r.status().WithContext("line " + std::to_string(e.line));
      return r;
    }
    case Expr::Kind::kAnd: {
      TANDEM_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0]));
      if (!a.Truthy()) return a;
      return Eval(*e.children[1]);
    }
    case Expr::Kind::kOr: {
      TANDEM_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0]));
      if (a.Truthy()) return a;
      return Eval(*e.children[1]);
    }
    case Expr::Kind::kCondExpr: {
      TANDEM_ASSIGN_OR_RETURN(Value c, Eval(*e.children[0]));
      if (c.Truthy()) return Eval(*e.children[1]);
      if (e.children[2]) return Eval(*e.children[2]);
      return Value::Undefined("the inline if-expression evaluated to false and no else section was defined");
    }
  }
  return Error(e, "unknown expression");
}

}  // namespace tandem::tokenizer::jinja
