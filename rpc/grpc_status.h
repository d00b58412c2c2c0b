// absl::Status <-> grpc::Status with the same code and message: errors cross the RPC boundary with
// the code that tells the caller what to do next (UNAVAILABLE: retry, PERMISSION_DENIED: fix,
// NOT_FOUND: not there). One pair of functions for every service and client, so that no code is
// lost on the way (a hand-written switch once turned NOT_FOUND into UNKNOWN).
#pragma once

#include <string_view>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tandem::rpc {

grpc::Status ToGrpcStatus(const absl::Status& st);

// The same code; the message prefixed with "<context>: " when `context` is not empty
// ("reading 'gen3/0' from the store at host:port: ...").
absl::Status FromGrpcStatus(const grpc::Status& st, std::string_view context = {});

}  // namespace tandem::rpc
