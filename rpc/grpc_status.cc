#include "rpc/grpc_status.h"

#include <string>

namespace tandem::rpc {

grpc::Status ToGrpcStatus(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  // The two enums share their numbering (both follow google.rpc.Code).
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(st.code())), std::string(st.message()));
}

}  // namespace tandem::rpc
