// KV pool sizing without a model: which memory_fraction applies (backend defaults, validation),
// the cap at max_num_seqs x max_model_len, explicit sizes, the log line.
#include "engine/batching/kv_sizing.h"

#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/match.h"


namespace tandem::engine {
namespace {

TEST(KvSizing, MemoryFractionDefaultsPerBackend) {
  EXPECT_DOUBLE_EQ(*ResolveMemoryFraction("cpu", 0), 0.70);
  EXPECT_DOUBLE_EQ(*ResolveMemoryFraction("cuda", 0), 0.90);
  EXPECT_DOUBLE_EQ(*ResolveMemoryFraction("cuda", 0.5), 0.5);
  EXPECT_DOUBLE_EQ(*ResolveMemoryFraction("cpu", 1.0), 1.0);
}

TEST(KvSizing, MemoryFractionOutsideZeroOneIsRejected) {
  for (double bad : {-0.1, 1.0001, 2.0, std::nan("")}) {
    auto f = ResolveMemoryFraction("cuda", bad);
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(f.status().message(), "memory_fraction must be in (0, 1], got")) << f.status();
  }
  EXPECT_EQ(ValidateMemoryFraction(1.5, "flag --memory-fraction").message(),
            "flag --memory-fraction must be in (0, 1], got 1.5");
}

TEST(KvSizing, PoolFromMemoryIsCappedExplicitIsNot) {
  // 1e6 tokens fit, but 4 sequences of 1000 can only ever use 4000: 250 blocks of 16.
  auto p = KvPoolFromTokens(1000000, false, 16, 4, 1000, 2048, "device memory");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->blocks, 250);
  EXPECT_EQ(p->tokens, 4000);
  EXPECT_EQ(p->bytes, 4000 * 2048);
  auto e = KvPoolFromTokens(100000, true, 16, 4, 1000, 2048, "kv_tokens");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->tokens, 100000);
  // Whole blocks only; fewer tokens than one block is an error naming the source.
  EXPECT_EQ(KvPoolFromTokens(100, true, 16, 4, 1000, 8, "kv_tokens")->tokens, 96);
  auto none = KvPoolFromTokens(15, false, 16, 4, 1000, 8, "device memory (memory_fraction 0.9)");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "from device memory")) << none.status();
}

TEST(KvSizing, LogLineNamesTokensGibAndSource) {
  KvPoolSize p{4096, 65536, int64_t{3} << 29, "device memory (memory_fraction 0.9)"};
  EXPECT_EQ(DescribeKvPool(p, 16),
            "KV pool: 65536 tokens (1.50 GiB per rank, 4096 blocks of 16) from device memory (memory_fraction 0.9)");
}

}  // namespace
}  // namespace tandem::engine
