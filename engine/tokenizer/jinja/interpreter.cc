#include "engine/tokenizer/jinja/interpreter.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/tokenizer/jinja/filters.h"
#include "engine/tokenizer/jinja/globals.h"
#include "engine/tokenizer/jinja/methods.h"

namespace tandem::jinja {
namespace {

absl::Status At(const Node& node, const absl::Status& st) {
  if (st.ok() || absl::StartsWith(st.message(), "template line ") || absl::StartsWith(st.message(), kRaisedPrefix)) {
    return st;
  }
  return absl::Status(st.code(), absl::StrCat("template line ", node.line, ": ", st.message()));
}

// Wraps an error with the line of `node` (once: the innermost node that failed names the line).
#define RETURN_AT(node, expr)                   \
  do {                                          \
    ::absl::Status _st = (expr);                \
    if (!_st.ok()) return At(node, _st);        \
  } while (0)

#define ASSIGN_AT(node, lhs, expr)                          \
  auto TANDEM_CONCAT(_r_, __LINE__) = (expr);               \
  if (!TANDEM_CONCAT(_r_, __LINE__).ok()) return At(node, TANDEM_CONCAT(_r_, __LINE__).status()); \
  lhs = std::move(*TANDEM_CONCAT(_r_, __LINE__))

bool NamesSpecial(const Node* n, std::string_view name) {
  if (!n) return false;
  if (n->kind == NodeKind::kIdentifier && n->text == name) return true;
  if (NamesSpecial(n->a.get(), name) || NamesSpecial(n->b.get(), name) || NamesSpecial(n->c.get(), name)) return true;
  for (const auto& c : n->list) {
    if (NamesSpecial(c.get(), name)) return true;
  }
  for (const auto& c : n->list2) {
    if (NamesSpecial(c.get(), name)) return true;
  }
  return false;
}

// Whether a macro's body uses the special name (caller, varargs, kwargs): only then does the
// macro accept extra arguments, as in Jinja.
bool BodyUses(const Node& macro, std::string_view name) {
  for (const auto& c : macro.list) {
    if (NamesSpecial(c.get(), name)) return true;
  }
  return false;
}

class DepthGuard {
 public:
  explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
  ~DepthGuard() { --*depth_; }

 private:
  int* depth_;
};

}  // namespace

Interpreter::Interpreter(const RenderLimits& limits) : limits_(limits) {
  limits_.max_output_bytes = std::min(limits_.max_output_bytes, kMaxStringBytes);
}

Interpreter::~Interpreter() {
  // A namespace can hold itself (set ns.me = ns); emptying them all breaks such cycles.
  for (auto& ns : namespaces_) ns->Clear();
}

Interpreter::Scope* Interpreter::NewScope(Scope* parent) {
  scopes_.emplace_back();
  scopes_.back().parent = parent;
  return &scopes_.back();
}

Value Interpreter::Lookup(const Scope* scope, const std::string& name) const {
  for (const Scope* s = scope; s; s = s->parent) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value();
}

absl::Status Interpreter::Step(const Node& node) {
  if (++steps_ > limits_.max_steps) return At(node, absl::ResourceExhaustedError("template took too many steps"));
  if (depth_ > limits_.max_depth) return At(node, absl::ResourceExhaustedError("template recursion too deep"));
  return absl::OkStatus();
}

absl::Status Interpreter::Append(std::string* out, std::string_view s) const {
  if (out->size() + s.size() > limits_.max_output_bytes) return absl::ResourceExhaustedError("template output too large");
  out->append(s);
  return absl::OkStatus();
}

absl::StatusOr<Value> Interpreter::CheckedString(std::string s) const {
  if (s.size() > limits_.max_output_bytes) return absl::ResourceExhaustedError("string too large");
  return Value::String(std::move(s));
}

absl::StatusOr<std::string> Interpreter::Render(const std::vector<NodePtr>& program, const Object& context) {
  Scope* global = NewScope(nullptr);
  AddGlobals(&global->vars, &namespaces_, limits_.max_items);
  for (const auto& [k, v] : context.entries()) global->vars[k] = v;
  std::string out;
  RETURN_IF_ERROR(RenderBlock(program, global, &out));
  if (control_ != Control::kNone) return absl::InvalidArgumentError("{% break %} or {% continue %} outside a loop");
  return out;
}

absl::Status Interpreter::RenderBlock(const std::vector<NodePtr>& body, Scope* scope, std::string* out) {
  for (const auto& node : body) {
    RETURN_IF_ERROR(RenderStatement(*node, scope, out));
    if (control_ != Control::kNone) break;
  }
  return absl::OkStatus();
}

absl::Status Interpreter::RenderStatement(const Node& node, Scope* scope, std::string* out) {
  DepthGuard guard(&depth_);
  RETURN_IF_ERROR(Step(node));
  switch (node.kind) {
    case NodeKind::kText: return Append(out, node.text);
    case NodeKind::kOutput: {
      ASSIGN_OR_RETURN(Value v, Eval(*node.a, scope));
      if (v.is_none() || v.is_undefined()) return absl::OkStatus();
      RETURN_AT(node, Append(out, ToOutputString(v)));
      return absl::OkStatus();
    }
    case NodeKind::kIf: {
      ASSIGN_OR_RETURN(Value cond, Eval(*node.a, scope));
      return RenderBlock(cond.Truthy() ? node.list : node.list2, scope, out);
    }
    case NodeKind::kFor: return RenderFor(node, scope, out);
    case NodeKind::kSet: return ExecSet(node, scope);
    case NodeKind::kMacro: scope->vars[node.text] = MakeMacro(node, scope); return absl::OkStatus();
    case NodeKind::kCallBlock: {
      ASSIGN_OR_RETURN(Value v, CallBlock(node, scope));
      if (v.is_none() || v.is_undefined()) return absl::OkStatus();
      RETURN_AT(node, Append(out, ToOutputString(v)));
      return absl::OkStatus();
    }
    case NodeKind::kFilterBlock: {
      std::string body;
      RETURN_IF_ERROR(RenderBlock(node.list, scope, &body));
      const Node& f = *node.a;
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(f.list, scope));
      ASSIGN_AT(f, Value v, ApplyFilter(f.text, Value::String(std::move(body)), args, f.flag));
      if (v.is_none() || v.is_undefined()) return absl::OkStatus();
      RETURN_AT(node, Append(out, ToOutputString(v)));
      return absl::OkStatus();
    }
    case NodeKind::kBreak: control_ = Control::kBreak; return absl::OkStatus();
    case NodeKind::kContinue: control_ = Control::kContinue; return absl::OkStatus();
    default: return At(node, absl::InternalError("expression where a statement was expected"));
  }
}

absl::Status Interpreter::Bind(const Node& target, const Value& value, Scope* scope) {
  if (target.kind == NodeKind::kIdentifier) {
    scope->vars[target.text] = value;
    return absl::OkStatus();
  }
  // A tuple target: the caller has checked that `value` is a list of the right length.
  for (size_t i = 0; i < target.list.size(); ++i) {
    if (target.list[i]->kind != NodeKind::kIdentifier) return At(target, absl::InvalidArgumentError("can unpack into names only"));
    scope->vars[target.list[i]->text] = value.items()[i];
  }
  return absl::OkStatus();
}

absl::Status Interpreter::RenderFor(const Node& node, Scope* scope, std::string* out) {
  Scope* loop_scope = NewScope(scope);
  ASSIGN_OR_RETURN(Value iterable, Eval(*node.b, loop_scope));
  std::vector<Value> candidates;
  if (iterable.is_array()) {
    candidates = iterable.items();
  } else if (iterable.is_object()) {
    for (const auto& e : iterable.object().entries()) candidates.push_back(Value::String(e.first));
  } else if (iterable.is_string()) {
    candidates = Characters(iterable.str());
  } else if (!iterable.is_undefined()) {  // like Python Jinja, undefined loops zero times
    return At(node, absl::InvalidArgumentError(absl::StrCat("cannot loop over a ", iterable.TypeName())));
  }
  const Node& target = *node.a;
  std::vector<Value> items;
  for (const Value& item : candidates) {
    if (target.kind == NodeKind::kTuple) {
      if (!item.is_array()) return At(node, absl::InvalidArgumentError(absl::StrCat("cannot unpack a ", item.TypeName())));
      if (item.items().size() != target.list.size()) {
        return At(node, absl::InvalidArgumentError(item.items().size() < target.list.size() ? "too few items to unpack" : "too many items to unpack"));
      }
    }
    if (node.c) {
      Scope* test_scope = NewScope(loop_scope);
      RETURN_IF_ERROR(Bind(target, item, test_scope));
      ASSIGN_OR_RETURN(Value keep, Eval(*node.c, test_scope));
      if (!keep.Truthy()) continue;
    }
    items.push_back(item);
  }
  bool no_iteration = true;
  const double n = static_cast<double>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    Object loop;
    const double idx = static_cast<double>(i);
    loop.Set("index", Value::Int(idx + 1));
    loop.Set("index0", Value::Int(idx));
    loop.Set("revindex", Value::Int(n - idx));
    loop.Set("revindex0", Value::Int(n - idx - 1));
    loop.Set("first", Value::Bool(i == 0));
    loop.Set("last", Value::Bool(i + 1 == items.size()));
    loop.Set("length", Value::Int(n));
    loop.Set("previtem", i > 0 ? items[i - 1] : Value());
    loop.Set("nextitem", i + 1 < items.size() ? items[i + 1] : Value());
    loop_scope->vars["loop"] = Value::MakeObject(std::move(loop));
    RETURN_IF_ERROR(Bind(target, items[i], loop_scope));
    // As in the reference, an iteration left by break or continue contributes no text.
    std::string body;
    RETURN_IF_ERROR(RenderBlock(node.list, loop_scope, &body));
    if (control_ == Control::kContinue) {
      control_ = Control::kNone;
      continue;
    }
    if (control_ == Control::kBreak) {
      control_ = Control::kNone;
      break;
    }
    RETURN_AT(node, Append(out, body));
    no_iteration = false;
  }
  if (no_iteration) return RenderBlock(node.list2, loop_scope, out);
  return absl::OkStatus();
}

absl::Status Interpreter::ExecSet(const Node& node, Scope* scope) {
  Value rhs;
  if (node.b) {
    ASSIGN_OR_RETURN(rhs, Eval(*node.b, scope));
  } else {
    std::string body;
    RETURN_IF_ERROR(RenderBlock(node.list, scope, &body));
    rhs = Value::String(std::move(body));
  }
  const Node& target = *node.a;
  if (target.kind == NodeKind::kIdentifier) {
    scope->vars[target.text] = std::move(rhs);
    return absl::OkStatus();
  }
  if (target.kind == NodeKind::kTuple) {
    if (!rhs.is_array()) return At(node, absl::InvalidArgumentError(absl::StrCat("cannot unpack a ", rhs.TypeName())));
    if (rhs.items().size() != target.list.size()) return At(node, absl::InvalidArgumentError("wrong number of items to unpack"));
    return Bind(target, rhs, scope);
  }
  ASSIGN_OR_RETURN(Value object, Eval(*target.a, scope));
  if (!object.is_namespace()) return At(node, absl::InvalidArgumentError("can set attributes of a namespace only"));
  if (target.b->kind != NodeKind::kIdentifier) return At(node, absl::InvalidArgumentError("can set a named attribute only"));
  object.mutable_object().Set(target.b->text, std::move(rhs));
  return absl::OkStatus();
}

absl::Status Interpreter::BindParameters(const Node& node, const std::vector<NodePtr>& params, const CallArgs& args,
                                         Scope* scope) {
  std::vector<std::pair<std::string, Value>> keyword = args.keyword;
  std::vector<const Node*> pending_defaults;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    Value v;
    bool given = false;
    if (i < args.positional.size()) {
      v = args.positional[i];
      given = true;
    } else {
      for (auto it = keyword.begin(); it != keyword.end(); ++it) {
        if (it->first == p.text) {
          v = it->second;
          given = true;
          keyword.erase(it);
          break;
        }
      }
    }
    if (!given && p.kind == NodeKind::kKeyword) pending_defaults.push_back(&p);
    scope->vars[p.text] = v;
  }
  if (BodyUses(node, "kwargs")) {
    Object kw;
    for (auto& [k, v] : keyword) kw.Set(k, v);
    scope->vars["kwargs"] = Value::MakeObject(std::move(kw));
  } else if (!keyword.empty()) {
    return At(node, absl::InvalidArgumentError(absl::StrCat("macro takes no keyword argument '", keyword[0].first, "'")));
  }
  if (BodyUses(node, "varargs")) {
    std::vector<Value> rest;
    for (size_t i = params.size(); i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->vars["varargs"] = Value::Array(std::move(rest));
  } else if (args.positional.size() > params.size()) {
    return At(node, absl::InvalidArgumentError(absl::StrCat("macro takes at most ", params.size(), " argument(s)")));
  }
  for (const Node* p : pending_defaults) {
    ASSIGN_OR_RETURN(scope->vars[p->text], Eval(*p->a, scope));
  }
  return absl::OkStatus();
}

Value Interpreter::MakeMacro(const Node& node, Scope* scope) {
  const bool uses_caller = BodyUses(node, "caller");
  return Value::MakeFunction([this, &node, scope, uses_caller](const CallArgs& args) -> absl::StatusOr<Value> {
    Value caller = std::move(pending_caller_);
    pending_caller_ = Value();
    Scope* parent = scope;
    if (uses_caller) {
      parent = NewScope(scope);
      parent->vars["caller"] = caller;
    }
    Scope* body_scope = NewScope(parent);
    RETURN_IF_ERROR(BindParameters(node, node.list2, args, body_scope));
    std::string out;
    RETURN_IF_ERROR(RenderBlock(node.list, body_scope, &out));
    return Value::String(std::move(out));
  });
}

absl::StatusOr<Value> Interpreter::CallBlock(const Node& node, Scope* scope) {
  Value caller = Value::MakeFunction([this, &node, scope](const CallArgs& args) -> absl::StatusOr<Value> {
    Scope* body_scope = NewScope(scope);
    RETURN_IF_ERROR(BindParameters(node, node.list2, args, body_scope));
    std::string out;
    RETURN_IF_ERROR(RenderBlock(node.list, body_scope, &out));
    return Value::String(std::move(out));
  });
  const Node& call = *node.a;
  ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call.list, scope));
  ASSIGN_OR_RETURN(Value fn, Eval(*call.a, scope));
  if (!fn.is_function()) return At(node, absl::InvalidArgumentError(absl::StrCat("'", call.a->text, "' is not a macro")));
  pending_caller_ = std::move(caller);
  auto result = fn.function()(args);
  pending_caller_ = Value();
  if (!result.ok()) return At(node, result.status());
  return result;
}

absl::StatusOr<CallArgs> Interpreter::EvalArgs(const std::vector<NodePtr>& args, Scope* scope) {
  CallArgs out;
  auto add_keyword = [&](const Node& at, const std::string& k, Value v) -> absl::Status {
    if (out.Keyword(k)) return At(at, absl::InvalidArgumentError(absl::StrCat("keyword argument '", k, "' given twice")));
    out.keyword.emplace_back(k, std::move(v));
    return absl::OkStatus();
  };
  for (const auto& a : args) {
    if (a->kind == NodeKind::kSpread) {
      ASSIGN_OR_RETURN(Value v, Eval(*a->a, scope));
      if (!v.is_array()) return At(*a, absl::InvalidArgumentError(absl::StrCat("cannot unpack a ", v.TypeName())));
      for (const Value& item : v.items()) out.positional.push_back(item);
    } else if (a->kind != NodeKind::kKeyword && a->kind != NodeKind::kKeywordSpread) {
      ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
      out.positional.push_back(std::move(v));
    }
  }
  for (const auto& a : args) {
    if (a->kind == NodeKind::kKeyword) {
      ASSIGN_OR_RETURN(Value v, Eval(*a->a, scope));
      RETURN_IF_ERROR(add_keyword(*a, a->text, std::move(v)));
    } else if (a->kind == NodeKind::kKeywordSpread) {
      ASSIGN_OR_RETURN(Value v, Eval(*a->a, scope));
      if (!v.is_object()) return At(*a, absl::InvalidArgumentError("** needs a dict"));
      for (const auto& [k, item] : v.object().entries()) RETURN_IF_ERROR(add_keyword(*a, k, item));
    }
  }
  return out;
}

absl::StatusOr<Value> Interpreter::EvalMember(const Node& node, Scope* scope) {
  ASSIGN_OR_RETURN(Value object, Eval(*node.a, scope));
  const Node& prop = *node.b;
  if (prop.kind == NodeKind::kSlice) {
    Value start, stop, step;
    if (prop.a) {
      ASSIGN_OR_RETURN(start, Eval(*prop.a, scope));
    }
    if (prop.b) {
      ASSIGN_OR_RETURN(stop, Eval(*prop.b, scope));
    }
    if (prop.c) {
      ASSIGN_OR_RETURN(step, Eval(*prop.c, scope));
    }
    ASSIGN_AT(node, Value v, SliceValue(object, start, stop, step));
    return v;
  }
  Value key;
  if (node.flag) {
    ASSIGN_OR_RETURN(key, Eval(prop, scope));
  } else if (prop.kind == NodeKind::kInteger) {
    key = Value::Int(prop.number);
  } else {
    key = Value::String(prop.text);
  }
  ASSIGN_AT(node, Value v, GetMember(object, key));
  return v;
}

absl::StatusOr<Value> Interpreter::Eval(const Node& node, Scope* scope) {
  DepthGuard guard(&depth_);
  RETURN_IF_ERROR(Step(node));
  switch (node.kind) {
    case NodeKind::kIdentifier: return Lookup(scope, node.text);
    case NodeKind::kInteger: return Value::Int(node.number);
    case NodeKind::kFloat: return Value::Float(node.number);
    case NodeKind::kString: return Value::String(node.text);
    case NodeKind::kArray:
    case NodeKind::kTuple: {
      std::vector<Value> items;
      for (const auto& e : node.list) {
        ASSIGN_OR_RETURN(Value v, Eval(*e, scope));
        items.push_back(std::move(v));
      }
      return Value::Array(std::move(items), node.kind == NodeKind::kTuple);
    }
    case NodeKind::kDict: {
      Object obj;
      for (size_t i = 0; i < node.list.size(); ++i) {
        ASSIGN_OR_RETURN(Value k, Eval(*node.list[i], scope));
        if (!k.is_string()) return At(node, absl::InvalidArgumentError(absl::StrCat("dict keys must be strings, not ", k.TypeName())));
        ASSIGN_OR_RETURN(Value v, Eval(*node.list2[i], scope));
        obj.Set(k.str(), std::move(v));
      }
      return Value::MakeObject(std::move(obj));
    }
    case NodeKind::kBinary: return EvalBinary(node, scope);
    case NodeKind::kUnary: {
      ASSIGN_OR_RETURN(Value v, Eval(*node.a, scope));
      if (node.text == "not") return Value::Bool(!v.Truthy());
      const double sign = node.text == "-" ? -1 : 1;
      if (v.is_number()) return v.is_float() ? Value::Float(sign * v.number()) : Value::Int(sign * v.number());
      if (v.is_bool()) return Value::Int(sign * (v.boolean() ? 1 : 0));
      return At(node, absl::InvalidArgumentError(absl::StrCat("unary ", node.text, " on a ", v.TypeName())));
    }
    case NodeKind::kMember: return EvalMember(node, scope);
    case NodeKind::kCall: {
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.list, scope));
      ASSIGN_OR_RETURN(Value fn, Eval(*node.a, scope));
      if (!fn.is_function()) return At(node, absl::InvalidArgumentError(absl::StrCat("cannot call a ", fn.TypeName())));
      ASSIGN_AT(node, Value v, fn.function()(args));
      return v;
    }
    case NodeKind::kFilter: {
      ASSIGN_OR_RETURN(Value operand, Eval(*node.a, scope));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.list, scope));
      ASSIGN_AT(node, Value v, ApplyFilter(node.text, operand, args, node.flag));
      if (v.is_string() && v.str().size() > limits_.max_output_bytes) return At(node, absl::ResourceExhaustedError("string too large"));
      return v;
    }
    case NodeKind::kTest: {
      ASSIGN_OR_RETURN(Value operand, Eval(*node.a, scope));
      std::vector<Value> args;
      for (const auto& a : node.list) {
        ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
        args.push_back(std::move(v));
      }
      ASSIGN_AT(node, bool r, ApplyTest(node.text, operand, args));
      return Value::Bool(node.flag ? !r : r);
    }
    case NodeKind::kTernary: {
      ASSIGN_OR_RETURN(Value cond, Eval(*node.a, scope));
      return Eval(cond.Truthy() ? *node.b : *node.c, scope);
    }
    case NodeKind::kSelect: {
      ASSIGN_OR_RETURN(Value cond, Eval(*node.b, scope));
      if (!cond.Truthy()) return Value();
      return Eval(*node.a, scope);
    }
    default: return At(node, absl::InvalidArgumentError("this construct is not allowed here"));
  }
}

absl::StatusOr<Value> Interpreter::EvalBinary(const Node& node, Scope* scope) {
  const std::string& op = node.text;
  ASSIGN_OR_RETURN(Value left, Eval(*node.a, scope));
  if (op == "and") {
    if (!left.Truthy()) return left;
    return Eval(*node.b, scope);
  }
  if (op == "or") {
    if (left.Truthy()) return left;
    return Eval(*node.b, scope);
  }
  ASSIGN_OR_RETURN(Value right, Eval(*node.b, scope));
  if (op == "==") return Value::Bool(LooseEquals(left, right));
  if (op == "!=") return Value::Bool(!LooseEquals(left, right));
  auto unknown = [&]() {
    return At(node, absl::InvalidArgumentError(absl::StrCat("operator ", op, " cannot combine a ", left.TypeName(), " and a ", right.TypeName())));
  };
  if (left.is_number() && right.is_number() && op != "~" && op != "**") {
    const double a = left.number(), b = right.number();
    const bool is_float = left.is_float() || right.is_float();
    auto num = [&](double r) { return is_float ? Value::Float(r) : Value::Int(r); };
    if (op == "+") return num(a + b);
    if (op == "-") return num(a - b);
    if (op == "*") return num(a * b);
    if (op == "/") return Value::Float(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return Value::Bool(a < b);
    if (op == ">") return Value::Bool(a > b);
    if (op == "<=") return Value::Bool(a <= b);
    if (op == ">=") return Value::Bool(a >= b);
    return unknown();
  }
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) return Value::Bool(op == "not in");
    if (op == "~" && !left.is_none() && !right.is_none()) {
      return CheckedString((left.is_undefined() ? "" : ToRawString(left)) + (right.is_undefined() ? "" : ToRawString(right)));
    }
    return At(node, absl::InvalidArgumentError(absl::StrCat("operator ", op, " on an undefined value")));
  }
  if (left.is_none() || right.is_none()) return At(node, absl::InvalidArgumentError(absl::StrCat("operator ", op, " on none")));
  if (op == "~") return CheckedString(ToRawString(left) + ToRawString(right));
  if (op == "**" && (left.is_number() || left.is_bool()) && (right.is_number() || right.is_bool())) {
    const double a = left.is_bool() ? (left.boolean() ? 1 : 0) : left.number();
    const double b = right.is_bool() ? (right.boolean() ? 1 : 0) : right.number();
    if (a == 0 && b < 0) return At(node, absl::InvalidArgumentError("0 cannot be raised to a negative power"));
    const double r = std::pow(a, b);
    if (!std::isfinite(r)) return At(node, absl::InvalidArgumentError("power is not a finite real number"));
    return (left.is_float() || right.is_float() || b < 0) ? Value::Float(r) : Value::Int(r);
  }
  if (left.is_array() && right.is_array()) {
    if (op == "+") {
      if (left.items().size() + right.items().size() > limits_.max_items) return At(node, absl::ResourceExhaustedError("list too long"));
      std::vector<Value> items = left.items();
      items.insert(items.end(), right.items().begin(), right.items().end());
      return Value::Array(std::move(items));
    }
  } else if (right.is_array() && (op == "in" || op == "not in")) {
    bool member = false;
    for (const Value& x : right.items()) member = member || StrictEquals(x, left);
    return Value::Bool(op == "in" ? member : !member);
  }
  if ((left.is_string() || right.is_string()) && op == "+") return CheckedString(ToRawString(left) + ToRawString(right));
  if (left.is_string() && right.is_string() && (op == "in" || op == "not in")) {
    const bool found = right.str().find(left.str()) != std::string::npos;
    return Value::Bool(op == "in" ? found : !found);
  }
  if (left.is_string() && right.is_object() && (op == "in" || op == "not in")) {
    const bool found = right.object().Find(left.str()) != nullptr;
    return Value::Bool(op == "in" ? found : !found);
  }
  return unknown();
}

}  // namespace tandem::jinja
