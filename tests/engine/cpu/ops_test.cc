// The small pieces against hand-computed values: rmsnorm, rope, softmax, top-k, swiglu, matmul
// (threaded vs a naive loop), the step plan's binary format, the block allocator, and Model::Load's
// refusals of what the cpu backend does not support.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "engine/cpu/ops.h"
#include "engine/generate.h"
#include "engine/kv_cache.h"
#include "engine/model.h"
#include "engine/step.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine {
namespace {

using namespace cpu;

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol) << "index " << i;
    std::printf("  [%zu] got %.7f want %.7f\n", i, got[i], want[i]);
  }
}

TEST(Ops, RmsNorm) {
  // mean(x^2) = 30/4 = 7.5, so x / sqrt(7.5) = x * 0.3651484; the last weight is 2.
  std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 1, 2}, y(4);
  rmsnorm(y.data(), x.data(), w.data(), 1, 4, 0.0f);
  ExpectNear(y, {0.3651484, 0.7302967, 1.0954451, 2.9211870});
}

TEST(Ops, RopeRotateHalf) {
  // head_dim 4, theta 10000: inv_freq = {1, 0.01}; pairs (0, 2) and (1, 3); position 1.
  auto inv = rope_inv_freq(10000.0, 4);
  ExpectNear(inv, {1.0, 0.01});
  std::vector<float> x = {1, 2, 3, 4};
  rope(x.data(), 1, 4, 4, 1, inv.data());
  // x0' = 1 cos1 - 3 sin1, x2' = 3 cos1 + 1 sin1, x1' = 2 cos.01 - 4 sin.01, x3' = 4 cos.01 + 2 sin.01
  ExpectNear(x, {-1.9841106, 1.9599007, 2.4623779, 4.0197997}, 1e-5);
  // Position 0 is the identity.
  std::vector<float> y = {1, 2, 3, 4};
  rope(y.data(), 1, 4, 4, 0, inv.data());
  ExpectNear(y, {1, 2, 3, 4});
}

TEST(Ops, RopePartialRotaryLeavesTheRestAlone) {
  // rotary_dim 2 of head_dim 4: one pair (0, 1) with inv_freq 1 at position 2; dims 2, 3 pass.
  auto inv = rope_inv_freq(10000.0, 2);
  std::vector<float> x = {1, 2, 3, 4, /* second head */ 1, 2, 3, 4};
  rope(x.data(), 2, 4, 2, 2, inv.data());
  ExpectNear(x, {-2.2347417, 0.0770038, 3, 4, -2.2347417, 0.0770038, 3, 4}, 1e-5);
}

TEST(Ops, SoftmaxTopkSwiglu) {
  std::vector<float> p = {1, 2, 3};
  softmax(p.data(), 3);
  ExpectNear(p, {0.0900306, 0.2447285, 0.6652410});
  // Ties go to the lower index (as torch.topk on CPU in practice; ties are measure-zero anyway).
  std::vector<float> probs = {0.1f, 0.4f, 0.05f, 0.4f, 0.05f};
  std::vector<int32_t> idx(3);
  std::vector<float> val(3);
  topk(idx.data(), val.data(), probs.data(), 5, 3);
  EXPECT_EQ(idx, (std::vector<int32_t>{1, 3, 0}));
  ExpectNear(val, {0.4, 0.4, 0.1});
  std::vector<float> g = {1, 0, -1}, u = {2, 5, 1}, o(3);
  swiglu(o.data(), g.data(), u.data(), 3);
  ExpectNear(o, {1.4621172, 0.0, -0.2689414});
}

TEST(Ops, MatmulThreadedEqualsNaive) {
  // y (2, 2) = x (2, 3) W^T, W (2, 3): by hand.
  ThreadPool one(1);
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, w = {1, 0, -1, 0.5, 0.5, 0.5}, y(4);
  matmul(one, y.data(), x.data(), w.data(), 2, 3, 2);
  ExpectNear(y, {-2, 3, -2, 7.5});
  // Large enough to run on 3 threads: equal to the naive triple loop (same summation order).
  const int64_t R = 5, I = 96, O = 301;
  std::vector<float> xb(R * I), wb(O * I), y1(R * O), y3(R * O);
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = std::sin(0.1f * i);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = std::cos(0.07f * i);
  ThreadPool three(3);
  matmul(three, y3.data(), xb.data(), wb.data(), R, I, O);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t o = 0; o < O; ++o) {
      double s = 0;
      for (int64_t i = 0; i < I; ++i) s += static_cast<double>(xb[r * I + i]) * wb[o * I + i];
      ASSERT_NEAR(y3[r * O + o], s, 1e-4) << r << "," << o;
    }
  }
}

TEST(Step, SerializeRoundTripAndRejectsGarbage) {
  StepBatch b;
  SeqChunk a;
  a.seq_id = 42;
  a.tokens = {1, 2, 3};
  a.start_pos = 7;
  a.block_table = {5, 2, 9};
  a.want_logits = true;
  SeqChunk c;
  c.seq_id = -1;
  c.tokens = {4096};
  c.want_all_logits = true;
  b.seqs = {a, c};
  const std::string bytes = b.Serialize();
  auto back = StepBatch::Deserialize(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->seqs.size(), 2u);
  EXPECT_EQ(back->seqs[0].seq_id, 42);
  EXPECT_EQ(back->seqs[0].tokens, a.tokens);
  EXPECT_EQ(back->seqs[0].start_pos, 7);
  EXPECT_EQ(back->seqs[0].block_table, a.block_table);
  EXPECT_TRUE(back->seqs[0].want_logits);
  EXPECT_FALSE(back->seqs[0].want_all_logits);
  EXPECT_EQ(back->seqs[1].seq_id, -1);
  EXPECT_TRUE(back->seqs[1].want_all_logits);
  EXPECT_EQ(back->num_tokens(), 4);
  // Every truncation is an error, never a crash; so is a bad magic or trailing bytes.
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(StepBatch::Deserialize(bytes.substr(0, n)).ok()) << n;
  EXPECT_FALSE(StepBatch::Deserialize("XXXX" + bytes.substr(4)).ok());
  EXPECT_FALSE(StepBatch::Deserialize(bytes + "x").ok());
}

TEST(KvCache, BlockAllocator) {
  BlockAllocator alloc(3);
  EXPECT_EQ(*alloc.Allocate(), 0);
  EXPECT_EQ(*alloc.Allocate(), 1);
  EXPECT_EQ(alloc.num_used(), 2);
  std::vector<int32_t> table;
  EXPECT_TRUE(EnsureBlocks(alloc, 16, 16, table).ok());  // one block covers 16 tokens
  EXPECT_EQ(table, (std::vector<int32_t>{2}));
  auto full = alloc.Allocate();
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(EnsureBlocks(alloc, 16, 17, table).ok());
  alloc.Free(1);
  alloc.Free(1);  // double free is ignored
  EXPECT_EQ(alloc.num_free(), 1);
  EXPECT_EQ(*alloc.Allocate(), 1);
  alloc.Free(std::vector<int32_t>{0, 1, 2});
  EXPECT_EQ(alloc.num_free(), 3);
  KvCacheSpec spec{48, 2, 128, 2};
  EXPECT_EQ(spec.bytes_per_token(), 2 * 48 * 2 * 128 * 2);
}

TEST(KvCache, PositionsMapThroughTheBlockTable) {
  PagedKvCache kv(1, 10, 4, 2, 3);  // 1 layer, 10 blocks of 4 tokens, 2 kv heads, head_dim 3
  std::vector<int32_t> table = {5, 2, 9};
  // Position 6 is block table[1] = 2, slot 2: element offset (2 * 4 + 2) * 6.
  float* k6 = kv.key(0, table, 6);
  float* k0 = kv.key(0, {0}, 0);
  EXPECT_EQ(k6 - k0, (2 * 4 + 2) * 6);
  EXPECT_EQ(kv.value(0, table, 8) - kv.value(0, {0}, 0), (9 * 4 + 0) * 6);
}

TEST(ModelLoad, RefusesWhatTheCpuBackendDoesNotSupport) {
  const std::string td = testing::TestdataDir();
  struct Case {
    std::string dir;
    ModelLoadOptions opt;
    std::string want;
  };
  ModelLoadOptions tp3;
  tp3.world = 3;
  ModelLoadOptions tpu;
  tpu.backend = "tpu";
  ModelLoadOptions tp2_no_comm;
  tp2_no_comm.world = 2;
  std::vector<Case> cases = {
      {td + "/qwen3next-tiny", {}, "model_type qwen3_next is not supported by the cpu backend yet"},
      {td + "/qwen35moe-tiny", {}, "is not supported by the cpu backend yet"},
      {td + "/qwen3moe-tiny", tp3, "num_attention_heads (8) is not divisible by the tensor-parallel size 3"},
      {td + "/qwen3moe-tiny", tpu, "unknown backend \"tpu\""},
      {td + "/qwen3moe-tiny", tp2_no_comm, "needs a comm"},
      {td + "/does-not-exist", {}, "does-not-exist"},
  };
  for (const auto& c : cases) {
    auto m = Model::Load(c.dir, c.opt);
    ASSERT_FALSE(m.ok()) << c.dir;
    const std::string msg(m.status().message());
    std::printf("%s: %s\n", c.dir.c_str(), msg.c_str());
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
  }
}

TEST(Sampling, GreedyAndSeededTemperature) {
  std::mt19937_64 rng(7);
  const std::vector<float> logits = {0.0f, std::log(3.0f), -1.0f, 0.5f};
  EXPECT_EQ(SampleToken(logits.data(), 4, 0.0f, rng), 1);  // argmax
  // At T = 1 the draw follows softmax(logits): p(1) = 3 / (1 + 3 + e^-1 + e^0.5) = 0.5275.
  const double p1 = 3.0 / (1.0 + 3.0 + std::exp(-1.0) + std::exp(0.5));
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += SampleToken(logits.data(), 4, 1.0f, rng) == 1;
  std::printf("p(token 1) sampled %.4f, expected %.4f\n", static_cast<double>(ones) / n, p1);
  EXPECT_NEAR(static_cast<double>(ones) / n, p1, 0.02);
  // The same seed gives the same sequence of draws.
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(SampleToken(logits.data(), 4, 0.8f, a), SampleToken(logits.data(), 4, 0.8f, b));
}

}  // namespace
}  // namespace tandem::engine
