// agentd/auth.h: the token comparison and the token file's rules.
#include "agentd/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {

using tandem::testing::TempDir;

TEST(AuthTest, ConstantTimeEqualsAndTokenFile) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  TempDir tmp;
  std::ofstream(tmp / "t") << "tok-0123456789abcdef \n\n";
  chmod((tmp / "t").c_str(), 0600);
  auto t = ReadTokenFile(tmp / "t");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "tok-0123456789abcdef");
  chmod((tmp / "t").c_str(), 0644);
  EXPECT_FALSE(ReadTokenFile(tmp / "t").ok()) << "a world-readable token file must be refused";
  std::ofstream(tmp / "short") << "x\n";
  chmod((tmp / "short").c_str(), 0600);
  EXPECT_FALSE(ReadTokenFile(tmp / "short").ok()) << "a 1-byte token must be refused";
  std::ofstream(tmp / "empty") << "\n";
  chmod((tmp / "empty").c_str(), 0600);
  EXPECT_FALSE(ReadTokenFile(tmp / "empty").ok());
  EXPECT_FALSE(ReadTokenFile(tmp / "missing").ok());
}

}  // namespace
}  // namespace tandem::agentd
