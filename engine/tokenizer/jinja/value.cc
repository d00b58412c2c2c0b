#include "engine/tokenizer/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/tokenizer/jinja/js_string.h"
#include "engine/tokenizer/jinja/json.h"

namespace tandem::jinja {

const Value* Object::Find(std::string_view key) const {
  auto it = index_.find(absl::string_view(key.data(), key.size()));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Object::Set(std::string key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

void Object::Clear() {
  entries_.clear();
  index_.clear();
}

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

const Value* CallArgs::Get(size_t i, std::string_view name) const {
  if (i < positional.size()) return &positional[i];
  return Keyword(name);
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

Value Value::Int(double d) {
  Value v = Float(d);
  v.kind_ = Kind::kInt;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.number_ = d;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::Array(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::kArray;
  v.tuple_ = tuple;
  v.array_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

Value Value::MakeObject(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.object_ = std::move(object);
  return v;
}

Value Value::MakeObject(Object object) { return MakeObject(std::make_shared<Object>(std::move(object))); }

Value Value::Namespace(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.object_ = std::move(object);
  return v;
}

Value Value::MakeFunction(Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.function_ = std::make_shared<const Function>(std::move(fn));
  return v;
}

const void* Value::identity() const {
  switch (kind_) {
    case Kind::kArray: return array_.get();
    case Kind::kObject:
    case Kind::kNamespace: return object_.get();
    case Kind::kFunction: return function_.get();
    default: return nullptr;
  }
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return bool_;
    case Kind::kInt:
    case Kind::kFloat: return number_ != 0 && !std::isnan(number_);
    case Kind::kString: return !string_->empty();
    case Kind::kArray: return !array_->empty();
    case Kind::kObject: return object_->size() > 0;
    case Kind::kNamespace:  // the reference tests a JavaScript Map, which is always true
    case Kind::kFunction: return true;
  }
  return false;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "boolean";
    case Kind::kInt: return "integer";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kArray: return tuple_ ? "tuple" : "list";
    case Kind::kObject: return "dict";
    case Kind::kNamespace: return "namespace";
    case Kind::kFunction: return "function";
  }
  return "?";
}

std::string JsNumberToString(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";
  std::string sign = v < 0 ? "-" : "";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(v), std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exp10 = std::atoi(sci.c_str() + e_pos + 1);
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // position of the decimal point relative to the digits
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0) ? "e+" : "e-";
    out += std::to_string(std::abs(n - 1));
  }
  return sign + out;
}

std::string ToOutputString(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return "undefined";  // see TypeOf: the reference's none holds undefined
    case Value::Kind::kBool: return v.boolean() ? "true" : "false";
    case Value::Kind::kInt: return JsNumberToString(v.number());
    case Value::Kind::kFloat: {
      const double d = v.number();
      if (d == 0 && std::signbit(d)) return "-0.0";
      if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 1e21) {
        char buf[400];
        std::snprintf(buf, sizeof(buf), "%.1f", d);
        return buf;
      }
      return JsNumberToString(d);
    }
    case Value::Kind::kString: return v.str();
    case Value::Kind::kFunction: return "[function]";
    default: {
      JsonOptions o;
      o.undefined_as_null = false;
      return ToJsonLenient(v, o);
    }
  }
}

std::string ToRawString(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kInt:
    case Value::Kind::kFloat: return JsNumberToString(v.number());
    case Value::Kind::kArray: {  // Array.prototype.toString: the items' toString() joined by ","
      std::string out;
      bool first = true;
      for (const Value& item : v.items()) {
        if (!first) out += ',';
        first = false;
        out += ToOutputString(item);
        if (out.size() > kMaxStringBytes) break;  // callers refuse strings this long
      }
      return out;
    }
    case Value::Kind::kObject:
    case Value::Kind::kNamespace: return "[object Map]";
    default: return ToOutputString(v);
  }
}

namespace {

enum class JsType { kUndefined, kBoolean, kNumber, kString, kReference };

JsType TypeOf(const Value& v) {
  switch (v.kind()) {
    // The reference makes its none value without a value, so it holds JavaScript's undefined
    // too: none and undefined are equal even to ===.
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return JsType::kUndefined;
    case Value::Kind::kBool: return JsType::kBoolean;
    case Value::Kind::kInt:
    case Value::Kind::kFloat: return JsType::kNumber;
    case Value::Kind::kString: return JsType::kString;
    default: return JsType::kReference;
  }
}

bool LooseEqualsNumbers(double a, const Value& b) {
  switch (TypeOf(b)) {
    case JsType::kNumber: return a == b.number();
    case JsType::kString: return a == JsStringToNumber(b.str());
    case JsType::kBoolean: return a == (b.boolean() ? 1.0 : 0.0);
    case JsType::kReference: return b.is_array() && a == JsStringToNumber(ToRawString(b));
    default: return false;
  }
}

}  // namespace

bool StrictEquals(const Value& a, const Value& b) {
  const JsType ta = TypeOf(a), tb = TypeOf(b);
  if (ta != tb) return false;
  switch (ta) {
    case JsType::kUndefined: return true;
    case JsType::kBoolean: return a.boolean() == b.boolean();
    case JsType::kNumber: return a.number() == b.number();
    case JsType::kString: return a.str() == b.str();
    case JsType::kReference: return a.identity() == b.identity();
  }
  return false;
}

bool LooseEquals(const Value& a, const Value& b) {
  const JsType ta = TypeOf(a), tb = TypeOf(b);
  if (ta == tb) return StrictEquals(a, b);
  if (ta == JsType::kUndefined || tb == JsType::kUndefined) return false;  // the types differ
  if (ta == JsType::kBoolean) return LooseEqualsNumbers(a.boolean() ? 1.0 : 0.0, b);
  if (ta == JsType::kNumber) return LooseEqualsNumbers(a.number(), b);
  if (tb == JsType::kBoolean || tb == JsType::kNumber) return LooseEquals(b, a);
  // A string against a list, dict or function: the reference converts the container to a string.
  if (ta == JsType::kString) return b.is_array() || b.is_object() || b.is_namespace() ? a.str() == ToRawString(b) : false;
  if (tb == JsType::kString) return a.is_array() || a.is_object() || a.is_namespace() ? b.str() == ToRawString(a) : false;
  return false;
}

}  // namespace tandem::jinja
