#include "engine/tokenizer/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "engine/tokenizer/jinja/js_string.h"
#include "engine/tokenizer/jinja/json.h"
#include "engine/tokenizer/jinja/methods.h"

namespace tandem::jinja {
namespace {

constexpr std::string_view kFilters[] = {
    "abs",   "capitalize", "count",   "d",        "default", "dictsort", "e",       "escape",     "first",
    "float", "indent",     "int",     "items",    "join",    "last",     "length",  "list",       "lower",
    "map",   "reject",     "rejectattr", "replace", "reverse", "round",  "safe",    "select",     "selectattr",
    "sort",  "split",      "string",  "title",    "tojson",  "trim",     "unique",  "upper",      "wordcount",
    "bool",  "keys",       "values",
};

constexpr std::string_view kTests[] = {
    "boolean", "callable", "defined", "divisibleby", "eq",     "equalto", "even",   "false", "float",
    "ge",      "gt",       "in",      "integer",     "iterable", "le",    "lower",  "lt",    "mapping",
    "ne",      "none",     "number",  "odd",         "sameas", "sequence", "string", "true", "undefined",
    "upper",   "==",       "!=",      "<",           "<=",     ">",       ">=",
};

absl::Status FilterError(std::string_view name, const Value& operand) {
  return absl::InvalidArgumentError(absl::StrCat("filter '", std::string(name), "' cannot be applied to a ", operand.TypeName()));
}

const Value* Arg(const CallArgs& args, size_t i, std::string_view name) { return args.Get(i, name); }

bool BoolArg(const CallArgs& args, size_t i, std::string_view name, bool def) {
  const Value* v = Arg(args, i, name);
  return v ? v->Truthy() : def;
}

// Array.prototype.join of the raw values: none and undefined join as "".
absl::StatusOr<std::string> JoinRaw(const std::vector<Value>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    if (!items[i].is_none() && !items[i].is_undefined()) out += ToRawString(items[i]);
    if (out.size() > kMaxStringBytes) return absl::ResourceExhaustedError("join: result too large");
  }
  return out;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

absl::StatusOr<Value> CallMethod(const Value& object, std::string_view method, const CallArgs& args) {
  ASSIGN_OR_RETURN(Value fn, GetMember(object, Value::String(std::string(method))));
  if (!fn.is_function()) return absl::InvalidArgumentError(absl::StrCat("no method ", std::string(method)));
  return fn.function()(args);
}

absl::StatusOr<Value> Sort(const Value& operand, const CallArgs& args) {
  const bool reverse = BoolArg(args, 0, "reverse", false);
  const bool case_sensitive = BoolArg(args, 1, "case_sensitive", false);
  const Value* attribute = Arg(args, 2, "attribute");
  std::string path;
  if (attribute && !attribute->is_none()) {
    if (!attribute->is_string() && !attribute->is_int()) return absl::InvalidArgumentError("sort: attribute must be a string or integer");
    path = attribute->is_string() ? attribute->str() : JsNumberToString(attribute->number());
  }
  std::vector<Value> items = operand.items();
  RETURN_IF_ERROR(SortValues(
      &items, [&](const Value& v) { return path.empty() ? v : AttributePath(v, path); }, case_sensitive, reverse));
  return Value::Array(std::move(items));
}

// selectattr / rejectattr as the reference does them: items must be dicts; an item is selected
// when its attribute exists and passes the test (truthiness without one).
absl::StatusOr<Value> SelectAttr(std::string_view name, const Value& operand, const CallArgs& args, bool select) {
  for (const Value& item : operand.items()) {
    if (!item.is_object() && !item.is_namespace()) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(name), " can only be applied to a list of dicts"));
    }
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": the attribute name must be a string"));
  }
  const std::string& attr = args.positional[0].str();
  std::string test;
  if (args.positional.size() > 1) {
    if (!args.positional[1].is_string()) return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": the test name must be a string"));
    test = args.positional[1].str();
    if (!IsKnownTest(test)) return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": unknown test '", test, "'"));
  }
  std::vector<Value> test_args(args.positional.begin() + std::min<size_t>(2, args.positional.size()), args.positional.end());
  std::vector<Value> out;
  for (const Value& item : operand.items()) {
    const Value* a = item.object().Find(attr);
    bool result = false;
    if (a) {
      if (test.empty()) {
        result = a->Truthy();
      } else {
        ASSIGN_OR_RETURN(result, ApplyTest(test, *a, test_args));
      }
    }
    if (result == select) out.push_back(item);
  }
  return Value::Array(std::move(out));
}

// select / reject (Python Jinja): items passing the named test (truthiness without one).
absl::StatusOr<Value> Select(const Value& operand, const CallArgs& args, bool select) {
  std::string test;
  if (!args.positional.empty()) {
    if (!args.positional[0].is_string()) return absl::InvalidArgumentError("select: the test name must be a string");
    test = args.positional[0].str();
    if (!IsKnownTest(test)) return absl::InvalidArgumentError(absl::StrCat("select: unknown test '", test, "'"));
  }
  std::vector<Value> test_args(args.positional.begin() + std::min<size_t>(1, args.positional.size()), args.positional.end());
  std::vector<Value> out;
  for (const Value& item : operand.items()) {
    bool result = item.Truthy();
    if (!test.empty()) {
      ASSIGN_OR_RETURN(result, ApplyTest(test, item, test_args));
    }
    if (result == select) out.push_back(item);
  }
  return Value::Array(std::move(out));
}

absl::StatusOr<Value> Map(const Value& operand, const CallArgs& args) {
  std::vector<Value> out;
  if (const Value* attr = args.Keyword("attribute")) {
    if (!attr->is_string()) return absl::InvalidArgumentError("map: attribute must be a string");
    const Value* def = args.Keyword("default");
    for (const Value& item : operand.items()) {
      if (!item.is_object() && !item.is_namespace()) return absl::InvalidArgumentError("map: items must be dicts");
      Value v = AttributePath(item, attr->str());
      out.push_back(v.is_undefined() && def ? *def : v);
    }
    return Value::Array(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return absl::InvalidArgumentError("map needs attribute=... or a filter name");
  }
  const std::string name = args.positional[0].str();
  if (!IsKnownFilter(name)) return absl::InvalidArgumentError(absl::StrCat("map: unknown filter '", name, "'"));
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : operand.items()) {
    ASSIGN_OR_RETURN(Value v, ApplyFilter(name, item, rest, !rest.positional.empty() || !rest.keyword.empty()));
    out.push_back(std::move(v));
  }
  return Value::Array(std::move(out));
}

absl::StatusOr<Value> ToJsonFilter(const Value& operand, const CallArgs& args) {
  JsonOptions o;
  if (const Value* indent = args.Keyword("indent"); indent && !indent->is_none()) {
    if (!indent->is_int()) return absl::InvalidArgumentError("tojson: indent must be an integer");
    if (indent->number() < 0 || indent->number() > 64) return absl::InvalidArgumentError("tojson: indent out of range");
    o.indent = static_cast<int>(indent->number());
  }
  if (const Value* v = args.Keyword("ensure_ascii")) {
    if (!v->is_bool()) return absl::InvalidArgumentError("tojson: ensure_ascii must be a boolean");
    o.ensure_ascii = v->boolean();
  }
  if (const Value* v = args.Keyword("sort_keys")) {
    if (!v->is_bool()) return absl::InvalidArgumentError("tojson: sort_keys must be a boolean");
    o.sort_keys = v->boolean();
  }
  if (const Value* v = args.Keyword("separators"); v && !v->is_none()) {
    if (!v->is_array() || v->items().size() != 2 || !v->items()[0].is_string() || !v->items()[1].is_string()) {
      return absl::InvalidArgumentError("tojson: separators must be a pair of strings");
    }
    o.separators = std::make_pair(v->items()[0].str(), v->items()[1].str());
  }
  ASSIGN_OR_RETURN(std::string s, ToJson(operand, o));
  return Value::String(std::move(s));
}

absl::StatusOr<Value> Indent(const Value& operand, const CallArgs& args) {
  const Value* width = Arg(args, 0, "width");
  std::string pad = "    ";
  if (width) {
    if (width->is_string()) {
      pad = width->str();
    } else if (width->is_int()) {
      pad = std::string(static_cast<size_t>(std::clamp(width->number(), 0.0, 256.0)), ' ');
    } else {
      return absl::InvalidArgumentError("indent: width must be an integer or a string");
    }
  }
  const bool first = BoolArg(args, 1, "first", false);
  const bool blank = BoolArg(args, 2, "blank", false);
  std::vector<std::string> lines = absl::StrSplit(operand.str(), '\n');
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    if ((!first && i == 0) || (!blank && lines[i].empty())) {
      out += lines[i];
    } else {
      out += pad + lines[i];
    }
    if (out.size() > kMaxStringBytes) return absl::ResourceExhaustedError("indent: result too large");
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Round(const Value& operand, const CallArgs& args) {
  const Value* p = Arg(args, 0, "precision");
  const Value* m = Arg(args, 1, "method");
  const int precision = p && p->is_number() ? static_cast<int>(std::clamp(p->number(), -20.0, 20.0)) : 0;
  const std::string method = m && m->is_string() ? m->str() : "common";
  const double scale = std::pow(10.0, precision);
  const double x = operand.number() * scale;
  double r;
  if (method == "common") {
    r = std::round(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else {
    return absl::InvalidArgumentError("round: method must be common, floor or ceil");
  }
  return Value::Float(r / scale);
}

size_t WordCount(const std::string& s) {
  size_t n = 0;
  bool in_word = false;
  for (char32_t cp : DecodeUtf8(s)) {
    const bool word = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == '_' ||
                      (cp >= 0x80 && !IsJsSpace(cp));
    if (word && !in_word) ++n;
    in_word = word;
  }
  return n;
}

absl::StatusOr<Value> IntOrFloat(bool want_int, const Value& operand, const CallArgs& args) {
  const Value* def = Arg(args, 0, "default");
  const Value fallback = def ? *def : (want_int ? Value::Int(0) : Value::Float(0));
  if (operand.is_string()) {
    auto v = want_int ? JsParseInt(operand.str()) : JsParseFloat(operand.str());
    if (!v) return fallback;
    return want_int ? Value::Int(*v) : Value::Float(*v);
  }
  if (operand.is_number()) return want_int ? Value::Int(std::trunc(operand.number()) + 0.0) : Value::Float(operand.number());
  if (operand.is_bool()) return want_int ? Value::Int(operand.boolean() ? 1 : 0) : Value::Float(operand.boolean() ? 1 : 0);
  return FilterError(want_int ? "int" : "float", operand);
}

}  // namespace

bool IsKnownFilter(std::string_view name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}

bool IsKnownTest(std::string_view name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

absl::StatusOr<int> CompareValues(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_none() || b.is_none()) {
    if (a.is_none() && b.is_none()) return 0;
    return absl::InvalidArgumentError(absl::StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()));
  }
  if (a.is_undefined() || b.is_undefined()) {
    if (a.is_undefined() && b.is_undefined()) return 0;
    return absl::InvalidArgumentError(absl::StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()));
  }
  const bool a_num = a.is_number() || a.is_bool(), b_num = b.is_number() || b.is_bool();
  if (a_num && b_num) {
    const double x = a.is_bool() ? (a.boolean() ? 1 : 0) : a.number();
    const double y = b.is_bool() ? (b.boolean() ? 1 : 0) : b.number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const std::string x = case_sensitive ? a.str() : JsToLower(a.str());
    const std::string y = case_sensitive ? b.str() : JsToLower(b.str());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()));
}

absl::Status SortValues(std::vector<Value>* items, const std::function<Value(const Value&)>& key, bool case_sensitive,
                        bool reverse) {
  absl::Status error;
  std::stable_sort(items->begin(), items->end(), [&](const Value& a, const Value& b) {
    if (!error.ok()) return false;
    auto c = CompareValues(key(a), key(b), case_sensitive);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  return error;
}

Value AttributePath(const Value& item, std::string_view path) {
  Value v = item;
  for (absl::string_view part : absl::StrSplit(AsAbsl(path), '.')) {
    if (v.is_object() || v.is_namespace()) {
      const Value* f = v.object().Find(AsStd(part));
      if (!f) return Value();
      v = *f;
    } else if (v.is_array()) {
      auto idx = JsParseInt(AsStd(part));
      if (!idx || *idx < 0 || *idx >= static_cast<double>(v.items().size())) return Value();
      v = v.items()[static_cast<size_t>(*idx)];
    } else {
      return Value();
    }
  }
  return v;
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const std::vector<Value>& args) {
  const Value arg = args.empty() ? Value() : args[0];
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.boolean();
  if (name == "false") return v.is_bool() && !v.boolean();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "callable") return v.is_function();
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return (v.is_array() && !v.is_tuple()) || v.is_string();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string();
  if (name == "lower") return v.is_string() && v.str() == JsToLower(v.str());
  if (name == "upper") return v.is_string() && v.str() == JsToUpper(v.str());
  if (name == "odd" || name == "even") {
    if (!v.is_int()) return absl::InvalidArgumentError(absl::StrCat("test '", std::string(name), "' needs an integer, not a ", v.TypeName()));
    const bool odd = std::fmod(v.number(), 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "divisibleby") {
    if (!v.is_number() || !arg.is_number() || arg.number() == 0) return absl::InvalidArgumentError("divisibleby needs two numbers");
    return std::fmod(v.number(), arg.number()) == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return StrictEquals(v, arg);
  if (name == "ne" || name == "!=") return !StrictEquals(v, arg);
  if (name == "sameas") return StrictEquals(v, arg);
  if (name == "in") {
    if (arg.is_array()) {
      for (const Value& x : arg.items()) {
        if (StrictEquals(x, v)) return true;
      }
      return false;
    }
    if (arg.is_string() && v.is_string()) return arg.str().find(v.str()) != std::string::npos;
    if (arg.is_object() && v.is_string()) return arg.object().Find(v.str()) != nullptr;
    return absl::InvalidArgumentError(absl::StrCat("test 'in' cannot look into a ", arg.TypeName()));
  }
  if (name == "lt" || name == "<" || name == "le" || name == "<=" || name == "gt" || name == ">" || name == "ge" || name == ">=") {
    if (!v.is_number() || !arg.is_number()) return absl::InvalidArgumentError(absl::StrCat("test '", std::string(name), "' needs two numbers"));
    const double x = v.number(), y = arg.number();
    if (name == "lt" || name == "<") return x < y;
    if (name == "le" || name == "<=") return x <= y;
    if (name == "gt" || name == ">") return x > y;
    return x >= y;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown test '", std::string(name), "'"));
}

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& v, const CallArgs& args, bool with_parens) {
  if (name == "d") name = "default";
  if (name == "e") name = "escape";
  if (name == "count") name = "length";
  if (name == "safe") return v;
  if (name == "tojson") return ToJsonFilter(v, args);
  if (name == "default") {
    const Value* def = Arg(args, 0, "default_value");
    const bool boolean = BoolArg(args, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.Truthy())) return def ? *def : Value::String("");
    return v;
  }
  if (name == "string") return v.is_undefined() ? Value::String("") : Value::String(ToOutputString(v));
  if (name == "escape") return Value::String(HtmlEscape(v.is_string() ? v.str() : ToOutputString(v)));
  if (name == "bool") return Value::Bool(v.Truthy());
  if (name == "int" || name == "float") return IntOrFloat(name == "int", v, args);
  if (v.is_array()) {
    const auto& items = v.items();
    if (name == "list") return Value::Array(items);
    if (name == "first") return items.empty() ? Value() : items.front();
    if (name == "last") return items.empty() ? Value() : items.back();
    if (name == "length") return Value::Int(static_cast<double>(items.size()));
    if (name == "reverse") return Value::Array(std::vector<Value>(items.rbegin(), items.rend()));
    if (name == "sort") return Sort(v, args);
    if (name == "join") {
      const Value* sep = Arg(args, 0, "separator");
      if (sep && !sep->is_string()) return absl::InvalidArgumentError("join: separator must be a string");
      if (const Value* attr = Arg(args, 1, "attribute")) {
        std::vector<Value> picked;
        for (const Value& item : items) picked.push_back(AttributePath(item, ToRawString(*attr)));
        ASSIGN_OR_RETURN(std::string joined, JoinRaw(picked, sep ? sep->str() : ""));
        return Value::String(std::move(joined));
      }
      ASSIGN_OR_RETURN(std::string joined, JoinRaw(items, sep ? sep->str() : ""));
      return Value::String(std::move(joined));
    }
    if (name == "unique") {
      std::vector<Value> out;
      for (const Value& item : items) {
        bool seen = false;
        for (const Value& o : out) seen = seen || StrictEquals(o, item);
        if (!seen) out.push_back(item);
      }
      return Value::Array(std::move(out));
    }
    if (name == "selectattr" || name == "rejectattr") return SelectAttr(name, v, args, name == "selectattr");
    if (name == "select" || name == "reject") return Select(v, args, name == "select");
    if (name == "map") return Map(v, args);
    return FilterError(name, v);
  }
  if (v.is_string()) {
    const std::string& s = v.str();
    if (name == "length") return Value::Int(static_cast<double>(JsLength(s)));
    if (name == "upper") return Value::String(JsToUpper(s));
    if (name == "lower") return Value::String(JsToLower(s));
    if (name == "title") return Value::String(JsTitle(s));
    if (name == "capitalize") return Value::String(JsCapitalize(s));
    if (name == "trim") return Value::String(JsTrim(s));
    if (name == "indent") return Indent(v, args);
    if (name == "replace") return CallMethod(v, "replace", args);
    if (name == "split") return CallMethod(v, "split", args);
    if (name == "wordcount") return Value::Int(static_cast<double>(WordCount(s)));
    if (name == "join") {
      const Value* sep = Arg(args, 0, "separator");
      if (sep && !sep->is_string()) return absl::InvalidArgumentError("join: separator must be a string");
      if (!with_parens) return v;
      ASSIGN_OR_RETURN(std::string joined, JoinRaw(Characters(s), sep ? sep->str() : ""));
      return Value::String(std::move(joined));
    }
    if (name == "list") return Value::Array(Characters(s));
    if (name == "first" || name == "last") {
      auto chars = Characters(s);
      if (chars.empty()) return Value();
      return name == "first" ? chars.front() : chars.back();
    }
    if (name == "reverse") {
      auto chars = Characters(s);
      std::reverse(chars.begin(), chars.end());
      ASSIGN_OR_RETURN(std::string joined, JoinRaw(chars, ""));
      return Value::String(std::move(joined));
    }
    return FilterError(name, v);
  }
  if (v.is_number()) {
    if (name == "abs") return v.is_int() ? Value::Int(std::fabs(v.number())) : Value::Float(std::fabs(v.number()));
    if (name == "round") return Round(v, args);
    return FilterError(name, v);
  }
  if (v.is_object()) {
    if (name == "items" || name == "keys" || name == "values" || name == "dictsort") return CallMethod(v, name, args);
    if (name == "length") return Value::Int(static_cast<double>(v.object().size()));
    if (name == "list") return CallMethod(v, "keys", args);
    return FilterError(name, v);
  }
  if (v.is_undefined() && name == "items") return Value::Array({});
  return FilterError(name, v);
}

}  // namespace tandem::jinja
