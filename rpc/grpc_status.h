// absl::Status -> grpc::Status with the same code and message: errors cross the RPC boundary with
// the code that tells the caller what to do next (UNAVAILABLE: retry, PERMISSION_DENIED: fix).
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tandem::rpc {

grpc::Status ToGrpcStatus(const absl::Status& st);

}  // namespace tandem::rpc
