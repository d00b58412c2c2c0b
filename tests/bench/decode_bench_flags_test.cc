#include "bench/decode_bench_flags.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem::bench {
namespace {

TEST(DecodeBenchFlags, HybridNamesParse) {
  for (const char* name : {"qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"}) {
    auto o = ParseDecodeBenchFlags({"--backend", "cuda", "--synthetic", name, "--tp", "2", "--batches", "1,8"});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->synthetic, name);
    EXPECT_EQ(o->tp, 2);
    EXPECT_EQ(o->batches, (std::vector<int>{1, 8}));
    EXPECT_EQ(o->contexts, (std::vector<int>{1024, 4096}));
    EXPECT_FALSE(o->help);
  }
}

// An unknown name fails at parse time (before any GPU work) and lists the three known names.
TEST(DecodeBenchFlags, UnknownSyntheticListsTheNames) {
  auto o = ParseDecodeBenchFlags({"--synthetic", "qwen3-next"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kNotFound);
  const std::string msg(o.status().message());
  for (const char* name : {"qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"}) {
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(DecodeBenchFlags, HelpListsTheNames) {
  auto o = ParseDecodeBenchFlags({"--help"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->help);
  const std::string usage = DecodeBenchUsage();
  EXPECT_NE(usage.find("one of: qwen3-30b-a3b, qwen3.5-35b-a3b, qwen3-next-80b-a3b\n"), std::string::npos) << usage;
}

TEST(DecodeBenchFlags, BadFlagsAreNamed) {
  auto unknown = ParseDecodeBenchFlags({"--batch", "1"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(std::string(unknown.status().message()), "bench: unknown flag --batch");
  auto list = ParseDecodeBenchFlags({"--contexts", "1024,x"});
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(std::string(list.status().message()), "bad number list: 1024,x");
  auto missing = ParseDecodeBenchFlags({"--synthetic"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(std::string(missing.status().message()), "flag --synthetic needs a value");
  EXPECT_FALSE(ParseDecodeBenchFlags({"--backend", "cpu"}).ok());
}

}  // namespace
}  // namespace tandem::bench
