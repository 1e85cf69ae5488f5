#include "common/tokenizer/jinja_parser.h"

#include <cstdlib>
#include <set>

#include "common/tokenizer/jinja_lexer.h"

namespace tandem::tokenizer::jinja {
namespace {

using TokKind = ExprToken::Kind;

class ExprParser {
 public:
  ExprParser(std::vector<ExprToken> tokens, int depth) : tokens_(std::move(tokens)), depth_(depth) {}

  const ExprToken& Peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool AtEnd() const { return Peek().kind == TokKind::kEnd; }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == TokKind::kOp && Peek(ahead).text == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).kind == TokKind::kName && Peek(ahead).text == name;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    ++pos_;
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    ++pos_;
    return true;
  }
  Status Error(const std::string& message) const {
    return InvalidArgumentError("template syntax error, line " + std::to_string(Peek().line) + ": " + message);
  }
  Status ExpectOp(std::string_view op) {
    if (SkipOp(op)) return Status::Ok();
    return Error("expected '" + std::string(op) + "', got '" + Peek().text + "'");
  }
  StatusOr<std::string> ExpectName() {
    if (Peek().kind != TokKind::kName) return Error("expected a name, got '" + Peek().text + "'");
    return tokens_[pos_++].text;
  }
  Status ExpectEnd() {
    if (AtEnd()) return Status::Ok();
    return Error("unexpected '" + Peek().text + "'");
  }

  StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true) {
    if (++depth_ > kMaxNestingDepth) return Error("expression nested too deeply");
    auto result = with_condexpr ? ParseCondExpr() : ParseOr();
    --depth_;
    return result;
  }

  // `a, b` without parentheses becomes a tuple (set values, for iterables).
  StatusOr<ExprPtr> ParseTupleOrExpression(bool with_condexpr = true) {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_condexpr));
    if (!IsOp(",")) return first;
    auto tuple = Make(Expr::Kind::kTuple);
    tuple->children.push_back(std::move(first));
    while (SkipOp(",")) {
      if (AtEnd() || IsName("if")) break;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr next, ParseExpression(with_condexpr));
      tuple->children.push_back(std::move(next));
    }
    return tuple;
  }

  ExprPtr Make(Expr::Kind kind, std::string name = "") const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = Peek().line;
    e->name = std::move(name);
    return e;
  }

 private:
  ExprPtr Binary(Expr::Kind kind, std::string op, ExprPtr a, ExprPtr b) const {
    auto e = Make(kind, std::move(op));
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  StatusOr<ExprPtr> ParseCondExpr() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (SkipName("if")) {
      auto cond = Make(Expr::Kind::kCondExpr);
      TANDEM_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
      ExprPtr otherwise;
      if (SkipName("else")) {
        TANDEM_ASSIGN_OR_RETURN(otherwise, ParseExpression());
      }
      cond->children.push_back(std::move(test));
      cond->children.push_back(std::move(expr));
      cond->children.push_back(std::move(otherwise));
      expr = std::move(cond);
    }
    return expr;
  }
  StatusOr<ExprPtr> ParseOr() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (SkipName("or")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      left = Binary(Expr::Kind::kOr, "or", std::move(left), std::move(right));
    }
    return left;
  }
  StatusOr<ExprPtr> ParseAnd() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (SkipName("and")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      left = Binary(Expr::Kind::kAnd, "and", std::move(left), std::move(right));
    }
    return left;
  }
  StatusOr<ExprPtr> ParseNot() {
    if (SkipName("not")) {
      if (++depth_ > kMaxNestingDepth) return Error("expression nested too deeply");
      auto e = Make(Expr::Kind::kUnary, "not");
      TANDEM_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      --depth_;
      e->children.push_back(std::move(operand));
      return e;
    }
    return ParseCompare();
  }
  StatusOr<ExprPtr> ParseCompare() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseMath1());
    while (true) {
      std::string op;
      if (Peek().kind == TokKind::kOp && (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" ||
                                          Peek().text == ">" || Peek().text == "<=" || Peek().text == ">=")) {
        op = tokens_[pos_++].text;
      } else if (SkipName("in")) {
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        pos_ += 2;
        op = "not in";
      } else {
        break;
      }
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
      left = Binary(Expr::Kind::kBinary, op, std::move(left), std::move(right));
    }
    return left;
  }
  StatusOr<ExprPtr> ParseMath1() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const std::string op = tokens_[pos_++].text;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      left = Binary(Expr::Kind::kBinary, op, std::move(left), std::move(right));
    }
    return left;
  }
  StatusOr<ExprPtr> ParseConcat() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
    while (SkipOp("~")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
      left = Binary(Expr::Kind::kBinary, "~", std::move(left), std::move(right));
    }
    return left;
  }
  StatusOr<ExprPtr> ParseMath2() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = tokens_[pos_++].text;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      left = Binary(Expr::Kind::kBinary, op, std::move(left), std::move(right));
    }
    return left;
  }
  StatusOr<ExprPtr> ParsePow() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (SkipOp("**")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      left = Binary(Expr::Kind::kBinary, "**", std::move(left), std::move(right));
    }
    return left;
  }
  StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    if (++depth_ > kMaxNestingDepth) return Error("expression nested too deeply");
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      auto e = Make(Expr::Kind::kUnary, tokens_[pos_++].text);
      TANDEM_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      e->children.push_back(std::move(operand));
      node = std::move(e);
    } else {
      TANDEM_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    TANDEM_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      TANDEM_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    --depth_;
    return node;
  }
  StatusOr<ExprPtr> ParsePrimary() {
    const ExprToken& t = Peek();
    switch (t.kind) {
      case TokKind::kName: {
        ++pos_;
        auto lit = Make(Expr::Kind::kLiteral);
        if (t.text == "true" || t.text == "True") {
          lit->literal = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          lit->literal = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          lit->literal = Value::None();
        } else {
          return Make(Expr::Kind::kName, t.text);
        }
        return lit;
      }
      case TokKind::kString: {
        std::string s;
        while (Peek().kind == TokKind::kString) s += tokens_[pos_++].text;
        auto lit = Make(Expr::Kind::kLiteral);
        lit->literal = Value(std::move(s));
        return lit;
      }
      case TokKind::kInt:
      case TokKind::kFloat: {
        ++pos_;
        auto lit = Make(Expr::Kind::kLiteral);
        if (t.kind == TokKind::kInt) {
          errno = 0;
          const long long v = std::strtoll(t.text.c_str(), nullptr, 10);
          if (errno != 0) return Error("integer literal out of range");
          lit->literal = Value(static_cast<int64_t>(v));
        } else {
          lit->literal = Value(std::strtod(t.text.c_str(), nullptr));
        }
        return lit;
      }
      case TokKind::kOp:
        if (SkipOp("(")) return ParseParenthesized();
        if (SkipOp("[")) return ParseListLiteral();
        if (SkipOp("{")) return ParseDictLiteral();
        break;
      default: break;
    }
    return Error("unexpected '" + t.text + "'");
  }
  StatusOr<ExprPtr> ParseParenthesized() {
    auto tuple = Make(Expr::Kind::kTuple);
    if (SkipOp(")")) return tuple;
    TANDEM_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression());
    if (SkipOp(")")) return first;
    tuple->children.push_back(std::move(first));
    while (SkipOp(",")) {
      if (IsOp(")")) break;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr next, ParseExpression());
      tuple->children.push_back(std::move(next));
    }
    TANDEM_RETURN_IF_ERROR(ExpectOp(")"));
    return tuple;
  }
  StatusOr<ExprPtr> ParseListLiteral() {
    auto list = Make(Expr::Kind::kList);
    while (!IsOp("]")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
      list->children.push_back(std::move(item));
      if (!SkipOp(",")) break;
    }
    TANDEM_RETURN_IF_ERROR(ExpectOp("]"));
    return list;
  }
  StatusOr<ExprPtr> ParseDictLiteral() {
    auto dict = Make(Expr::Kind::kDict);
    while (!IsOp("}")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
      TANDEM_RETURN_IF_ERROR(ExpectOp(":"));
      TANDEM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      dict->children.push_back(std::move(key));
      dict->children.push_back(std::move(value));
      if (!SkipOp(",")) break;
    }
    TANDEM_RETURN_IF_ERROR(ExpectOp("}"));
    return dict;
  }
  StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      if (SkipOp(".")) {
        auto e = Make(Expr::Kind::kGetAttr);
        if (Peek().kind == TokKind::kName || Peek().kind == TokKind::kInt) {
          e->name = tokens_[pos_++].text;
        } else {
          return Error("expected an attribute name after '.'");
        }
        e->children.push_back(std::move(node));
        node = std::move(e);
      } else if (SkipOp("[")) {
        TANDEM_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      } else if (IsOp("(")) {
        TANDEM_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }
  StatusOr<ExprPtr> ParseSubscript(ExprPtr target) {
    ExprPtr parts[3];
    bool is_slice = false;
    for (int part = 0; part < 3; ++part) {
      if (!IsOp(":") && !IsOp("]")) {
        TANDEM_ASSIGN_OR_RETURN(parts[part], ParseExpression());
      }
      if (part < 2 && SkipOp(":")) {
        is_slice = true;
        continue;
      }
      break;
    }
    TANDEM_RETURN_IF_ERROR(ExpectOp("]"));
    auto e = Make(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem);
    e->children.push_back(std::move(target));
    if (!is_slice && !parts[0]) return Error("empty subscript");
    e->children.push_back(std::move(parts[0]));
    if (is_slice) {
      e->children.push_back(std::move(parts[1]));
      e->children.push_back(std::move(parts[2]));
    }
    return e;
  }
  // Parses "(args)" into e->children[first_arg...] and e->kwargs.
  Status ParseArgs(Expr* e) {
    TANDEM_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (Peek().kind == TokKind::kName && IsOp("=", 1)) {
        std::string key = tokens_[pos_].text;
        pos_ += 2;
        TANDEM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        e->kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        TANDEM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        e->children.push_back(std::move(value));
      }
      if (!SkipOp(",")) break;
    }
    return ExpectOp(")");
  }
  StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    auto e = Make(Expr::Kind::kCall);
    e->children.push_back(std::move(callee));
    TANDEM_RETURN_IF_ERROR(ParseArgs(e.get()));
    return e;
  }
  StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (SkipOp("|")) {
        TANDEM_ASSIGN_OR_RETURN(std::string name, ExpectName());
        while (SkipOp(".")) {
          TANDEM_ASSIGN_OR_RETURN(std::string part, ExpectName());
          name += "." + part;
        }
        auto e = Make(Expr::Kind::kFilter, name);
        e->children.push_back(std::move(node));
        if (IsOp("(")) TANDEM_RETURN_IF_ERROR(ParseArgs(e.get()));
        node = std::move(e);
      } else if (SkipName("is")) {
        auto e = Make(Expr::Kind::kTest);
        e->negated = SkipName("not");
        TANDEM_ASSIGN_OR_RETURN(e->name, ExpectName());
        e->children.push_back(std::move(node));
        if (IsOp("(")) {
          TANDEM_RETURN_IF_ERROR(ParseArgs(e.get()));
        } else if ((Peek().kind == TokKind::kName || Peek().kind == TokKind::kString || Peek().kind == TokKind::kInt ||
                    Peek().kind == TokKind::kFloat || IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and") && !IsName("is") && !IsName("if")) {
          TANDEM_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
          TANDEM_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
          e->children.push_back(std::move(arg));
        }
        node = std::move(e);
      } else if (IsOp("(")) {
        TANDEM_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  std::vector<ExprToken> tokens_;
  size_t pos_ = 0;
  int depth_;
};

// Statement-level parser over the segment list.
class TemplateParser {
 public:
  explicit TemplateParser(std::vector<TemplateSegment> segments) : segs_(std::move(segments)) {}

  StatusOr<NodeList> ParseAll() {
    NodeList nodes;
    std::string end;
    TANDEM_RETURN_IF_ERROR(ParseBody({}, &nodes, &end, 0));
    return nodes;
  }

 private:
  static Status Error(int line, const std::string& message) {
    return InvalidArgumentError("template syntax error, line " + std::to_string(line) + ": " + message);
  }

  // Parses nodes until a block tag whose keyword is in `ends` (consumed;
  // reported in *end with the parser positioned after the keyword).
  Status ParseBody(const std::set<std::string>& ends, NodeList* out, std::string* end, int depth) {
    if (depth > kMaxNestingDepth)
      return Error(segs_.empty() ? 0 : segs_[std::min(pos_, segs_.size() - 1)].line, "blocks nested too deeply");
    while (pos_ < segs_.size()) {
      const TemplateSegment& seg = segs_[pos_++];
      if (seg.kind == TemplateSegment::Kind::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->text = seg.content;
        out->push_back(std::move(n));
        continue;
      }
      TANDEM_ASSIGN_OR_RETURN(auto tokens, TokenizeExpression(seg.content, seg.line));
      expr_ = std::make_unique<ExprParser>(std::move(tokens), depth);
      if (seg.kind == TemplateSegment::Kind::kVariable) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = seg.line;
        TANDEM_ASSIGN_OR_RETURN(n->expr, expr_->ParseTupleOrExpression());
        TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
        out->push_back(std::move(n));
        continue;
      }
      TANDEM_ASSIGN_OR_RETURN(std::string keyword, expr_->ExpectName());
      if (ends.count(keyword)) {
        *end = keyword;
        return Status::Ok();
      }
      TANDEM_ASSIGN_OR_RETURN(NodePtr node, ParseStatement(keyword, seg.line, depth));
      if (node) out->push_back(std::move(node));
    }
    if (!ends.empty()) {
      return Error(segs_.empty() ? 0 : segs_.back().line,
                   "unexpected end of template, expected '" + *ends.begin() + "'");
    }
    return Status::Ok();
  }

  StatusOr<NodePtr> ParseStatement(const std::string& keyword, int line, int depth) {
    auto n = std::make_unique<Node>();
    n->line = line;
    std::string end;
    if (keyword == "if") {
      n->kind = Node::Kind::kIf;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr cond, expr_->ParseTupleOrExpression());
      TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
      while (true) {
        NodeList body;
        TANDEM_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &body, &end, depth + 1));
        n->branches.emplace_back(std::move(cond), std::move(body));
        if (end == "elif") {
          TANDEM_ASSIGN_OR_RETURN(cond, expr_->ParseTupleOrExpression());
          TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
          continue;
        }
        if (end == "else") {
          TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
          TANDEM_RETURN_IF_ERROR(ParseBody({"endif"}, &n->body, &end, depth + 1));
        }
        return FinishTag(std::move(n));
      }
    }
    if (keyword == "for") {
      n->kind = Node::Kind::kFor;
      do {
        TANDEM_ASSIGN_OR_RETURN(std::string target, expr_->ExpectName());
        n->targets.push_back(std::move(target));
      } while (expr_->SkipOp(","));
      if (!expr_->SkipName("in")) return expr_->Error("expected 'in' in for loop");
      TANDEM_ASSIGN_OR_RETURN(n->expr, expr_->ParseTupleOrExpression(/*with_condexpr=*/false));
      if (expr_->SkipName("if")) {
        TANDEM_ASSIGN_OR_RETURN(n->filter, expr_->ParseExpression());
      }
      if (expr_->IsName("recursive")) return expr_->Error("recursive loops are not supported");
      TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
      TANDEM_RETURN_IF_ERROR(ParseBody({"else", "endfor"}, &n->body, &end, depth + 1));
      if (end == "else") {
        TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
        TANDEM_RETURN_IF_ERROR(ParseBody({"endfor"}, &n->else_body, &end, depth + 1));
      }
      return FinishTag(std::move(n));
    }
    if (keyword == "set") {
      do {
        TANDEM_ASSIGN_OR_RETURN(std::string target, expr_->ExpectName());
        if (expr_->SkipOp(".")) {
          TANDEM_ASSIGN_OR_RETURN(std::string attr, expr_->ExpectName());
          target += "." + attr;
        }
        n->targets.push_back(std::move(target));
      } while (expr_->SkipOp(","));
      if (expr_->SkipOp("=")) {
        n->kind = Node::Kind::kSet;
        TANDEM_ASSIGN_OR_RETURN(n->expr, expr_->ParseTupleOrExpression());
        TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
        return n;
      }
      n->kind = Node::Kind::kSetBlock;
      if (n->targets.size() != 1) return expr_->Error("block set takes one target");
      TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
      TANDEM_RETURN_IF_ERROR(ParseBody({"endset"}, &n->body, &end, depth + 1));
      return FinishTag(std::move(n));
    }
    if (keyword == "macro") {
      n->kind = Node::Kind::kMacro;
      TANDEM_ASSIGN_OR_RETURN(n->name, expr_->ExpectName());
      TANDEM_RETURN_IF_ERROR(expr_->ExpectOp("("));
      while (!expr_->IsOp(")")) {
        TANDEM_ASSIGN_OR_RETURN(std::string param, expr_->ExpectName());
        ExprPtr def;
        if (expr_->SkipOp("=")) {
          TANDEM_ASSIGN_OR_RETURN(def, expr_->ParseExpression());
        }
        n->params.emplace_back(std::move(param), std::move(def));
        if (!expr_->SkipOp(",")) break;
      }
      TANDEM_RETURN_IF_ERROR(expr_->ExpectOp(")"));
      TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
      TANDEM_RETURN_IF_ERROR(ParseBody({"endmacro"}, &n->body, &end, depth + 1));
      return FinishTag(std::move(n));
    }
    if (keyword == "break" || keyword == "continue") {
      n->kind = keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
      return n;
    }
    if (keyword == "generation") {
      // Hugging Face's assistant-mask marker: renders its body unchanged.
      TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
      n->kind = Node::Kind::kIf;
      auto always = expr_->Make(Expr::Kind::kLiteral);
      always->literal = Value(true);
      NodeList body;
      TANDEM_RETURN_IF_ERROR(ParseBody({"endgeneration"}, &body, &end, depth + 1));
      n->branches.emplace_back(std::move(always), std::move(body));
      return FinishTag(std::move(n));
    }
    return Error(line, "unsupported tag '" + keyword + "'");
  }

  // The closing tag (already matched) must have nothing after its keyword.
  StatusOr<NodePtr> FinishTag(NodePtr n) {
    TANDEM_RETURN_IF_ERROR(expr_->ExpectEnd());
    return n;
  }

  std::vector<TemplateSegment> segs_;
  size_t pos_ = 0;
  std::unique_ptr<ExprParser> expr_;
};

}  // namespace

StatusOr<NodeList> ParseTemplate(std::string_view source) {
  if (source.size() > kMaxTemplateBytes) return InvalidArgumentError("chat template too large");
  TANDEM_ASSIGN_OR_RETURN(auto segments, SplitTemplate(source));
  TemplateParser parser(std::move(segments));
  return parser.ParseAll();
}

}  // namespace tandem::tokenizer::jinja
