#include "openai/request_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::openai {

ApiError WrongType(const std::string& param, const char* expected, const RequestJson& got) {
  return InvalidRequest("'" + param + "' must be " + expected + ", got " + std::string(got.type_name()), param);
}

std::optional<ApiError> ReadNumber(const RequestJson& body, const char* name, double lo, double hi, float* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return WrongType(name, "a number", *it);
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return InvalidRequest("'" + std::string(name) + "' must be in [" + RequestJson(lo).dump() + ", " +
                              RequestJson(hi).dump() + "], got " + it->dump(),
                          name);
  }
  *out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<ApiError> ReadInt(const RequestJson& body, const char* name, int64_t lo, int64_t hi,
                                std::optional<int64_t>* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  // JSON has one number type; 16.0 is accepted as 16, 16.5 is not.
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || d < -9.2e18 || d > 9.2e18) {
      return WrongType(name, "an integer", *it);
    }
    *out = static_cast<int64_t>(d);
  } else if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidRequest("'" + std::string(name) + "' is too large", name);
    }
    *out = static_cast<int64_t>(u);
  } else if (it->is_number_integer()) {
    *out = it->get<int64_t>();
  } else {
    return WrongType(name, "an integer", *it);
  }
  if (**out < lo || **out > hi) {
    return InvalidRequest("'" + std::string(name) + "' must be in [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "], got " + std::to_string(**out),
                          name);
  }
  return std::nullopt;
}

std::optional<ApiError> ReadBool(const RequestJson& body, const char* name, bool* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return WrongType(name, "a boolean", *it);
  *out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ReadString(const RequestJson& object, const char* name, const std::string& param,
                                   std::optional<std::string>* out) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return WrongType(param, "a string", *it);
  *out = it->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ReadIds(const RequestJson& arr, const std::string& param, std::vector<int32_t>* out) {
  out->clear();
  out->reserve(arr.size());
  for (const RequestJson& v : arr) {
    if (!v.is_number_integer()) return WrongType(param, "an array of token ids (integers)", v);
    int64_t id = v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(
                                              v.get<uint64_t>(), std::numeric_limits<int64_t>::max()))
                                        : v.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return InvalidRequest("token id " + std::to_string(id) + " in '" + param + "' is outside the vocabulary",
                            param, "invalid_token_id");
    }
    out->push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

}  // namespace tandem::openai
