#include "engine/grammar/json_schema.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/json_integer.h"
#include "nlohmann/json.hpp"

namespace tandem::grammar {

namespace {

using Json = nlohmann::ordered_json;

// Caps that keep generation short (a random model cannot grow a number forever) and the
// grammar small; JSON parsers lose precision on longer numbers anyway.
constexpr int32_t kMaxIntegerDigits = 15;
constexpr int32_t kMaxFractionDigits = 15;
constexpr int32_t kMaxExponentDigits = 2;  // 1e99 at most: finite for every JSON parser

// Keywords that describe rather than constrain.
const std::set<std::string>& Annotations() {
  static const std::set<std::string> k = {"title",     "description", "default",  "examples",
                                          "$schema",   "$id",         "$comment", "deprecated",
                                          "readOnly",  "writeOnly",   "$defs",    "definitions"};
  return k;
}

const std::set<std::string>& Implemented() {
  static const std::set<std::string> k = {
      "type",  "properties", "required",  "additionalProperties", "enum",      "const",    "anyOf", "oneOf",
      "allOf", "$ref",       "items",     "minItems",             "maxItems",  "minLength", "maxLength",
      "minimum"};
  return k;
}

// The JSON text of a value as the grammar writes it: compact, UTF-8 as is.
std::string Dump(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::strict); }

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const Json& root, std::string prefix)
      : b_(b), root_(root), prefix_(std::move(prefix)) {}

  absl::StatusOr<Expr> Compile(const Json& s, const std::string& path) {
    // The compiler and the flattening after it recurse once per level: a client's schema nested
    // thousands deep must be refused, not overflow the stack.
    if (depth_ >= kMaxDepth) return Error(path, "nested deeper than " + std::to_string(kMaxDepth) + " schemas");
    ++depth_;
    absl::StatusOr<Expr> e = CompileAtDepth(s, path);
    --depth_;
    return e;
  }

 private:
  absl::StatusOr<Expr> CompileAtDepth(const Json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return b_.Ref(AnyValue());
      return Error(path, "the schema false matches nothing");
    }
    if (!s.is_object()) return Error(path, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (Annotations().count(key) == 0 && Implemented().count(key) == 0) {
        return Error(path, "unsupported keyword \"" + key + "\"");
      }
    }
    if (auto it = s.find("$ref"); it != s.end()) {
      if (Constraining(s) != 1) return Error(path, "$ref beside other constraining keywords is not supported");
      return Ref(*it, path + "/$ref");
    }
    if (auto it = s.find("const"); it != s.end()) return b_.Literal(Dump(*it));
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) return Error(path + "/enum", "must be a non-empty array");
      std::vector<Expr> alts;
      for (const auto& v : *it) alts.push_back(b_.Literal(Dump(v)));
      return b_.Alt(std::move(alts));
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      const std::string p = path + "/" + key;
      if (Constraining(s) != 1) return Error(p, std::string(key) + " beside other constraining keywords is not supported");
      if (!it->is_array() || it->empty()) return Error(p, "must be a non-empty array");
      if (std::string(key) == "allOf" && it->size() != 1) return Error(p, "allOf with more than one schema is not supported");
      if (std::string(key) == "oneOf") {
        if (absl::Status st = CheckDisjoint(*it, p); !st.ok()) return st;
      }
      std::vector<Expr> alts;
      for (size_t i = 0; i < it->size(); ++i) {
        absl::StatusOr<Expr> e = Compile((*it)[i], p + "/" + std::to_string(i));
        if (!e.ok()) return e.status();
        alts.push_back(*e);
      }
      return b_.Alt(std::move(alts));
    }
    absl::StatusOr<std::vector<std::string>> types = Types(s, path);
    if (!types.ok()) return types.status();
    std::vector<Expr> alts;
    for (const std::string& t : *types) {
      absl::StatusOr<Expr> e = CompileType(s, t, path);
      if (!e.ok()) return e.status();
      alts.push_back(*e);
    }
    return b_.Alt(std::move(alts));
  }

  static absl::Status Error(const std::string& path, const std::string& what) {
    return absl::InvalidArgumentError((path.empty() ? "/" : path) + ": " + what);
  }

  // How many keywords of `s` constrain (not annotations).
  static int Constraining(const Json& s) {
    int n = 0;
    for (const auto& [key, value] : s.items()) n += Annotations().count(key) == 0 ? 1 : 0;
    return n;
  }

  // The types `s` allows, from "type" or, without it, from the keywords present.
  absl::StatusOr<std::vector<std::string>> Types(const Json& s, const std::string& path) {
    static const std::set<std::string> kTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};
    auto it = s.find("type");
    if (it == s.end()) {
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
        return std::vector<std::string>{"object"};
      }
      if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) return std::vector<std::string>{"array"};
      if (s.contains("minLength") || s.contains("maxLength")) return std::vector<std::string>{"string"};
      return std::vector<std::string>{"any"};
    }
    std::vector<std::string> out;
    const Json list = it->is_array() ? *it : Json::array({*it});
    for (const auto& t : list) {
      if (!t.is_string() || kTypes.count(t.get<std::string>()) == 0) {
        return Error(path + "/type", "unknown type " + Dump(t));
      }
      out.push_back(t.get<std::string>());
    }
    if (out.empty()) return Error(path + "/type", "no type given");
    return out;
  }

  absl::StatusOr<Expr> CompileType(const Json& s, const std::string& t, const std::string& path) {
    if (t == "any") return b_.Ref(AnyValue());
    if (t == "object") return CompileObject(s, path);
    if (t == "array") return CompileArray(s, path);
    if (t == "string") return CompileString(s, path);
    if (t == "number" || t == "integer") return CompileNumber(s, t == "integer", path);
    if (t == "boolean") return b_.Alt({b_.Literal("true"), b_.Literal("false")});
    return b_.Literal("null");
  }

  // A count range such as minLength / maxLength: [lo, hi], hi -1 when absent (unbounded).
  absl::StatusOr<std::pair<int32_t, int32_t>> Range(const Json& s, const char* min_key, const char* max_key,
                                                    const std::string& path) {
    int32_t bound[2] = {0, -1};
    const char* keys[2] = {min_key, max_key};
    for (int i = 0; i < 2; ++i) {
      auto it = s.find(keys[i]);
      if (it == s.end()) continue;
      const std::optional<int64_t> v = JsonInteger(*it, 0, GrammarBuilder::kMaxRepeat);
      if (!v) {
        return Error(path + "/" + keys[i], "must be an integer in [0, " + std::to_string(GrammarBuilder::kMaxRepeat) + "]");
      }
      bound[i] = static_cast<int32_t>(*v);
    }
    if (bound[1] >= 0 && bound[1] < bound[0]) return Error(path, std::string(max_key) + " is less than " + min_key);
    return std::make_pair(bound[0], bound[1]);
  }

  absl::StatusOr<Expr> CompileString(const Json& s, const std::string& path) {
    absl::StatusOr<std::pair<int32_t, int32_t>> range = Range(s, "minLength", "maxLength", path);
    if (!range.ok()) return range.status();
    const auto [lo, hi] = *range;
    if (lo == 0 && hi < 0) return b_.Ref(String());
    return b_.Seq({b_.Literal("\""), b_.Repeat(JsonStringChar(b_), lo, hi), b_.Literal("\"")});
  }

  absl::StatusOr<Expr> CompileArray(const Json& s, const std::string& path) {
    absl::StatusOr<std::pair<int32_t, int32_t>> range = Range(s, "minItems", "maxItems", path);
    if (!range.ok()) return range.status();
    const auto [lo, hi] = *range;
    Expr item;
    if (auto it = s.find("items"); it != s.end()) {
      absl::StatusOr<Expr> e = Compile(*it, path + "/items");
      if (!e.ok()) return e.status();
      const RuleId r = b_.AddRule(prefix_ + ".item");
      if (absl::Status st = b_.Define(r, *e); !st.ok()) return st;
      item = b_.Ref(r);
    } else {
      item = b_.Ref(AnyValue());
    }
    if (hi == 0) return b_.Literal("[]");
    const Expr more = b_.Seq({Separator(), item});
    const Expr body = b_.Seq({item, b_.Repeat(more, std::max(lo - 1, 0), hi < 0 ? -1 : hi - 1)});
    return b_.Seq({b_.Literal("["), lo == 0 ? b_.Optional(body) : body, b_.Literal("]")});
  }

  absl::StatusOr<Expr> CompileObject(const Json& s, const std::string& path) {
    std::vector<std::pair<std::string, Expr>> members;  // in the schema's order
    std::vector<bool> required;
    std::set<std::string> names;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) return Error(path + "/properties", "must be an object");
      // The optional members nest one alternative per member (first(i) below), and the
      // flattening recurses through them.
      if (it->size() > kMaxProperties) {
        return Error(path + "/properties", "more than " + std::to_string(kMaxProperties) + " properties");
      }
      for (const auto& [name, sub] : it->items()) {
        absl::StatusOr<Expr> e = Compile(sub, path + "/properties/" + name);
        if (!e.ok()) return e.status();
        members.push_back({name, b_.Seq({b_.Literal(Dump(Json(name)) + ":"), Space(), *e})});
        names.insert(name);
      }
    }
    std::set<std::string> req;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) return Error(path + "/required", "must be an array of property names");
      for (const auto& n : *it) {
        if (!n.is_string()) return Error(path + "/required", "must be an array of property names");
        if (names.count(n.get<std::string>()) == 0) {
          return Error(path + "/required", "required property \"" + n.get<std::string>() + "\" is not in properties");
        }
        req.insert(n.get<std::string>());
      }
    }
    for (const auto& m : members) required.push_back(req.count(m.first) != 0);
    const auto additional = s.find("additionalProperties");
    if (members.empty()) {
      if (additional != s.end() && additional->is_boolean() && !additional->get<bool>()) return b_.Literal("{}");
      // A map: any keys, values of the additionalProperties schema (any JSON when absent).
      Expr value = b_.Ref(AnyValue());
      if (additional != s.end() && !additional->is_boolean()) {
        absl::StatusOr<Expr> e = Compile(*additional, path + "/additionalProperties");
        if (!e.ok()) return e.status();
        value = *e;
      }
      const Expr member = b_.Seq({b_.Ref(String()), b_.Literal(":"), Space(), value});
      return b_.Seq({b_.Literal("{"), b_.Optional(b_.Seq({member, b_.Star(b_.Seq({Separator(), member}))})),
                     b_.Literal("}")});
    }
    if (additional != s.end() && !additional->is_boolean()) {
      return Error(path + "/additionalProperties", "a schema beside properties is not supported (use false)");
    }
    // Members in the schema's order, optional ones possibly left out; a comma before every
    // member but the first present one. rest(i): members i.. after one was written;
    // first(i): members i.. when none was written yet.
    const size_t n = members.size();
    auto rest = [&](size_t i) {
      std::vector<Expr> items;
      for (size_t j = i; j < n; ++j) {
        const Expr m = b_.Seq({Separator(), members[j].second});
        items.push_back(required[j] ? m : b_.Optional(m));
      }
      return items.empty() ? b_.Empty() : b_.Seq(std::move(items));
    };
    Expr first = b_.Empty();
    for (size_t i = n; i-- > 0;) {
      const Expr with = b_.Seq({members[i].second, rest(i + 1)});
      first = required[i] ? with : b_.Alt({with, first});
    }
    return b_.Seq({b_.Literal("{"), first, b_.Literal("}")});
  }

  // oneOf is compiled as anyOf, which is right only when no instance can match two members:
  // accepted when the members' types are disjoint, or all are closed objects (no additional
  // properties) each requiring a property the others do not have.
  absl::Status CheckDisjoint(const Json& members, const std::string& path) {
    std::vector<std::set<std::string>> types;
    bool closed_objects = true;
    for (const auto& m : members) {
      std::set<std::string> t;
      if (m.is_object() && m.contains("type")) {
        const Json list = m["type"].is_array() ? m["type"] : Json::array({m["type"]});
        for (const auto& x : list) {
          if (x.is_string()) t.insert(x.get<std::string>() == "integer" ? "number" : x.get<std::string>());
        }
      } else if (m.is_object() && (m.contains("const") || m.contains("enum"))) {
        t.insert("literal:" + Dump(m.contains("const") ? m["const"] : m["enum"]));
      } else {
        t.insert("any");
      }
      types.push_back(t);
      closed_objects = closed_objects && m.is_object() && m.value("type", Json()) == "object" &&
                       m.value("additionalProperties", Json(true)) == Json(false);
    }
    bool disjoint = true;
    for (size_t i = 0; i < types.size() && disjoint; ++i) {
      for (size_t j = i + 1; j < types.size() && disjoint; ++j) {
        for (const auto& t : types[i]) disjoint = disjoint && t != "any" && types[j].count(t) == 0 && types[j].count("any") == 0;
      }
    }
    if (disjoint) return absl::OkStatus();
    if (closed_objects) {
      for (size_t i = 0; i < members.size(); ++i) {
        for (size_t j = 0; j < members.size(); ++j) {
          if (i == j) continue;
          bool separated = false;
          for (const auto& r : members[i].value("required", Json::array())) {
            if (!members[j].value("properties", Json::object()).contains(r)) separated = true;
          }
          if (!separated) return Error(path, "oneOf members " + std::to_string(i) + " and " + std::to_string(j) +
                                                 " can match the same object; use anyOf");
        }
      }
      return absl::OkStatus();
    }
    return Error(path, "oneOf members can match the same value (use anyOf, or members of different types)");
  }

  absl::StatusOr<Expr> Ref(const Json& ref, const std::string& path) {
    if (!ref.is_string()) return Error(path, "must be a string");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return b_.Ref(it->second);
    if (target.empty() || target[0] != '#') return Error(path, "only local references (\"#...\") are supported");
    // Resolve the JSON pointer after '#' (with ~1 = '/' and ~0 = '~').
    const Json* node = &root_;
    std::string pointer = target.substr(1);
    size_t pos = 0;
    while (pos < pointer.size()) {
      if (pointer[pos] != '/') return Error(path, "\"" + target + "\" is not a JSON pointer");
      size_t end = pointer.find('/', pos + 1);
      if (end == std::string::npos) end = pointer.size();
      std::string token = pointer.substr(pos + 1, end - pos - 1);
      for (size_t k; (k = token.find("~1")) != std::string::npos;) token.replace(k, 2, "/");
      for (size_t k; (k = token.find("~0")) != std::string::npos;) token.replace(k, 2, "~");
      if (!node->is_object() || !node->contains(token)) return Error(path, "\"" + target + "\" does not resolve");
      node = &(*node)[token];
      pos = end;
    }
    // Declared before it is compiled, so that a recursive schema refers to itself.
    const RuleId r = b_.AddRule(prefix_ + ".ref");
    refs_[target] = r;
    absl::StatusOr<Expr> body = Compile(*node, target.substr(1));
    if (!body.ok()) return body.status();
    if (absl::Status st = b_.Define(r, *body); !st.ok()) return st;
    return b_.Ref(r);
  }

  Expr Space() { return b_.Optional(b_.Literal(" ")); }
  Expr Separator() { return b_.Seq({b_.Literal(","), Space()}); }

  RuleId String() {
    if (string_ >= 0) return string_;
    string_ = b_.AddRule(prefix_ + ".string");
    (void)b_.Define(string_, b_.Seq({b_.Literal("\""), b_.Star(JsonStringChar(b_)), b_.Literal("\"")}));
    return string_;
  }
  // A number or integer; `minimum` 0 (no sign) or, for integers, 1 (no sign, no zero) are the
  // bounds a grammar states exactly without spelling out digit ranges; others are refused.
  absl::StatusOr<Expr> CompileNumber(const Json& s, bool integer, const std::string& path) {
    auto it = s.find("minimum");
    if (it == s.end()) return b_.Ref(integer ? Integer() : Number());
    const double m = it->is_number() ? it->get<double>() : -1.0;
    if (m == 0.0) return integer ? IntegerPart() : NumberBody();
    if (integer && m == 1.0) {
      return b_.Seq({b_.Bytes({{'1', '9'}}), b_.Repeat(b_.Bytes({{'0', '9'}}), 0, kMaxIntegerDigits - 1)});
    }
    return Error(path + "/minimum", integer ? "only minimum 0 or 1 is supported for integers"
                                            : "only minimum 0 is supported for numbers");
  }
  RuleId Integer() {
    if (integer_ >= 0) return integer_;
    integer_ = b_.AddRule(prefix_ + ".integer");
    (void)b_.Define(integer_, b_.Seq({b_.Optional(b_.Literal("-")), IntegerPart()}));
    return integer_;
  }
  Expr IntegerPart() {
    return b_.Alt({b_.Literal("0"), b_.Seq({b_.Bytes({{'1', '9'}}), b_.Repeat(b_.Bytes({{'0', '9'}}), 0, kMaxIntegerDigits - 1)})});
  }
  RuleId Number() {
    if (number_ >= 0) return number_;
    number_ = b_.AddRule(prefix_ + ".number");
    (void)b_.Define(number_, b_.Seq({b_.Optional(b_.Literal("-")), NumberBody()}));
    return number_;
  }
  // A number without its sign.
  Expr NumberBody() {
    const Expr digit = b_.Bytes({{'0', '9'}});
    const Expr fraction = b_.Seq({b_.Literal("."), b_.Repeat(digit, 1, kMaxFractionDigits)});
    const Expr exponent = b_.Seq({b_.Bytes({{'e', 'e'}, {'E', 'E'}}), b_.Optional(b_.Bytes({{'+', '+'}, {'-', '-'}})),
                                  b_.Repeat(digit, 1, kMaxExponentDigits)});
    return b_.Seq({IntegerPart(), b_.Optional(fraction), b_.Optional(exponent)});
  }

 public:
  // Any JSON value, nested to any depth.
  RuleId AnyValue() {
    if (any_ >= 0) return any_;
    any_ = b_.AddRule(prefix_ + ".value");
    const Expr value = b_.Ref(any_);
    const Expr member = b_.Seq({b_.Ref(String()), b_.Literal(":"), Space(), value});
    const Expr object = b_.Seq({b_.Literal("{"), b_.Optional(b_.Seq({member, b_.Star(b_.Seq({Separator(), member}))})),
                                b_.Literal("}")});
    const Expr array = b_.Seq({b_.Literal("["), b_.Optional(b_.Seq({value, b_.Star(b_.Seq({Separator(), value}))})),
                               b_.Literal("]")});
    (void)b_.Define(any_, b_.Alt({object, array, b_.Ref(String()), b_.Ref(Number()), b_.Literal("true"),
                                  b_.Literal("false"), b_.Literal("null")}));
    return any_;
  }

 private:
  static constexpr int kMaxDepth = 64;
  static constexpr size_t kMaxProperties = 256;
  int depth_ = 0;
  GrammarBuilder& b_;
  const Json& root_;
  const std::string prefix_;
  std::map<std::string, RuleId> refs_;
  RuleId string_ = -1, integer_ = -1, number_ = -1, any_ = -1;
};

}  // namespace

// An expression, not a rule: a repetition of it is flattened into rules that hold the
// characters themselves, so that a token of several characters stays inside one rule (and
// string_masks.h recognises those rules).
Expr JsonStringChar(GrammarBuilder& b) {
  const Expr hex = b.Bytes({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
  return b.Alt({b.Chars({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, /*negated=*/true),
                b.Seq({b.Literal("\\"), b.Bytes({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'},
                                                 {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}})}),
                b.Seq({b.Literal("\\u"), b.Repeat(hex, 4, 4)})});
}

absl::StatusOr<RuleId> AddJsonSchema(const Json& schema, GrammarBuilder& builder, std::string_view rule_name) {
  const RuleId rule = builder.AddRule(rule_name);
  SchemaCompiler c(builder, schema, builder.RuleName(rule));
  absl::StatusOr<Expr> body = c.Compile(schema, "");
  if (!body.ok()) return body.status();
  if (absl::Status st = builder.Define(rule, *body); !st.ok()) return st;
  return rule;
}

RuleId AddAnyJson(GrammarBuilder& builder, std::string_view rule_name) {
  const RuleId rule = builder.AddRule(rule_name);
  static const Json kEmpty = Json::object();
  SchemaCompiler c(builder, kEmpty, builder.RuleName(rule));
  (void)builder.Define(rule, builder.Ref(c.AnyValue()));
  return rule;
}

RuleId AddAnyJsonObject(GrammarBuilder& builder, std::string_view rule_name) {
  const RuleId rule = builder.AddRule(rule_name);
  static const Json kObject = Json{{"type", "object"}};
  SchemaCompiler c(builder, kObject, builder.RuleName(rule));
  (void)builder.Define(rule, *c.Compile(kObject, ""));
  return rule;
}

}  // namespace tandem::grammar
