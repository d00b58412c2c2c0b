// rpc/grpc_status.h: every code crosses the RPC boundary both ways with its name and message.
#include "rpc/grpc_status.h"

#include <gtest/gtest.h>

namespace tandem::rpc {
namespace {

TEST(GrpcStatus, EveryCodeKeepsItsNameBothWays) {
  // google.rpc.Code 1..16: CANCELLED .. UNAUTHENTICATED.
  for (int c = 1; c <= 16; ++c) {
    const auto code = static_cast<absl::StatusCode>(c);
    const absl::Status st(code, "why");
    const grpc::Status wire = ToGrpcStatus(st);
    EXPECT_EQ(static_cast<int>(wire.error_code()), c);
    EXPECT_EQ(wire.error_message(), "why");
    const absl::Status back = FromGrpcStatus(wire, "reading 'k'");
    EXPECT_EQ(back.code(), code) << absl::StatusCodeToString(code);
    EXPECT_EQ(back.message(), "reading 'k': why");
    EXPECT_EQ(FromGrpcStatus(wire), st);
  }
  // The names that a hand-written switch once lost (they became UNKNOWN).
  EXPECT_TRUE(absl::IsNotFound(FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, ""))));
  EXPECT_TRUE(absl::IsFailedPrecondition(FromGrpcStatus(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, ""))));
  EXPECT_TRUE(absl::IsPermissionDenied(FromGrpcStatus(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, ""))));
}

TEST(GrpcStatus, OkIsOkWhateverTheContext) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "reading 'k'").ok());
}

}  // namespace
}  // namespace tandem::rpc
