// LocalComm, the comm of a group of one: collectives are identities, a root other than 0 is
// refused, and Abort fails every later call with its reason.
#include "engine/comm/local_comm.h"

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

TEST(LocalCommTest, AbortFailsLaterCalls) {
  LocalComm comm;
  float x = 5;
  EXPECT_TRUE(comm.AllReduceSum(&x, 1).ok());
  EXPECT_EQ(x, 5.0f);
  EXPECT_EQ(comm.Broadcast(&x, 4, 1).code(), absl::StatusCode::kInvalidArgument);
  comm.Abort("shutting down");
  EXPECT_TRUE(comm.aborted());
  absl::Status st = comm.Barrier();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "comm aborted: shutting down");
}

}  // namespace
}  // namespace tandem::engine
