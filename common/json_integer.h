// Reading an integer out of outside JSON (nlohmann) without undefined behaviour.
//
// nlohmann's get<int64_t>() (and value(key, int)) converts whatever number it holds: a float such
// as 2e43 is cast to the integer type, which is undefined behaviour past the type's range, and an
// integer past a narrower type's range silently wraps. JsonInteger accepts only JSON integers (signed
// or unsigned) within [lo, hi]; a float, a string or anything else is nullopt, for the caller to
// refuse with the field's name.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

namespace tandem {

// The usual bounds of the callers' fields.
inline constexpr int64_t kJsonInt64Min = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kJsonInt64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kJsonInt32Min = std::numeric_limits<int32_t>::min();
inline constexpr int64_t kJsonInt32Max = std::numeric_limits<int32_t>::max();

template <typename Json>
std::optional<int64_t> JsonInteger(const Json& v, int64_t lo, int64_t hi) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.template get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi)) return std::nullopt;
    const int64_t s = static_cast<int64_t>(u);
    return s >= lo ? std::optional<int64_t>(s) : std::nullopt;
  }
  if (!v.is_number_integer()) return std::nullopt;
  const int64_t s = v.template get<int64_t>();
  return s >= lo && s <= hi ? std::optional<int64_t>(s) : std::nullopt;
}

// Field `name` of object `obj` as an integer in [lo, hi]; where absent `def`, or with no default
// (nullopt) the field is required. Otherwise throws std::invalid_argument naming the field (for
// parsers whose one catch turns nlohmann's exceptions into a Status).
template <typename Json>
int64_t JsonIntegerField(const Json& obj, const char* name, std::optional<int64_t> def, int64_t lo, int64_t hi) {
  if (!obj.is_object() || !obj.contains(name)) {
    if (def) return *def;
    throw std::invalid_argument(std::string(name) + ": missing");
  }
  const std::optional<int64_t> v = JsonInteger(obj[name], lo, hi);
  if (!v) {
    throw std::invalid_argument(std::string(name) + ": expected an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  }
  return *v;
}

}  // namespace tandem
