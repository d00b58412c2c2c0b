#include "engine/tokenizer/jinja/globals.h"

#include <cmath>
#include <ctime>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::jinja {
namespace {

absl::StatusOr<Value> Range(const CallArgs& args, size_t max_items) {
  if (!args.keyword.empty()) return absl::InvalidArgumentError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) return absl::InvalidArgumentError("range() takes 1 to 3 arguments");
  for (const Value& v : p) {
    if (!v.is_number() || !std::isfinite(v.number())) return absl::InvalidArgumentError("range() arguments must be numbers");
  }
  double start = 0, stop = p[0].number(), step = 1;
  if (p.size() >= 2) {
    start = p[0].number();
    stop = p[1].number();
  }
  if (p.size() == 3) step = p[2].number();
  if (step == 0) return absl::InvalidArgumentError("range() step must not be zero");
  const double count = step > 0 ? std::ceil((stop - start) / step) : std::ceil((start - stop) / -step);
  if (count > static_cast<double>(max_items)) return absl::ResourceExhaustedError("range() too long");
  std::vector<Value> out;
  if (step > 0) {
    for (double i = start; i < stop; i += step) out.push_back(Value::Int(i));
  } else {
    for (double i = start; i > stop; i += step) out.push_back(Value::Int(i));
  }
  return Value::Array(std::move(out));
}

// The subset of strftime the reference implements; other % sequences stay as written.
std::string StrftimeNow(std::string_view format) {
  static const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                  "July",    "August",   "September", "October", "November", "December"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  auto pad2 = [](int n) { return n < 10 ? absl::StrCat("0", n) : absl::StrCat(n); };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    const char c = format[i + 1];
    switch (c) {
      case 'Y': out += absl::StrCat(tm.tm_year + 1900); break;
      case 'm': out += pad2(tm.tm_mon + 1); break;
      case 'd': out += pad2(tm.tm_mday); break;
      case 'b': out += std::string(kMonths[tm.tm_mon]).substr(0, 3); break;
      case 'B': out += kMonths[tm.tm_mon]; break;
      case 'H': out += pad2(tm.tm_hour); break;
      case 'M': out += pad2(tm.tm_min); break;
      case '%': out += "%"; break;
      default:
        out.push_back('%');
        out.push_back(c);
    }
    ++i;
  }
  return out;
}

// namespace(), namespace(dict), namespace(list of pairs), plus keyword attributes.
absl::StatusOr<Value> MakeNamespace(const CallArgs& args, std::vector<std::shared_ptr<Object>>* namespaces) {
  if (args.positional.size() > 1) return absl::InvalidArgumentError("namespace() takes at most 1 positional argument");
  auto obj = std::make_shared<Object>();
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_object()) {
      for (const auto& [k, v] : src.object().entries()) obj->Set(k, v);
    } else if (src.is_array()) {
      for (const Value& pair : src.items()) {
        if (!pair.is_array() || pair.items().size() != 2 || !pair.items()[0].is_string()) {
          return absl::InvalidArgumentError("namespace() needs a dict or a list of [key, value] pairs");
        }
        obj->Set(pair.items()[0].str(), pair.items()[1]);
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("namespace() cannot take a ", src.TypeName()));
    }
  }
  for (const auto& [k, v] : args.keyword) obj->Set(k, v);
  namespaces->push_back(obj);
  return Value::Namespace(std::move(obj));
}

}  // namespace

void AddGlobals(absl::flat_hash_map<std::string, Value>* vars, std::vector<std::shared_ptr<Object>>* namespaces,
                size_t max_items) {
  for (const char* t : {"true", "True"}) (*vars)[t] = Value::Bool(true);
  for (const char* f : {"false", "False"}) (*vars)[f] = Value::Bool(false);
  for (const char* n : {"none", "None"}) (*vars)[n] = Value::None();
  (*vars)["range"] = Value::MakeFunction([max_items](const CallArgs& args) { return Range(args, max_items); });
  (*vars)["namespace"] = Value::MakeFunction([namespaces](const CallArgs& args) { return MakeNamespace(args, namespaces); });
  (*vars)["raise_exception"] = Value::MakeFunction([](const CallArgs& args) -> absl::StatusOr<Value> {
    const std::string msg = args.positional.empty() ? "" : ToRawString(args.positional[0]);
    return absl::InvalidArgumentError(absl::StrCat(kRaisedPrefix, msg));
  });
  (*vars)["strftime_now"] = Value::MakeFunction([](const CallArgs& args) -> absl::StatusOr<Value> {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return absl::InvalidArgumentError("strftime_now() needs a format string");
    }
    return Value::String(StrftimeNow(args.positional[0].str()));
  });
}

}  // namespace tandem::jinja
