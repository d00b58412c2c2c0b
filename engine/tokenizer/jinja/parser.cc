#include "engine/tokenizer/jinja/parser.h"

#include <initializer_list>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/tokenizer/jinja/filters.h"

namespace tandem::jinja {
namespace {

NodePtr MakeNode(NodeKind kind, int line) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  return n;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  absl::StatusOr<std::vector<NodePtr>> Program() {
    std::vector<NodePtr> body;
    while (pos_ < t_.size()) {
      ASSIGN_OR_RETURN(NodePtr n, Any());
      if (n) body.push_back(std::move(n));
    }
    return body;
  }

 private:
  // Counts nesting on the way down; refuses templates nested deeper than kMaxNesting.
  class Depth {
   public:
    explicit Depth(Parser* p) : p_(p) { ++p_->depth_; }
    ~Depth() { --p_->depth_; }
    bool too_deep() const { return p_->depth_ > kMaxNesting; }

   private:
    Parser* p_;
  };

  int Line() const {
    if (t_.empty()) return 1;
    return t_[pos_ < t_.size() ? pos_ : t_.size() - 1].line;
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("template line ", Line(), ": ", std::string(what)));
  }
  std::string Describe() const {
    if (pos_ >= t_.size()) return "the end of the template";
    const Token& tok = t_[pos_];
    if (tok.type == TokenType::kIdentifier || tok.type == TokenType::kNumber || tok.type == TokenType::kAdditive ||
        tok.type == TokenType::kMultiplicative || tok.type == TokenType::kComparison) {
      return absl::StrCat("'", tok.value, "'");
    }
    return TokenTypeName(tok.type);
  }

  bool Is(TokenType type) const { return pos_ < t_.size() && t_[pos_].type == type; }
  bool IsAt(size_t i, TokenType type) const { return pos_ + i < t_.size() && t_[pos_ + i].type == type; }
  bool IsName(std::string_view name, size_t i = 0) const {
    return IsAt(i, TokenType::kIdentifier) && t_[pos_ + i].value == name;
  }
  bool IsStatement(std::initializer_list<std::string_view> names) const {
    if (!IsAt(0, TokenType::kOpenStatement) || !IsAt(1, TokenType::kIdentifier)) return false;
    for (auto n : names) {
      if (t_[pos_ + 1].value == n) return true;
    }
    return false;
  }
  absl::Status Expect(TokenType type, std::string_view what) {
    if (!Is(type)) return Error(absl::StrCat("expected ", std::string(what), ", found ", Describe()));
    ++pos_;
    return absl::OkStatus();
  }
  absl::Status ExpectEnd(std::string_view name, int opened_line, std::string_view opener) {
    if (pos_ >= t_.size()) {
      return Error(absl::StrCat("missing {% ", std::string(name), " %} for the ", std::string(opener), " on line ", opened_line));
    }
    RETURN_IF_ERROR(Expect(TokenType::kOpenStatement, "'{%'"));
    if (!IsName(name)) return Error(absl::StrCat("expected ", std::string(name), ", found ", Describe()));
    ++pos_;
    return Expect(TokenType::kCloseStatement, "'%}'");
  }

  // Statements until one of `ends` (not consumed); the end of the tokens is an error.
  absl::Status Body(std::vector<NodePtr>* out, std::initializer_list<std::string_view> ends, int opened_line,
                    std::string_view opener) {
    while (!IsStatement(ends)) {
      if (pos_ >= t_.size()) {
        return Error(absl::StrCat("missing {% ", std::string(*ends.begin()), " %} for the ", std::string(opener), " on line ", opened_line));
      }
      ASSIGN_OR_RETURN(NodePtr n, Any());
      if (n) out->push_back(std::move(n));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<NodePtr> Any() {
    const Token& tok = t_[pos_];
    switch (tok.type) {
      case TokenType::kComment: ++pos_; return NodePtr();
      case TokenType::kText: {
        auto n = MakeNode(NodeKind::kText, tok.line);
        n->text = tok.value;
        ++pos_;
        return n;
      }
      case TokenType::kOpenStatement: return Statement();
      case TokenType::kOpenExpression: {
        ++pos_;
        auto n = MakeNode(NodeKind::kOutput, tok.line);
        ASSIGN_OR_RETURN(n->a, Expression());
        RETURN_IF_ERROR(Expect(TokenType::kCloseExpression, "'}}'"));
        return n;
      }
      default: return Error(absl::StrCat("unexpected ", Describe()));
    }
  }

  absl::StatusOr<NodePtr> Statement() {
    Depth depth(this);
    if (depth.too_deep()) return Error("blocks nested too deep");
    ++pos_;  // {%
    if (!Is(TokenType::kIdentifier)) return Error(absl::StrCat("expected a statement name, found ", Describe()));
    const std::string name = t_[pos_].value;
    const int line = t_[pos_].line;
    ++pos_;
    if (name == "set") return Set(line);
    if (name == "if") {
      ASSIGN_OR_RETURN(NodePtr n, If(line));
      RETURN_IF_ERROR(ExpectEnd("endif", line, "if"));
      return n;
    }
    if (name == "for") return For(line);
    if (name == "macro") return Macro(line);
    if (name == "call") return CallBlock(line);
    if (name == "filter") return FilterBlock(line);
    if (name == "break" || name == "continue") {
      RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
      return MakeNode(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, line);
    }
    return Error(absl::StrCat("unsupported statement {% ", name, " %}"));
  }

  absl::StatusOr<NodePtr> Set(int line) {
    auto n = MakeNode(NodeKind::kSet, line);
    ASSIGN_OR_RETURN(n->a, Sequence(false));
    const NodeKind k = n->a->kind;
    if (k != NodeKind::kIdentifier && k != NodeKind::kTuple && !(k == NodeKind::kMember && !n->a->flag)) {
      return Error("{% set %} can assign a name, names, or an attribute of a namespace only");
    }
    if (Is(TokenType::kEquals)) {
      ++pos_;
      ASSIGN_OR_RETURN(n->b, Sequence(false));
      RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
      return n;
    }
    RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'=' or '%}'"));
    RETURN_IF_ERROR(Body(&n->list, {"endset"}, line, "set"));
    RETURN_IF_ERROR(ExpectEnd("endset", line, "set"));
    return n;
  }

  absl::StatusOr<NodePtr> If(int line) {
    auto n = MakeNode(NodeKind::kIf, line);
    ASSIGN_OR_RETURN(n->a, Expression());
    RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
    RETURN_IF_ERROR(Body(&n->list, {"endif", "elif", "else"}, line, "if"));
    if (IsStatement({"elif"})) {
      const int elif_line = t_[pos_ + 1].line;
      pos_ += 2;
      ASSIGN_OR_RETURN(NodePtr elif, If(elif_line));
      n->list2.push_back(std::move(elif));
    } else if (IsStatement({"else"})) {
      pos_ += 2;
      RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
      RETURN_IF_ERROR(Body(&n->list2, {"endif"}, line, "if"));
    }
    return n;
  }

  absl::StatusOr<NodePtr> For(int line) {
    auto n = MakeNode(NodeKind::kFor, line);
    ASSIGN_OR_RETURN(n->a, Sequence(true));
    if (n->a->kind != NodeKind::kIdentifier && n->a->kind != NodeKind::kTuple) {
      return Error("{% for %} needs a name or names before 'in'");
    }
    if (!IsName("in")) return Error(absl::StrCat("expected 'in' in {% for %}, found ", Describe()));
    ++pos_;
    ASSIGN_OR_RETURN(NodePtr iterable, Expression());
    if (iterable->kind == NodeKind::kSelect) {  // for x in xs if cond
      n->b = std::move(iterable->a);
      n->c = std::move(iterable->b);
    } else {
      n->b = std::move(iterable);
    }
    RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
    RETURN_IF_ERROR(Body(&n->list, {"endfor", "else"}, line, "for"));
    if (IsStatement({"else"})) {
      pos_ += 2;
      RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
      RETURN_IF_ERROR(Body(&n->list2, {"endfor"}, line, "for"));
    }
    RETURN_IF_ERROR(ExpectEnd("endfor", line, "for"));
    return n;
  }

  absl::StatusOr<NodePtr> Macro(int line) {
    auto n = MakeNode(NodeKind::kMacro, line);
    if (!Is(TokenType::kIdentifier)) return Error("expected the macro's name after {% macro");
    n->text = t_[pos_++].value;
    ASSIGN_OR_RETURN(n->list2, Arguments(true));
    RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
    RETURN_IF_ERROR(Body(&n->list, {"endmacro"}, line, "macro"));
    RETURN_IF_ERROR(ExpectEnd("endmacro", line, "macro"));
    return n;
  }

  absl::StatusOr<NodePtr> CallBlock(int line) {
    auto n = MakeNode(NodeKind::kCallBlock, line);
    if (Is(TokenType::kOpenParen)) {
      ASSIGN_OR_RETURN(n->list2, Arguments(true));
    }
    if (!Is(TokenType::kIdentifier)) return Error("expected a macro name after {% call");
    auto call = MakeNode(NodeKind::kCall, line);
    call->a = MakeNode(NodeKind::kIdentifier, line);
    call->a->text = t_[pos_++].value;
    ASSIGN_OR_RETURN(call->list, Arguments(false));
    n->a = std::move(call);
    RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
    RETURN_IF_ERROR(Body(&n->list, {"endcall"}, line, "call"));
    RETURN_IF_ERROR(ExpectEnd("endcall", line, "call"));
    return n;
  }

  absl::StatusOr<NodePtr> FilterBlock(int line) {
    auto n = MakeNode(NodeKind::kFilterBlock, line);
    ASSIGN_OR_RETURN(n->a, FilterSpec(nullptr));
    RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
    RETURN_IF_ERROR(Body(&n->list, {"endfilter"}, line, "filter"));
    RETURN_IF_ERROR(ExpectEnd("endfilter", line, "filter"));
    return n;
  }

  // A comma-separated sequence: one expression, or a tuple of them (`a, b = ...`).
  absl::StatusOr<NodePtr> Sequence(bool primary) {
    const int line = Line();
    ASSIGN_OR_RETURN(NodePtr first, primary ? Primary() : Expression());
    if (!Is(TokenType::kComma)) return first;
    auto tuple = MakeNode(NodeKind::kTuple, line);
    tuple->list.push_back(std::move(first));
    while (Is(TokenType::kComma)) {
      ++pos_;
      ASSIGN_OR_RETURN(NodePtr next, primary ? Primary() : Expression());
      tuple->list.push_back(std::move(next));
    }
    return tuple;
  }

  absl::StatusOr<NodePtr> Expression() {
    Depth depth(this);
    if (depth.too_deep()) return Error("expression nested too deep");
    ASSIGN_OR_RETURN(NodePtr a, Or());
    if (!IsName("if")) return a;
    const int line = Line();
    ++pos_;
    ASSIGN_OR_RETURN(NodePtr test, Or());
    if (IsName("else")) {
      ++pos_;
      auto n = MakeNode(NodeKind::kTernary, line);
      n->a = std::move(test);
      n->b = std::move(a);
      ASSIGN_OR_RETURN(n->c, Expression());
      return n;
    }
    auto n = MakeNode(NodeKind::kSelect, line);
    n->a = std::move(a);
    n->b = std::move(test);
    return n;
  }

  using Level = absl::StatusOr<NodePtr> (Parser::*)();
  // Consumes the operator of a binary level if the next token is one and returns its text, else "".
  using OperatorMatch = std::string (Parser::*)();

  // One left-associative binary level: operands parsed by `next`, joined by what `match` accepts.
  absl::StatusOr<NodePtr> LeftAssociative(Level next, OperatorMatch match) {
    ASSIGN_OR_RETURN(NodePtr left, (this->*next)());
    while (true) {
      const int line = Line();
      std::string op = (this->*match)();
      if (op.empty()) break;
      auto n = MakeNode(NodeKind::kBinary, line);
      n->text = std::move(op);
      n->a = std::move(left);
      ASSIGN_OR_RETURN(n->b, (this->*next)());
      left = std::move(n);
    }
    return left;
  }

  std::string TakeName(std::string_view name) {
    if (!IsName(name)) return "";
    ++pos_;
    return std::string(name);
  }
  std::string TakeType(TokenType type) { return Is(type) ? t_[pos_++].value : ""; }
  std::string OrOp() { return TakeName("or"); }
  std::string AndOp() { return TakeName("and"); }
  std::string AdditiveOp() { return TakeType(TokenType::kAdditive); }
  std::string MultiplicativeOp() { return TakeType(TokenType::kMultiplicative); }
  std::string PowerOp() { return TakeType(TokenType::kPower); }
  // Membership has the precedence of comparisons, as in the reference.
  std::string ComparisonOp() {
    if (IsName("not") && IsName("in", 1)) {
      pos_ += 2;
      return "not in";
    }
    if (IsName("in")) return TakeName("in");
    return TakeType(TokenType::kComparison);
  }

  absl::StatusOr<NodePtr> Or() { return LeftAssociative(&Parser::And, &Parser::OrOp); }
  absl::StatusOr<NodePtr> And() { return LeftAssociative(&Parser::Not, &Parser::AndOp); }

  absl::StatusOr<NodePtr> Not() {
    if (!IsName("not")) return Comparison();
    Depth depth(this);
    if (depth.too_deep()) return Error("expression nested too deep");
    auto n = MakeNode(NodeKind::kUnary, Line());
    ++pos_;
    n->text = "not";
    ASSIGN_OR_RETURN(n->a, Not());
    return n;
  }

  absl::StatusOr<NodePtr> Comparison() { return LeftAssociative(&Parser::Additive, &Parser::ComparisonOp); }
  absl::StatusOr<NodePtr> Additive() { return LeftAssociative(&Parser::Multiplicative, &Parser::AdditiveOp); }
  absl::StatusOr<NodePtr> Multiplicative() { return LeftAssociative(&Parser::Power, &Parser::MultiplicativeOp); }
  // Unlike Python, Jinja's ** is left-associative: 2 ** 3 ** 2 is 64.
  absl::StatusOr<NodePtr> Power() { return LeftAssociative(&Parser::Test, &Parser::PowerOp); }

  absl::StatusOr<NodePtr> Test() {
    ASSIGN_OR_RETURN(NodePtr operand, Filter());
    while (IsName("is")) {
      auto n = MakeNode(NodeKind::kTest, Line());
      ++pos_;
      if (IsName("not")) {
        n->flag = true;
        ++pos_;
      }
      if (!Is(TokenType::kIdentifier)) return Error(absl::StrCat("expected a test name after 'is', found ", Describe()));
      n->text = t_[pos_++].value;
      if (!IsKnownTest(n->text)) return Error(absl::StrCat("unsupported test 'is ", n->text, "'"));
      if (Is(TokenType::kOpenParen)) {
        ASSIGN_OR_RETURN(n->list, Arguments(false));
      } else if (Is(TokenType::kNumber) || Is(TokenType::kString)) {  // `is divisibleby 3`, `is eq "a"`
        ASSIGN_OR_RETURN(NodePtr arg, Primary());
        n->list.push_back(std::move(arg));
      }
      n->a = std::move(operand);
      operand = std::move(n);
    }
    return operand;
  }

  // `name` or `name(args)` after a pipe (or after {% filter); applied to `operand`.
  absl::StatusOr<NodePtr> FilterSpec(NodePtr operand) {
    if (!Is(TokenType::kIdentifier)) return Error(absl::StrCat("expected a filter name, found ", Describe()));
    auto n = MakeNode(NodeKind::kFilter, Line());
    n->text = t_[pos_++].value;
    if (!IsKnownFilter(n->text)) return Error(absl::StrCat("unsupported filter '", n->text, "'"));
    if (Is(TokenType::kOpenParen)) {
      n->flag = true;
      ASSIGN_OR_RETURN(n->list, Arguments(false));
    }
    n->a = std::move(operand);
    return n;
  }

  absl::StatusOr<NodePtr> Filter() {
    ASSIGN_OR_RETURN(NodePtr operand, Sign());
    while (Is(TokenType::kPipe)) {
      ++pos_;
      ASSIGN_OR_RETURN(operand, FilterSpec(std::move(operand)));
    }
    return operand;
  }

  absl::StatusOr<NodePtr> Sign() {
    if ((Is(TokenType::kUnary) || Is(TokenType::kAdditive)) && (t_[pos_].value == "-" || t_[pos_].value == "+")) {
      Depth depth(this);
      if (depth.too_deep()) return Error("expression nested too deep");
      auto n = MakeNode(NodeKind::kUnary, Line());
      n->text = t_[pos_++].value;
      ASSIGN_OR_RETURN(n->a, Sign());
      return n;
    }
    return CallMember();
  }

  absl::StatusOr<NodePtr> CallMember() {
    ASSIGN_OR_RETURN(NodePtr object, Primary());
    ASSIGN_OR_RETURN(object, Member(std::move(object)));
    while (Is(TokenType::kOpenParen)) {
      auto call = MakeNode(NodeKind::kCall, Line());
      ASSIGN_OR_RETURN(call->list, Arguments(false));
      call->a = std::move(object);
      ASSIGN_OR_RETURN(object, Member(std::move(call)));
    }
    return object;
  }

  absl::StatusOr<NodePtr> Member(NodePtr object) {
    while (Is(TokenType::kDot) || Is(TokenType::kOpenBracket)) {
      auto n = MakeNode(NodeKind::kMember, Line());
      const bool computed = Is(TokenType::kOpenBracket);
      ++pos_;
      n->flag = computed;
      if (computed) {
        ASSIGN_OR_RETURN(n->b, Subscript());
        RETURN_IF_ERROR(Expect(TokenType::kCloseBracket, "']'"));
      } else {
        if (pos_ >= t_.size()) return Error("expected a name after '.'");
        ASSIGN_OR_RETURN(n->b, Primary());
        if (n->b->kind != NodeKind::kIdentifier && n->b->kind != NodeKind::kInteger) {
          return Error("expected a name or an integer after '.'");
        }
      }
      n->a = std::move(object);
      object = std::move(n);
    }
    return object;
  }

  // What is inside [...]: an expression, or a slice start:stop:step.
  absl::StatusOr<NodePtr> Subscript() {
    std::vector<NodePtr> parts;
    bool slice = false;
    const int line = Line();
    while (!Is(TokenType::kCloseBracket)) {
      if (pos_ >= t_.size()) return Error("missing ']'");
      if (Is(TokenType::kColon)) {
        parts.push_back(nullptr);
        ++pos_;
        slice = true;
      } else {
        ASSIGN_OR_RETURN(NodePtr e, Expression());
        parts.push_back(std::move(e));
        if (Is(TokenType::kColon)) {
          ++pos_;
          slice = true;
        }
      }
    }
    if (parts.empty()) return Error("empty subscript []");
    if (!slice) {
      if (parts.size() != 1 || !parts[0]) return Error("bad subscript");
      return std::move(parts[0]);
    }
    if (parts.size() > 3) return Error("a slice has at most 3 parts");
    auto n = MakeNode(NodeKind::kSlice, line);
    n->a = std::move(parts[0]);
    if (parts.size() > 1) n->b = std::move(parts[1]);
    if (parts.size() > 2) n->c = std::move(parts[2]);
    return n;
  }

  // (args) of a call, or (params) of a macro / call block when `parameters`.
  absl::StatusOr<std::vector<NodePtr>> Arguments(bool parameters) {
    RETURN_IF_ERROR(Expect(TokenType::kOpenParen, "'('"));
    std::vector<NodePtr> args;
    absl::flat_hash_set<std::string> names;
    bool saw_keyword = false, saw_spread = false;
    while (!Is(TokenType::kCloseParen)) {
      if (pos_ >= t_.size()) return Error("missing ')'");
      const int line = Line();
      const bool kw_spread = Is(TokenType::kPower);
      const bool spread = Is(TokenType::kMultiplicative) && t_[pos_].value == "*";
      if (parameters && (kw_spread || spread)) return Error("argument unpacking in a parameter list");
      if (kw_spread) {
        ++pos_;
        auto n = MakeNode(NodeKind::kKeywordSpread, line);
        ASSIGN_OR_RETURN(n->a, Expression());
        args.push_back(std::move(n));
        if (Is(TokenType::kComma)) ++pos_;
        if (!Is(TokenType::kCloseParen)) return Error("'**' must be the last argument");
        break;
      }
      NodePtr arg;
      if (spread) {
        if (saw_spread) return Error("only one '*' argument is allowed");
        saw_spread = true;
        ++pos_;
        arg = MakeNode(NodeKind::kSpread, line);
        ASSIGN_OR_RETURN(arg->a, Expression());
      } else {
        ASSIGN_OR_RETURN(arg, Expression());
        if (Is(TokenType::kEquals)) {
          ++pos_;
          if (arg->kind != NodeKind::kIdentifier) return Error("a keyword argument needs a name before '='");
          auto kw = MakeNode(NodeKind::kKeyword, line);
          kw->text = arg->text;
          ASSIGN_OR_RETURN(kw->a, Expression());
          arg = std::move(kw);
        }
        if (parameters) {
          if (arg->kind != NodeKind::kIdentifier && arg->kind != NodeKind::kKeyword) {
            return Error("a macro parameter must be a name");
          }
          if (!names.insert(arg->text).second) return Error(absl::StrCat("duplicate parameter '", arg->text, "'"));
        }
        if (arg->kind == NodeKind::kKeyword) {
          saw_keyword = true;
        } else if (saw_keyword) {
          return Error(parameters ? "a parameter without default follows one with a default"
                                  : "a positional argument follows a keyword argument");
        } else if (saw_spread) {
          return Error("a positional argument follows a '*' argument");
        }
      }
      args.push_back(std::move(arg));
      if (Is(TokenType::kComma)) ++pos_;
    }
    ++pos_;  // )
    return args;
  }

  absl::StatusOr<NodePtr> Primary() {
    if (pos_ >= t_.size()) return Error("unexpected end of the template in an expression");
    const Token& tok = t_[pos_++];
    switch (tok.type) {
      case TokenType::kNumber: {
        const bool is_float = tok.value.find('.') != std::string::npos;
        auto n = MakeNode(is_float ? NodeKind::kFloat : NodeKind::kInteger, tok.line);
        n->number = std::strtod(tok.value.c_str(), nullptr);
        return n;
      }
      case TokenType::kString: {
        auto n = MakeNode(NodeKind::kString, tok.line);
        n->text = tok.value;
        while (Is(TokenType::kString)) n->text += t_[pos_++].value;  // "a" "b" is "ab"
        return n;
      }
      case TokenType::kIdentifier: {
        auto n = MakeNode(NodeKind::kIdentifier, tok.line);
        n->text = tok.value;
        return n;
      }
      case TokenType::kOpenParen: {
        ASSIGN_OR_RETURN(NodePtr e, Sequence(false));
        RETURN_IF_ERROR(Expect(TokenType::kCloseParen, "')'"));
        return e;
      }
      case TokenType::kOpenBracket: {
        auto n = MakeNode(NodeKind::kArray, tok.line);
        while (!Is(TokenType::kCloseBracket)) {
          if (pos_ >= t_.size()) return Error("missing ']'");
          ASSIGN_OR_RETURN(NodePtr e, Expression());
          n->list.push_back(std::move(e));
          if (Is(TokenType::kComma)) ++pos_;
        }
        ++pos_;
        return n;
      }
      case TokenType::kOpenBrace: {
        auto n = MakeNode(NodeKind::kDict, tok.line);
        while (!Is(TokenType::kCloseBrace)) {
          if (pos_ >= t_.size()) return Error("missing '}'");
          ASSIGN_OR_RETURN(NodePtr key, Expression());
          RETURN_IF_ERROR(Expect(TokenType::kColon, "':' in a dict literal"));
          ASSIGN_OR_RETURN(NodePtr value, Expression());
          n->list.push_back(std::move(key));
          n->list2.push_back(std::move(value));
          if (Is(TokenType::kComma)) ++pos_;
        }
        ++pos_;
        return n;
      }
      default:
        --pos_;
        return Error(absl::StrCat("unexpected ", Describe(), " in an expression"));
    }
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<NodePtr>> Parse(const std::vector<Token>& tokens) { return Parser(tokens).Program(); }

}  // namespace tandem::jinja
