#include "rpc/grpc_status.h"

#include <string>

namespace tandem::rpc {

// The two enums share their numbering (both follow google.rpc.Code), so a cast keeps every code.

grpc::Status ToGrpcStatus(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(st.code())), std::string(st.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& st, std::string_view context) {
  if (st.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(static_cast<int>(st.error_code()));
  if (context.empty()) return absl::Status(code, st.error_message());
  return absl::Status(code, std::string(context) + ": " + st.error_message());
}

}  // namespace tandem::rpc
