#include "engine/tokenizer/jinja/methods.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/tokenizer/jinja/filters.h"
#include "engine/tokenizer/jinja/js_string.h"

namespace tandem::jinja {
namespace {

absl::StatusOr<bool> AffixMatch(const std::string& s, const CallArgs& args, bool prefix, std::string_view name) {
  if (args.positional.empty()) return absl::InvalidArgumentError(absl::StrCat(std::string(name), "() needs an argument"));
  const Value& p = args.positional[0];
  auto match = [&](const std::string& a) {
    return a.size() <= s.size() && (prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0);
  };
  if (p.is_string()) return match(p.str());
  if (p.is_array()) {
    for (const Value& item : p.items()) {
      if (!item.is_string()) return absl::InvalidArgumentError(absl::StrCat(std::string(name), "(): tuple items must be strings"));
      if (match(item.str())) return true;
    }
    return false;
  }
  return absl::InvalidArgumentError(absl::StrCat(std::string(name), "() needs a string or a tuple of strings"));
}

// Python's str.split(sep=None, maxsplit=-1), as the reference implements it.
absl::StatusOr<Value> Split(const std::string& s, const CallArgs& args) {
  const Value* sep = args.Get(0, "sep");
  const Value* max = args.Get(1, "maxsplit");
  if (sep && !sep->is_string() && !sep->is_none()) return absl::InvalidArgumentError("split(): sep must be a string or none");
  if (max && !max->is_int()) return absl::InvalidArgumentError("split(): maxsplit must be an integer");
  const double maxsplit = max ? max->number() : -1;
  std::vector<Value> out;
  if (!sep || sep->is_none()) {
    const std::string text = JsTrimStart(s);
    size_t pos = 0;
    while (pos < text.size()) {
      while (size_t n = JsSpaceAt(text, pos)) pos += n;
      if (pos >= text.size()) break;
      size_t end = pos;
      while (end < text.size() && JsSpaceAt(text, end) == 0) ++end;
      if (maxsplit >= 0 && static_cast<double>(out.size()) >= maxsplit) {
        out.push_back(Value::String(text.substr(pos)));
        break;
      }
      out.push_back(Value::String(text.substr(pos, end - pos)));
      pos = end;
    }
    return Value::Array(std::move(out));
  }
  const std::string& d = sep->str();
  if (d.empty()) return absl::InvalidArgumentError("split(): empty separator");
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(d, start);
    if (at == std::string::npos) break;
    parts.push_back(s.substr(start, at - start));
    start = at + d.size();
  }
  parts.push_back(s.substr(start));
  if (maxsplit >= 0 && static_cast<double>(parts.size()) > maxsplit) {
    const size_t keep = static_cast<size_t>(maxsplit);
    std::string rest;
    for (size_t i = keep; i < parts.size(); ++i) {
      if (i > keep) rest += d;
      rest += parts[i];
    }
    parts.resize(keep);
    parts.push_back(std::move(rest));
  }
  for (auto& p : parts) out.push_back(Value::String(std::move(p)));
  return Value::Array(std::move(out));
}

// str.replace(old, new, count=None): at most `count` replacements (all when none or negative);
// an empty `old` matches between every two characters, as a Unicode-aware JavaScript regex does.
absl::StatusOr<Value> Replace(const std::string& s, const CallArgs& args) {
  if (args.positional.size() < 2) return absl::InvalidArgumentError("replace() needs two arguments");
  const Value& from = args.positional[0];
  const Value& to = args.positional[1];
  if (!from.is_string() || !to.is_string()) return absl::InvalidArgumentError("replace() arguments must be strings");
  const Value* count = args.Get(2, "count");
  if (count && !count->is_int() && !count->is_none()) return absl::InvalidArgumentError("replace(): count must be an integer");
  double remaining = (!count || count->is_none() || count->number() < 0) ? INFINITY : count->number();
  const std::string& f = from.str();
  std::string out;
  if (f.empty()) {
    const auto cps = DecodeUtf8(s);
    if (static_cast<double>(cps.size() + 1) * static_cast<double>(to.str().size()) + static_cast<double>(s.size()) > kMaxStringBytes) {
      return absl::ResourceExhaustedError("replace(): result too large");
    }
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (remaining > 0) {
        out += to.str();
        --remaining;
      }
      if (i < cps.size()) AppendUtf8(out, cps[i]);
    }
    return Value::String(std::move(out));
  }
  size_t start = 0;
  while (remaining > 0) {
    const size_t at = s.find(f, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += to.str();
    if (out.size() > kMaxStringBytes) return absl::ResourceExhaustedError("replace(): result too large");
    start = at + f.size();
    --remaining;
  }
  out.append(s, start, std::string::npos);
  return Value::String(std::move(out));
}

Value StringMethod(const Value& object, const std::string& name) {
  const std::string& s = object.str();
  auto simple = [&](std::string (*fn)(std::string_view)) {
    return Value::MakeFunction([object, fn](const CallArgs&) -> absl::StatusOr<Value> { return Value::String(fn(object.str())); });
  };
  if (name == "length") return Value::Int(static_cast<double>(JsLength(s)));
  if (name == "upper") return simple(JsToUpper);
  if (name == "lower") return simple(JsToLower);
  if (name == "strip") return simple(JsTrim);
  if (name == "lstrip") return simple(JsTrimStart);
  if (name == "rstrip") return simple(JsTrimEnd);
  if (name == "title") return simple(JsTitle);
  if (name == "capitalize") return simple(JsCapitalize);
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return Value::MakeFunction([object, prefix, name](const CallArgs& args) -> absl::StatusOr<Value> {
      ASSIGN_OR_RETURN(bool r, AffixMatch(object.str(), args, prefix, name));
      return Value::Bool(r);
    });
  }
  if (name == "split") return Value::MakeFunction([object](const CallArgs& args) { return Split(object.str(), args); });
  if (name == "replace") return Value::MakeFunction([object](const CallArgs& args) { return Replace(object.str(), args); });
  return Value();
}

absl::StatusOr<Value> DictSort(const Value& object, const CallArgs& args) {
  const Value* cs = args.Get(0, "case_sensitive");
  const Value* by = args.Get(1, "by");
  const Value* rev = args.Get(2, "reverse");
  if ((cs && !cs->is_bool()) || (rev && !rev->is_bool())) return absl::InvalidArgumentError("dictsort: case_sensitive and reverse must be booleans");
  if (by && (!by->is_string() || (by->str() != "key" && by->str() != "value"))) {
    return absl::InvalidArgumentError("dictsort: by must be 'key' or 'value'");
  }
  const bool case_sensitive = cs && cs->boolean();
  const bool reverse = rev && rev->boolean();
  const size_t index = by && by->str() == "value" ? 1 : 0;
  std::vector<Value> pairs;
  for (const auto& [k, v] : object.object().entries()) pairs.push_back(Value::Array({Value::String(k), v}));
  RETURN_IF_ERROR(SortValues(
      &pairs, [index](const Value& pair) { return pair.items()[index]; }, case_sensitive, reverse));
  return Value::Array(std::move(pairs));
}

Value DictMethod(const Value& object, const std::string& name) {
  if (name == "get") {
    return Value::MakeFunction([object](const CallArgs& args) -> absl::StatusOr<Value> {
      const Value* key = args.Get(0, "key");
      if (!key || !key->is_string()) return absl::InvalidArgumentError("get(): the key must be a string");
      if (const Value* v = object.object().Find(key->str())) return *v;
      const Value* def = args.Get(1, "default");
      return def ? *def : Value::None();
    });
  }
  if (name == "items" || name == "keys" || name == "values") {
    return Value::MakeFunction([object, name](const CallArgs&) -> absl::StatusOr<Value> {
      std::vector<Value> out;
      for (const auto& [k, v] : object.object().entries()) {
        if (name == "items") {
          out.push_back(Value::Array({Value::String(k), v}));
        } else {
          out.push_back(name == "keys" ? Value::String(k) : v);
        }
      }
      return Value::Array(std::move(out));
    });
  }
  if (name == "dictsort") return Value::MakeFunction([object](const CallArgs& args) { return DictSort(object, args); });
  return Value();
}

// A string's UTF-16 code units, each as a string: String.prototype.at indexes these, so an
// emoji is two items (its surrogate halves, kept as such) where slicing sees one.
std::vector<Value> Utf16Units(const std::string& s) {
  std::vector<Value> out;
  for (char32_t cp : DecodeUtf8(s)) {
    std::vector<char32_t> units;
    if (cp >= 0x10000) {
      units = {0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)};
    } else {
      units = {cp};
    }
    for (char32_t u : units) {
      std::string c;
      AppendUtf8(c, u);
      out.push_back(Value::String(std::move(c)));
    }
  }
  return out;
}

// JavaScript's Array.prototype.at / String.prototype.at: negative counts from the end.
Value At(const std::vector<Value>& items, double i) {
  const double n = static_cast<double>(items.size());
  const double k = i < 0 ? n + i : i;
  if (!(k >= 0 && k < n)) return Value();
  return items[static_cast<size_t>(k)];
}

}  // namespace

std::vector<Value> Characters(const std::string& s) {
  std::vector<Value> out;
  for (char32_t cp : DecodeUtf8(s)) {
    std::string c;
    AppendUtf8(c, cp);
    out.push_back(Value::String(std::move(c)));
  }
  return out;
}

absl::StatusOr<Value> GetMember(const Value& object, const Value& property) {
  if (object.is_object() || object.is_namespace()) {
    if (!property.is_string()) return absl::InvalidArgumentError(absl::StrCat("a dict key must be a string, not a ", property.TypeName()));
    if (const Value* v = object.object().Find(property.str())) return *v;
    return object.is_object() ? DictMethod(object, property.str()) : Value();
  }
  if (object.is_array() || object.is_string()) {
    if (property.is_int()) {
      if (object.is_array()) return At(object.items(), property.number());
      return At(Utf16Units(object.str()), property.number());
    }
    if (!property.is_string()) return absl::InvalidArgumentError(absl::StrCat("cannot index a ", object.TypeName(), " with a ", property.TypeName()));
    if (object.is_string()) return StringMethod(object, property.str());
    if (property.str() == "length") return Value::Int(static_cast<double>(object.items().size()));
    return Value();
  }
  if (!property.is_string()) return absl::InvalidArgumentError(absl::StrCat("cannot index a ", object.TypeName(), " with a ", property.TypeName()));
  return Value();
}

absl::StatusOr<Value> SliceValue(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (!object.is_array() && !object.is_string()) return absl::InvalidArgumentError(absl::StrCat("cannot slice a ", object.TypeName()));
  for (const Value* v : {&start_v, &stop_v, &step_v}) {
    if (!v->is_int() && !v->is_undefined()) return absl::InvalidArgumentError("slice bounds must be integers");
  }
  std::vector<Value> chars;
  if (object.is_string()) chars = Characters(object.str());
  const std::vector<Value>& items = object.is_array() ? object.items() : chars;
  const double n = static_cast<double>(items.size());
  const double step = step_v.is_undefined() ? 1 : step_v.number();
  const double dir = step > 0 ? 1 : step < 0 ? -1 : 0;
  double start, stop;
  if (dir >= 0) {
    start = start_v.is_undefined() ? 0 : start_v.number();
    start = start < 0 ? std::max(n + start, 0.0) : std::min(start, n);
    stop = stop_v.is_undefined() ? n : stop_v.number();
    stop = stop < 0 ? std::max(n + stop, 0.0) : std::min(stop, n);
  } else {
    start = start_v.is_undefined() ? n - 1 : start_v.number();
    start = start < 0 ? std::max(n + start, -1.0) : std::min(start, n - 1);
    stop = stop_v.is_undefined() ? -1 : stop_v.number();
    stop = stop < -1 ? std::max(n + stop, -1.0) : std::min(stop, n - 1);
  }
  std::vector<Value> out;
  if (dir != 0) {
    for (double i = start; dir * i < dir * stop; i += step) out.push_back(items[static_cast<size_t>(i)]);
  }
  if (object.is_array()) return Value::Array(std::move(out));
  std::string s;
  for (const Value& c : out) s += c.str();
  return Value::String(std::move(s));
}

}  // namespace tandem::jinja
