// Status helpers: errors cross module and RPC boundaries as absl::Status / absl::StatusOr<T>.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TANDEM_CONCAT_INNER(a, b) a##b
#define TANDEM_CONCAT(a, b) TANDEM_CONCAT_INNER(a, b)

// Returns from the current function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status _tandem_st = (expr);        \
    if (!_tandem_st.ok()) return _tandem_st;   \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F())`: unwraps a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TANDEM_CONCAT(_tandem_so_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(*tmp)

namespace tandem {

// Debian's Abseil 20220623 has its own string_view; convert explicitly.
inline absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view AsStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// The message of a status as std::string ("" when OK).
inline std::string StatusText(const absl::Status& st) { return std::string(st.message()); }

}  // namespace tandem
