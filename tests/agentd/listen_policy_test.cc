// Where an agent may listen, given its authentication (agentd/listen_policy.h).
#include "agentd/listen_policy.h"

#include <gtest/gtest.h>

namespace tandem::agentd {
namespace {

TEST(ListenPolicyTest, DefaultsFollowAuthentication) {
  EXPECT_EQ(DecideListen("", true, false)->address, "0.0.0.0:50051");
  auto open = DecideListen("", false, false);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->address, "127.0.0.1:50051") << "no authentication: loopback only";
  EXPECT_FALSE(open->insecure);
}

TEST(ListenPolicyTest, NetworkAddressWithoutAuthenticationNeedsInsecure) {
  for (const char* addr : {"0.0.0.0:50051", "10.0.0.2:7000", "[::]:50051", "spark1:50051"}) {
    auto refused = DecideListen(addr, false, false);
    ASSERT_FALSE(refused.ok()) << addr;
    EXPECT_TRUE(absl::IsFailedPrecondition(refused.status()));
    EXPECT_NE(refused.status().message().find(addr), absl::string_view::npos);
    EXPECT_NE(refused.status().message().find("--token-file"), absl::string_view::npos);
    auto forced = DecideListen(addr, false, true);
    ASSERT_TRUE(forced.ok());
    EXPECT_TRUE(forced->insecure) << addr;
    EXPECT_FALSE(DecideListen(addr, true, false)->insecure);
  }
}

TEST(ListenPolicyTest, LoopbackNeedsNothing) {
  for (const char* addr : {"127.0.0.1:0", "127.3.4.5:9", "[::1]:50051", "localhost:50051"}) {
    auto d = DecideListen(addr, false, false);
    ASSERT_TRUE(d.ok()) << addr;
    EXPECT_FALSE(d->insecure);
    EXPECT_FALSE(DecideListen(addr, false, true)->insecure) << "--insecure on loopback changes nothing";
  }
}

}  // namespace
}  // namespace tandem::agentd
