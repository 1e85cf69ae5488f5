// Syntax tree of a parsed Jinja template (built by jinja_parser, walked by
// jinja_interpreter). Immutable after parsing; thread-safe to share.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/tokenizer/jinja_value.h"

namespace tandem::tokenizer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children
    kTuple,    // children
    kDict,     // children: key0, value0, key1, value1, ...
    kGetAttr,  // children[0].name
    kGetItem,  // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]] (null = omitted)
    kCall,     // children[0](children[1:], kwargs)
    kFilter,   // name(children[0], children[1:], kwargs)
    kTest,     // children[0] is [not] name(children[1:]); negated
    kUnary,    // name in {"-", "+", "not"}
    kBinary,   // name in {"+","-","*","/","//","%","**","~","==","!=","<",">","<=",">=","in","not in"}
    kAnd,
    kOr,
    kCondExpr,  // children[1] if children[0] else children[2] (children[2] may be null)
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value literal;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue };
  Kind kind;
  int line = 0;
  std::string text;                                     // kText
  ExprPtr expr;                                         // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, NodeList>> branches;   // kIf: condition, body
  NodeList body;                                        // kFor, kSetBlock, kMacro, kIf else
  NodeList else_body;                                   // kFor else
  ExprPtr filter;                                       // kFor inline `if`
  std::vector<std::string> targets;                     // kFor/kSet targets; "ns.attr" for namespace sets
  std::string name;                                     // kMacro name
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (default may be null)
};

}  // namespace tandem::tokenizer::jinja
