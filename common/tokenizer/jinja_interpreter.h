// Renders a parsed Jinja template against a set of variables (tree-walking
// interpreter with Jinja scoping: for loops and macros get their own scope,
// `namespace()` objects carry state out of loops). Enforces output-size,
// call-depth and step limits. One render per instance; not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/tokenizer/jinja_ast.h"
#include "common/tokenizer/jinja_builtins.h"
#include "common/tokenizer/jinja_value.h"

namespace tandem::tokenizer::jinja {

struct RenderLimits {
  size_t max_output_bytes = 8u << 20;  // rendered text larger than this fails
  int max_call_depth = 64;             // macro/filter recursion depth
  int64_t max_steps = 1'000'000;       // nodes, expressions and loop iterations evaluated
};

class Interpreter : public BuiltinContext {
 public:
  explicit Interpreter(RenderLimits limits) : limits_(limits) {}

  // `variables` are the template's top-level names (messages, bos_token, ...).
  // Errors: InvalidArgument for template errors; FailedPrecondition carrying
  // the message for raise_exception.
  StatusOr<std::string> Render(const NodeList& nodes, ValueDict variables);

  StatusOr<Value> CallFilter(const std::string& name, const Value& input, CallArgs& args) override;
  StatusOr<bool> CallTest(const std::string& name, const Value& input, CallArgs& args) override;

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frames = std::vector<std::shared_ptr<ValueDict>>;

  Status Exec(const NodeList& nodes, std::string* out);
  Status ExecNode(const Node& node, std::string* out);
  Status ExecFor(const Node& node, std::string* out);
  Status ExecSet(const Node& node, Value value);
  Value DefineMacro(const Node& node);

  StatusOr<Value> Eval(const Expr& e);
  StatusOr<Value> EvalBinary(const std::string& op, const Value& a, const Value& b);
  StatusOr<Value> EvalSlice(const Expr& e);
  StatusOr<Value> EvalCall(const Expr& e);
  Status EvalArgs(const Expr& e, size_t first, CallArgs* args);
  Value Lookup(const std::string& name) const;
  Status Step();

  RenderLimits limits_;
  Frames frames_;
  Flow flow_ = Flow::kNormal;
  int call_depth_ = 0;
  int64_t steps_ = 0;
  size_t output_bytes_ = 0;
};

}  // namespace tandem::tokenizer::jinja
