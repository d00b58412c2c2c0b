// The staged one-token product's plan (kernels/staged_plan.h): host arithmetic, no GPU. Qwen3-30B-
// A3B's q/k/v (5120 x 2048) on the H100 / H200 (132 SMs, a 100 KB split under the decode-attention
// carveout, 1 KB reserved a block) and the GB10 (48 SMs, 99 KB a block), in each format's staged row
// bytes: FP8 and NVFP4 staged whole before the wait, bf16 in part (the rest refilled after it); the
// refusals; and on many shapes the invariants the kernel relies on (the slots and the blocks beside
// it fit the split, every row belongs to one block, one block an SM at most).
#include "kernels/staged_plan.h"

#include <gtest/gtest.h>

namespace tandem::kernels {
namespace {

constexpr StagedDevice kH100{100 * 1024, 227 * 1024, 1024, 132};
constexpr StagedDevice kGb10{100 * 1024, 99 * 1024, 1024, 48};
constexpr int64_t kQkvRows = 5120, kHidden = 2048;
constexpr int64_t kFp8Row = 2048 + 16 * 4;         // the codes, then the 16 block scales of the row
constexpr int64_t kNvfp4Row = 1024 + 128 + 16;     // codes, group scales, the second scale's 16 bytes
constexpr int64_t kBf16Row = 2 * kHidden;

TEST(StagedPlan, QuantizedQkvStagedWholeOnTheH100) {
  const auto fp8 = PlanStaged(kH100, kHidden, kQkvRows, kFp8Row, /*norm=*/true);
  ASSERT_TRUE(fp8.has_value());
  EXPECT_EQ(fp8->rows_per_block, 39);
  EXPECT_EQ(fp8->blocks, 132);
  EXPECT_EQ(fp8->rw * fp8->warps, 8);
  EXPECT_EQ(fp8->slots, 5);
  EXPECT_TRUE(fp8->whole());
  EXPECT_EQ(fp8->smem, 6 * kHidden + 5 * 8 * kFp8Row);
  const auto nvfp4 = PlanStaged(kH100, kHidden, kQkvRows, kNvfp4Row, true);
  ASSERT_TRUE(nvfp4.has_value());
  EXPECT_TRUE(nvfp4->whole());
  EXPECT_EQ(nvfp4->rw * nvfp4->warps, 8);
}

TEST(StagedPlan, Bf16QkvStagedInPartWithRefills) {
  const auto bf16 = PlanStaged(kH100, kHidden, kQkvRows, kBf16Row, true);
  ASSERT_TRUE(bf16.has_value());
  EXPECT_FALSE(bf16->whole());
  EXPECT_EQ(bf16->rw, 1);
  EXPECT_EQ(bf16->warps, 4);
  EXPECT_EQ(bf16->groups, 10);
  EXPECT_EQ(bf16->slots, 5);  // half of each run before the wait
  // Without the norm's 12 KB (the product alone) the same 5 slots of 16 KB.
  const auto product = PlanStaged(kH100, kHidden, kQkvRows, kBf16Row, false);
  ASSERT_TRUE(product.has_value());
  EXPECT_EQ(product->slots, 5);
  EXPECT_EQ(product->smem, 5 * 4 * kBf16Row);
  // The GB10: 48 SMs, 107 rows a block, the same slots.
  const auto gb10 = PlanStaged(kGb10, kHidden, kQkvRows, kBf16Row, true);
  ASSERT_TRUE(gb10.has_value());
  EXPECT_EQ(gb10->rows_per_block, 107);
  EXPECT_EQ(gb10->blocks, 48);
  EXPECT_GE(gb10->slots, 3);
  EXPECT_FALSE(gb10->whole());
}

// Launched ahead, the block leaves room for the router's blocks it waits on: less of each run is
// staged before the wait, and the block with a router block and four reserves fits the split.
TEST(StagedPlan, AheadLeavesRoomForTheRouter) {
  const auto fp8 = PlanStaged(kH100, kHidden, kQkvRows, kFp8Row, true, kAheadNeighbourSmem);
  ASSERT_TRUE(fp8.has_value());
  EXPECT_FALSE(fp8->whole());
  EXPECT_GE(fp8->slots, 3);
  const int64_t router_block = 6 * kHidden + 256 + kH100.reserved;  // its x, norm weights and statics
  EXPECT_LE(fp8->smem + 128 + kH100.reserved + router_block + 4 * kH100.reserved, kH100.smem_per_sm);
  const auto nvfp4 = PlanStaged(kH100, kHidden, kQkvRows, kNvfp4Row, true, kAheadNeighbourSmem);
  ASSERT_TRUE(nvfp4.has_value());
  EXPECT_TRUE(nvfp4->whole());
}

TEST(StagedPlan, Refusals) {
  StagedDevice no_split = kH100;
  no_split.smem_per_sm = 0;
  EXPECT_FALSE(PlanStaged(no_split, kHidden, kQkvRows, kFp8Row, true).has_value()) << "not the attention split";
  EXPECT_FALSE(PlanStaged(kH100, 65536, 64, 2 * 65536, true).has_value()) << "no 2 slots of 2 rows of 128 KB";
  EXPECT_FALSE(PlanStaged(kH100, kHidden, kQkvRows, kFp8Row + 8, true).has_value()) << "rows not of 16 bytes";
  EXPECT_FALSE(PlanStaged(kH100, 2044, kQkvRows, kFp8Row, true).has_value()) << "cols not a multiple of 8";
  EXPECT_FALSE(PlanStaged(kH100, kHidden, 0, kFp8Row, true).has_value()) << "no rows";
}

TEST(StagedPlan, InvariantsOnManyShapes) {
  int planned = 0;
  for (const StagedDevice& d : {kH100, kGb10}) {
    for (int64_t cols : {256, 1024, 2048, 4096, 8192}) {
      for (int64_t out : {1, 7, 77, 128, 640, 2048, 5120, 12288, 151936}) {
        for (int64_t row_bytes : {cols / 2 + cols / 16 + 16, cols + 16 * ((cols + 127) / 128 * 4 / 16 + 1), 2 * cols}) {
          for (bool norm : {true, false}) {
            const int64_t neighbour = norm && out % 2 == 0 ? kAheadNeighbourSmem : 0;
            const auto p = PlanStaged(d, cols, out, row_bytes, norm, neighbour);
            if (!p) continue;
            const std::string at = std::to_string(cols) + " cols, " + std::to_string(out) + " rows, " +
                                   std::to_string(row_bytes) + " bytes a row";
            const int64_t g = p->rw * p->warps;
            EXPECT_GE(p->slots, 1) << at;
            EXPECT_LE(p->slots, kMaxStagedSlots) << at;
            EXPECT_LE(p->slots, p->groups) << at;
            EXPECT_EQ(p->groups, (p->rows_per_block + g - 1) / g) << at;
            EXPECT_GE(p->blocks * p->rows_per_block, out) << at;
            EXPECT_LT((p->blocks - 1) * p->rows_per_block, out) << at;
            EXPECT_LE(p->blocks, d.sm_count) << at;
            EXPECT_EQ(p->smem, (norm ? 6 * cols : 0) + p->slots * g * row_bytes) << at;
            // The block (with its static 128 bytes and the reserve) and four neighbours' reserves fit.
            EXPECT_LE(p->smem + 128 + d.reserved + 4 * d.reserved + neighbour, d.smem_per_sm) << at;
            EXPECT_LE(p->smem + 128, d.max_smem_block) << at;
            // Whole runs where they fit; else at least 3 slots, or 2 where no shape has 3.
            if (!p->whole()) {
              EXPECT_GE(p->slots, 2) << at;
            }
            ++planned;
          }
        }
      }
    }
  }
  EXPECT_GT(planned, 300) << "most shapes have a plan";
}

}  // namespace
}  // namespace tandem::kernels
