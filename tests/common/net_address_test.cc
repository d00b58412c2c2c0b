#include "common/net_address.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(NetAddressTest, HostOf) {
  EXPECT_EQ(HostOf("10.0.0.1:9300"), "10.0.0.1");
  EXPECT_EQ(HostOf("[fd00::1]:9300"), "fd00::1");
  EXPECT_EQ(HostOf("spark1.local:50051"), "spark1.local");
  EXPECT_EQ(HostOf("::1"), "::1");
  EXPECT_EQ(HostOf("spark1"), "spark1");
}

TEST(NetAddressTest, Loopback) {
  for (const char* yes : {"127.0.0.1:0", "127.9.9.9", "[::1]:8000", "::1", "localhost:9", "localhost"}) {
    EXPECT_TRUE(IsLoopbackHost(yes)) << yes;
  }
  for (const char* no : {"0.0.0.0:50051", "[::]:1", "10.0.0.1:1", "128.0.0.1", "spark1:50051", "", "localhost.evil:1",
                         "[::ffff:10.0.0.1]:1"}) {
    EXPECT_FALSE(IsLoopbackHost(no)) << no;
  }
}

}  // namespace
}  // namespace tandem
