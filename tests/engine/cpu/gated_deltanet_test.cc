// The Gated DeltaNet mixer (engine/cpu/gated_deltanet.cc) on synthetic weights: a prompt prefilled
// in one chunk, in two chunks and token by token gives the same outputs (the per-sequence conv and
// recurrent state carry over exactly); two sequences in one step keep separate states; threads
// over the value heads change no number; a chunk at
// position 0 restarts its sequence; a chunk that does not continue its sequence is refused.
#include "engine/cpu/gated_deltanet.h"

#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "engine/step.h"

namespace tandem::engine::cpu {
namespace {

constexpr int64_t kHidden = 16;
const DeltaNetLayout kShape{2, 4, 8, 6, 4};  // n_k, n_v, dk, dv, conv width

std::vector<float> Values(int64_t n, float seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.5f * std::sin(seed + 0.731f * static_cast<float>(i));
  return v;
}

constexpr int32_t kSlots = 8;  // the tests' sequence ids are their state slots

std::unique_ptr<GatedDeltaNet> Make() {
  const DeltaNetLayout& D = kShape;
  DeltaNetWeights w;
  w.in_qkv = Values(D.conv_dim() * kHidden, 0.1f);
  w.in_z = Values(D.value_dim() * kHidden, 0.2f);
  w.in_b = Values(D.n_v * kHidden, 0.3f);
  w.in_a = Values(D.n_v * kHidden, 0.4f);
  w.conv = Values(D.conv_dim() * D.conv_kernel, 0.5f);
  w.A_log = Values(D.n_v, 0.6f);
  w.dt_bias = Values(D.n_v, 0.7f);
  w.norm = Values(D.dv, 0.8f);
  for (float& v : w.norm) v += 1.0f;
  w.out = Values(kHidden * D.value_dim(), 0.9f);
  auto m = GatedDeltaNet::Create(std::move(w), D, kHidden, 1e-6f);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return nullptr;
  (*m)->AllocateStates(kSlots);
  return std::move(*m);
}

// x rows [from, to) of a prompt (T, hidden).
std::vector<float> Rows(const std::vector<float>& x, int64_t from, int64_t to) {
  return std::vector<float>(x.begin() + from * kHidden, x.begin() + to * kHidden);
}

// Runs chunks (seq id = state slot, start position, input rows) in one step; returns out (T, hidden).
struct Chunk {
  int64_t seq;
  int32_t start;
  std::vector<float> x;
};
absl::StatusOr<std::vector<float>> RunStep(GatedDeltaNet& mixer, const std::vector<Chunk>& chunks,
                                           ThreadPool* pool = nullptr) {
  StepBatch batch;
  std::vector<float> x;
  for (const Chunk& c : chunks) {
    SeqChunk s;
    s.seq_id = c.seq;
    s.state_slot = static_cast<int32_t>(c.seq);
    s.start_pos = c.start;
    s.tokens.assign(c.x.size() / kHidden, 1);
    s.block_table = {0, 1, 2, 3};
    batch.seqs.push_back(s);
    x.insert(x.end(), c.x.begin(), c.x.end());
  }
  StepContext ctx;
  ctx.m = PlanStepMeta(batch, false);
  std::vector<int32_t> meta(ctx.m.total());
  WriteStepMeta(batch, ctx.m, 4, meta.data());
  ctx.meta = meta.data();
  ctx.batch = &batch;
  ctx.pool = pool;
  std::vector<float> out(x.size());
  absl::Status st = mixer.Forward(ctx, x.data(), out.data());
  if (!st.ok()) return st;
  return out;
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

TEST(GatedDeltaNet, ChunksAndDecodeMatchOnePrefill) {
  const int64_t T = 9;
  const std::vector<float> x = Values(T * kHidden, 1.3f);
  auto whole_m = Make(), split_m = Make(), step_m = Make();
  auto whole = RunStep(*whole_m, {{7, 0, x}});
  ASSERT_TRUE(whole.ok()) << whole.status();
  double norm = 0;
  for (float v : *whole) norm = std::max(norm, double(std::abs(v)));
  ASSERT_GT(norm, 1e-3);  // not a trivially zero output

  std::vector<float> split, step;
  auto a = RunStep(*split_m, {{7, 0, Rows(x, 0, 5)}});
  auto b = RunStep(*split_m, {{7, 5, Rows(x, 5, T)}});
  ASSERT_TRUE(a.ok() && b.ok());
  split = *a;
  split.insert(split.end(), b->begin(), b->end());
  for (int64_t t = 0; t < T; ++t) {
    auto r = RunStep(*step_m, {{7, static_cast<int32_t>(t), Rows(x, t, t + 1)}});
    ASSERT_TRUE(r.ok()) << r.status();
    step.insert(step.end(), r->begin(), r->end());
  }
  std::printf("  max |whole| %.5f, split diff %.3g, token-by-token diff %.3g\n", norm, MaxDiff(split, *whole),
              MaxDiff(step, *whole));
  EXPECT_LT(MaxDiff(split, *whole), 1e-6);
  EXPECT_LT(MaxDiff(step, *whole), 1e-6);
}

TEST(GatedDeltaNet, SequencesKeepSeparateStatesAndRestartAtZero) {
  const std::vector<float> x = Values(6 * kHidden, 2.1f), y = Values(6 * kHidden, -0.4f);
  auto alone_m = Make(), both_m = Make();
  auto ax = RunStep(*alone_m, {{1, 0, x}});
  auto ay = RunStep(*alone_m, {{2, 0, y}});
  ASSERT_TRUE(ax.ok() && ay.ok());
  // Both prompts' first halves in one step, then their second halves in one step.
  auto h1 = RunStep(*both_m, {{1, 0, Rows(x, 0, 3)}, {2, 0, Rows(y, 0, 3)}});
  auto h2 = RunStep(*both_m, {{2, 3, Rows(y, 3, 6)}, {1, 3, Rows(x, 3, 6)}});
  ASSERT_TRUE(h1.ok() && h2.ok()) << h1.status() << h2.status();
  const int64_t n = 3 * kHidden;
  std::vector<float> bx(h1->begin(), h1->begin() + n), by(h1->begin() + n, h1->end());
  by.insert(by.end(), h2->begin(), h2->begin() + n);
  bx.insert(bx.end(), h2->begin() + n, h2->end());
  EXPECT_LT(MaxDiff(bx, *ax), 1e-6);
  EXPECT_LT(MaxDiff(by, *ay), 1e-6);
  // Slot 1 restarted with y gives y's outputs: its old state is gone.
  auto again = RunStep(*both_m, {{1, 0, y}});
  ASSERT_TRUE(again.ok());
  EXPECT_LT(MaxDiff(*again, *ay), 1e-6);
  // Reallocating the pool empties every slot: continuing sequence 2 is refused.
  both_m->AllocateStates(kSlots);
  EXPECT_EQ(RunStep(*both_m, {{2, 6, Rows(y, 0, 1)}}).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(GatedDeltaNet, ThreadsSplittingHeadsGiveTheSameNumbers) {
  // 100 tokens of two sequences: enough work (T n_v dk dv >= 2^14) for the pool to be used.
  const std::vector<float> x = Values(100 * kHidden, 0.9f);
  auto alone_m = Make(), pooled_m = Make();
  ThreadPool pool(3);
  const std::vector<Chunk> chunks = {{1, 0, Rows(x, 0, 60)}, {2, 0, Rows(x, 60, 100)}};
  auto alone = RunStep(*alone_m, chunks);
  auto pooled = RunStep(*pooled_m, chunks, &pool);
  ASSERT_TRUE(alone.ok() && pooled.ok());
  EXPECT_EQ(*pooled, *alone);
}

TEST(GatedDeltaNet, RefusesAChunkThatDoesNotContinueItsSequence) {
  auto m = Make();
  const std::vector<float> x = Values(3 * kHidden, 0.0f);
  auto never = RunStep(*m, {{4, 2, Rows(x, 0, 1)}});
  EXPECT_FALSE(never.ok());
  std::printf("  %s\n", never.status().ToString().c_str());
  ASSERT_TRUE(RunStep(*m, {{4, 0, x}}).ok());
  auto gap = RunStep(*m, {{4, 5, Rows(x, 0, 1)}});
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  std::printf("  %s\n", gap.status().ToString().c_str());
  auto outside = RunStep(*m, {{kSlots, 0, x}});
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);
  std::printf("  %s\n", outside.status().ToString().c_str());
}

TEST(GatedDeltaNet, RefusesWeightsOfTheWrongSize) {
  DeltaNetWeights w;
  auto m = GatedDeltaNet::Create(std::move(w), kShape, kHidden, 1e-6f);
  EXPECT_FALSE(m.ok());
  std::printf("  %s\n", m.status().ToString().c_str());
}

}  // namespace
}  // namespace tandem::engine::cpu
