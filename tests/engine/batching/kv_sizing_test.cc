// KV pool sizing without a model: which memory_fraction applies (backend defaults, validation),
// the cap at max_num_seqs x max_model_len, explicit sizes, the log line.
#include "engine/batching/kv_sizing.h"

#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/match.h"
#include "engine/kv_cache.h"


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

TEST(KvSizing, Fp8KvHoldsTwiceTheTokensOfBf16) {
  // Qwen3-30B-A3B's KV on one rank: 48 layers, 4 kv heads of 128; the same 1.5 GiB budget.
  KvCacheSpec spec{48, 4, 128};
  const int64_t budget = int64_t{3} << 29;
  auto tokens = [&](KvDtype d) {
    spec.bytes_per_element = KvDtypeBytes(d);
    auto p = PoolsFromBudget(budget, 16, 64, 1 << 20, spec.bytes_per_token(), 0, "device memory");
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? p->tokens : 0;
  };
  const int64_t f32 = tokens(KvDtype::kF32), bf16 = tokens(KvDtype::kBf16), fp8 = tokens(KvDtype::kFp8);
  EXPECT_EQ(bf16, 16384);  // 1.5 GiB / 96 KiB per token
  EXPECT_EQ(fp8, 2 * bf16);
  EXPECT_EQ(fp8, 4 * f32);
}

TEST(KvSizing, LogLineNamesTokensGibAndSource) {
  KvPoolSize p{4096, 65536, int64_t{3} << 29, "device memory (memory_fraction 0.9)"};
  EXPECT_EQ(DescribeKvPool(p, 16),
            "KV pool: 65536 tokens (1.50 GiB per rank, 4096 blocks of 16) from device memory (memory_fraction 0.9)");
}

TEST(KvSizing, StateSlotsTakeMaxNumSeqsWhenTheyFitInHalfTheBudget) {
  // 1 MiB budget, slots of 1000 bytes: 64 slots take 64000 bytes, the KV pool gets the rest.
  const int64_t budget = 1 << 20;
  auto p = PoolsFromBudget(budget, 16, 64, 100000, 64, 1000, "host memory");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->state_slots, 64);
  EXPECT_EQ(p->state_bytes, 64000);
  EXPECT_EQ(p->tokens, (budget - 64000) / 64 / 16 * 16);
  EXPECT_LE(p->total_bytes(), budget);
  // A model without state: no slots, the whole budget is KV (as before slots existed).
  auto none = PoolsFromBudget(budget, 16, 64, 100000, 64, 0, "host memory");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->state_slots, 0);
  EXPECT_EQ(none->state_bytes, 0);
  EXPECT_EQ(none->tokens, budget / 64);
}

TEST(KvSizing, LargeStateSlotsGetHalfTheBudgetAndCapTheKvPool) {
  // Slots of 100 kB in 1 MB: 64 would take 6.4 MB; half the budget holds 5.
  auto p = PoolsFromBudget(1000000, 16, 64, 1024, 64, 100000, "device memory");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->state_slots, 5);
  EXPECT_EQ(p->state_bytes, 500000);
  // 500000 bytes of KV hold 7812 tokens, but 5 sequences of 1024 can only use 5120.
  EXPECT_EQ(p->tokens, 5120);
  // Not even half: one slot as long as one slot and one block fit.
  auto one = PoolsFromBudget(150000, 16, 64, 1000, 64, 100000, "device memory");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->state_slots, 1);
  EXPECT_EQ(one->tokens, 50000 / 64 / 16 * 16);
}

TEST(KvSizing, NoRoomForOneSlotAndOneBlockNamesBothSizes) {
  // One slot (100000) + one block (16 x 64 = 1024) > 100500.
  auto p = PoolsFromBudget(100500, 16, 8, 1000, 64, 100000, "host memory (memory_fraction 0.7)");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(p.status().message(), "one state slot (100000 bytes per rank)")) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "one KV block (1024 bytes)")) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "from host memory (memory_fraction 0.7)")) << p.status();
  EXPECT_EQ(*StateSlotsFromBudget(101024, 100000, 1024, 8, "x"), 1);
  // Slots of 1 byte beside blocks of 100 in a budget of 101: half would hold 50, one block must fit.
  EXPECT_EQ(*StateSlotsFromBudget(101, 1, 100, 64, "x"), 1);
  auto tiny_slots = PoolsFromBudget(101, 1, 64, 1000, 100, 1, "x");
  ASSERT_TRUE(tiny_slots.ok()) << tiny_slots.status();
  EXPECT_EQ(tiny_slots->blocks, 1);
  EXPECT_EQ(*StateSlotsFromBudget(5, 0, 1024, 8, "x"), 0);
}

TEST(KvSizing, ExplicitKvTokensGetMaxNumSeqsSlots) {
  auto p = PoolsFromKvTokens(1000, 16, 12, 64, 4096);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tokens, 992);
  EXPECT_EQ(p->source, "kv_tokens");
  EXPECT_EQ(p->state_slots, 12);
  EXPECT_EQ(p->state_bytes, 12 * 4096);
  EXPECT_EQ(p->total_bytes(), 992 * 64 + 12 * 4096);
  EXPECT_EQ(PoolsFromKvTokens(1000, 16, 12, 64, 0)->state_slots, 0);
}

TEST(KvSizing, LogLineNamesStateSlots) {
  KvPoolSize p{4096, 65536, int64_t{3} << 29, "host memory (memory_fraction 0.7)", 64, int64_t{1} << 27};
  EXPECT_EQ(DescribeKvPool(p, 16),
            "KV pool: 65536 tokens (1.50 GiB per rank, 4096 blocks of 16) + 64 state slots (0.12 GiB per rank) "
            "from host memory (memory_fraction 0.7)");
}

}  // namespace
}  // namespace tandem::engine
