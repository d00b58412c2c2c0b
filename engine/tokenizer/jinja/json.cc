#include "engine/tokenizer/jinja/json.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/status.h"
#include "engine/tokenizer/jinja/js_string.h"

namespace tandem::jinja {
namespace {

// Key order of a sort_keys dump. The reference sorts with String.prototype.localeCompare; for the
// ASCII keys of tool schemas that is case-insensitive first, lower case before upper on a tie.
bool LocaleLess(const std::string& a, const std::string& b) {
  const std::string la = JsToLower(a), lb = JsToLower(b);
  if (la != lb) return la < lb;
  return a > b;
}

class Writer {
 public:
  Writer(const JsonOptions& o, bool lenient) : o_(o), lenient_(lenient) {
    if (o.separators) {
      item_sep_ = o.separators->first;
      key_sep_ = o.separators->second;
    } else {
      item_sep_ = o.indent > 0 ? "," : ", ";
      key_sep_ = ": ";
    }
  }

  absl::Status Write(const Value& v, int depth) {
    if (out_.size() > kMaxStringBytes) {
      if (lenient_) return absl::OkStatus();
      return absl::ResourceExhaustedError("tojson: text too large");
    }
    switch (v.kind()) {
      case Value::Kind::kUndefined: out_ += o_.undefined_as_null ? "null" : "undefined"; return absl::OkStatus();
      case Value::Kind::kNone: out_ += "null"; return absl::OkStatus();
      case Value::Kind::kBool: out_ += v.boolean() ? "true" : "false"; return absl::OkStatus();
      case Value::Kind::kInt:
      case Value::Kind::kFloat:
        out_ += std::isfinite(v.number()) ? JsNumberToString(v.number()) : "null";
        return absl::OkStatus();
      case Value::Kind::kString: AppendJsonString(out_, v.str(), o_.ensure_ascii); return absl::OkStatus();
      case Value::Kind::kFunction:
        if (lenient_) {
          out_ += "[function]";
          return absl::OkStatus();
        }
        return absl::InvalidArgumentError("tojson: cannot convert a function to JSON");
      default: break;
    }
    if (depth >= kMaxJsonDepth) {
      if (lenient_) {
        out_ += "...";
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError("tojson: value nested too deep (or cyclic)");
    }
    const std::string pad = o_.indent > 0 ? "\n" + std::string(static_cast<size_t>(o_.indent) * depth, ' ') : "";
    const std::string child_pad = o_.indent > 0 ? pad + std::string(static_cast<size_t>(o_.indent), ' ') : "";
    if (v.is_array()) {
      const auto& items = v.items();
      out_ += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out_ += item_sep_;
        out_ += child_pad;
        if (auto st = Write(items[i], depth + 1); !st.ok()) return st;
      }
      if (!items.empty()) out_ += pad;
      out_ += ']';
      return absl::OkStatus();
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& e : v.object().entries()) entries.push_back(&e);
    if (o_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return LocaleLess(a->first, b->first); });
    }
    out_ += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += item_sep_;
      out_ += child_pad;
      AppendJsonString(out_, entries[i]->first, o_.ensure_ascii);
      out_ += key_sep_;
      if (auto st = Write(entries[i]->second, depth + 1); !st.ok()) return st;
    }
    if (!entries.empty()) out_ += pad;
    out_ += '}';
    return absl::OkStatus();
  }

  std::string& out() { return out_; }

 private:
  const JsonOptions& o_;
  bool lenient_;
  std::string item_sep_, key_sep_, out_;
};

// A JavaScript array index: "0", "17", ... (canonical, below 2^32 - 1). Object.entries lists
// such keys first, in numeric order.
std::optional<uint32_t> ArrayIndexKey(std::string_view k) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  for (char c : k) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= 4294967295ull) return std::nullopt;
  return static_cast<uint32_t>(v);
}

absl::StatusOr<Value> Convert(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth) return absl::InvalidArgumentError("template context nested too deep");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::Int(static_cast<double>(j.get<int64_t>()));
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::Int(static_cast<double>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      return std::isfinite(d) && std::floor(d) == d ? Value::Int(d) : Value::Float(d);
    }
    case nlohmann::ordered_json::value_t::string: return Value::String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        ASSIGN_OR_RETURN(Value v, Convert(e, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::Array(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<uint32_t, const std::string*>> index_keys;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (auto idx = ArrayIndexKey(it.key())) index_keys.emplace_back(*idx, &it.key());
      }
      std::sort(index_keys.begin(), index_keys.end());
      Object obj;
      for (const auto& [idx, key] : index_keys) {
        ASSIGN_OR_RETURN(Value v, Convert(j.at(*key), depth + 1));
        obj.Set(*key, std::move(v));
      }
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (ArrayIndexKey(it.key())) continue;
        ASSIGN_OR_RETURN(Value v, Convert(it.value(), depth + 1));
        obj.Set(it.key(), std::move(v));
      }
      return Value::MakeObject(std::move(obj));
    }
    default: return absl::InvalidArgumentError("template context: unsupported JSON value (binary)");
  }
}

}  // namespace

absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options) {
  Writer w(options, /*lenient=*/false);
  if (auto st = w.Write(v, 0); !st.ok()) return st;
  return std::move(w.out());
}

std::string ToJsonLenient(const Value& v, const JsonOptions& options) {
  Writer w(options, /*lenient=*/true);
  (void)w.Write(v, 0);
  return std::move(w.out());
}

absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& j) { return Convert(j, 0); }

}  // namespace tandem::jinja
