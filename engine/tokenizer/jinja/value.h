// The values a chat template computes with. They follow @huggingface/jinja (the JavaScript
// interpreter transformers.js renders chat templates with, our byte-exact reference) rather than
// Python: numbers are doubles tagged integer or float, `none` and undefined print nothing, `==` is
// JavaScript's loose equality, and lists, dicts and namespaces are shared by reference (a
// namespace attribute set through one name is seen through every other).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace tandem::jinja {

class Value;

// No string a template builds may be longer than this, whatever the render limits say: filters
// that multiply text (replace with an empty pattern, indent, join, tojson) stop here before they
// allocate more.
inline constexpr size_t kMaxStringBytes = 64u << 20;

class Object;
struct CallArgs;

using Function = std::function<absl::StatusOr<Value>(const CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kNamespace, kFunction };

  Value() = default;  // undefined
  static Value None();
  static Value Bool(bool b);
  static Value Int(double v);  // integers are doubles, as in JavaScript
  static Value Float(double v);
  static Value String(std::string s);
  static Value Array(std::vector<Value> items, bool tuple = false);
  static Value MakeObject(std::shared_ptr<Object> object);
  static Value MakeObject(Object object);
  static Value Namespace(std::shared_ptr<Object> object);
  static Value MakeFunction(Function fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_tuple() const { return kind_ == Kind::kArray && tuple_; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool boolean() const { return bool_; }
  double number() const { return number_; }
  const std::string& str() const { return *string_; }
  const std::vector<Value>& items() const { return *array_; }
  // Objects and namespaces.
  const Object& object() const { return *object_; }
  Object& mutable_object() const { return *object_; }
  const std::shared_ptr<Object>& object_ptr() const { return object_; }
  const Function& function() const { return *function_; }
  // Identity of a list, dict, namespace or function (JavaScript compares those by reference).
  const void* identity() const;

  // Truthiness as in Jinja: empty strings, lists and dicts, 0, none and undefined are false.
  bool Truthy() const;
  // Type name for error messages ("string", "list", ...).
  const char* TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool tuple_ = false;
  double number_ = 0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<const std::vector<Value>> array_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<const Function> function_;
};

// An insertion-ordered string-keyed map (JavaScript's Map): setting an existing key keeps its
// position, which decides the key order of tojson and of `items()`.
class Object {
 public:
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  void Clear();

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  absl::flat_hash_map<std::string, size_t> index_;
};

// Arguments of a call: positional ones, then keyword ones in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
  // Positional argument `i`, else keyword `name`, else nullptr.
  const Value* Get(size_t i, std::string_view name) const;
};

// JavaScript's Number.prototype.toString: shortest round-trip digits, "1e+21" past 1e21.
std::string JsNumberToString(double v);
// What printing the value gives ({{ v }}): floats keep ".0" when whole, lists and dicts print as
// their JSON, none and undefined print as "undefined" (callers skip those two; it shows inside
// a list joined into a string).
std::string ToOutputString(const Value& v);
// What JavaScript's String(v.value) gives: used by `~`, `+` with a string, and join.
std::string ToRawString(const Value& v);
// JavaScript `a == b` on the two values (null == undefined, "1" == 1, lists by reference).
bool LooseEquals(const Value& a, const Value& b);
// JavaScript `a === b` on the two values (the `in` test of lists, `unique`).
bool StrictEquals(const Value& a, const Value& b);

}  // namespace tandem::jinja
