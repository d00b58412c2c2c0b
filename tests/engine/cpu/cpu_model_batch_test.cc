// A step batch on the cpu model (engine/cpu/cpu_model.cc): invariants of the paged KV cache and of
// batching, on qwen3moe-tiny and the hybrid qwen35moe-tiny / qwen3next-tiny (whose Gated DeltaNet
// layers carry a recurrent state per sequence instead of KV) at TP=1 and TP=2 (threads):
// - prefill in one chunk == the same prompt fed token by token (decode through the cache)
//   == the prompt in two chunks of different sizes;
// - a sequence whose block table is non-contiguous (blocks 5, 2, 9) == contiguous blocks;
// - the three golden prompts in one StepBatch == each alone (and a prefill batched with another
//   sequence's decode step).
// Each comparison is also checked against the transformers golden.
#include <cstdio>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/comm/rank_threads.h"
#include "engine/kv_cache.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine {
namespace {

constexpr int32_t kBlockSize = 4;  // small blocks: the 33-token prompt spans 9 of them
constexpr int32_t kNumBlocks = 64;
constexpr int32_t kStateSlots = 128;  // hybrid models: a chunk's state slot is its seq_id % kStateSlots

absl::Status RunOnRanks(const std::string& dir, int tp, const std::function<absl::Status(StepDriver&)>& check) {
  return RunRanksAsThreads(tp, [&](Comm& comm) -> absl::Status {
    ModelLoadOptions opt;
    opt.rank = comm.rank();
    opt.world = comm.world_size();
    opt.comm = &comm;
    opt.threads = 1;
    ASSIGN_OR_RETURN(auto model, Model::Load(dir, opt));
    if (comm.rank() != 0) return RunWorkerLoop(*model, comm);
    StepDriver driver(model.get(), &comm);
    RETURN_IF_ERROR(driver.AllocateKvCache(kNumBlocks, kBlockSize, kStateSlots));
    absl::Status st = check(driver);
    absl::Status stop = driver.Stop();
    return st.ok() ? stop : st;
  });
}

// A chunk of `ids[from, to)` of sequence `seq_id` with all its logits.
SeqChunk Chunk(int64_t seq_id, const std::vector<int32_t>& ids, int from, int to, std::vector<int32_t> table) {
  SeqChunk c;
  c.seq_id = seq_id;
  c.state_slot = static_cast<int32_t>(seq_id % kStateSlots);
  c.tokens.assign(ids.begin() + from, ids.begin() + to);
  c.start_pos = from;
  c.block_table = std::move(table);
  c.want_all_logits = true;
  return c;
}

// Logits of `ids` fed in chunks that end at each of `ends`, using `table`.
absl::StatusOr<std::vector<float>> LogitsInChunks(StepDriver& driver, const std::vector<int32_t>& ids,
                                                  const std::vector<int>& ends, const std::vector<int32_t>& table) {
  std::vector<float> all;
  int from = 0;
  for (int end : ends) {
    StepBatch batch;
    batch.seqs.push_back(Chunk(7, ids, from, end, table));
    ASSIGN_OR_RETURN(Logits l, driver.Forward(batch));
    if (l.rows() != end - from) return absl::InternalError("wrong number of logit rows");
    all.insert(all.end(), l.data.begin(), l.data.end());
    from = end;
  }
  return all;
}

std::vector<int32_t> Contiguous(int32_t first, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

// (model folder under the test data, TP size)
class cpu_model_batch : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  std::string dir() const { return testing::TestdataDir() + "/" + std::get<0>(GetParam()); }
  int tp() const { return std::get<1>(GetParam()); }
  const char* model() const { return std::get<0>(GetParam()).c_str(); }
  void SetUp() override {
    auto g = testing::LoadGolden(dir());
    ASSERT_TRUE(g.ok()) << g.status();
    golden_ = *g;
  }
  std::vector<testing::GoldenPrompt> golden_;
};

TEST_P(cpu_model_batch, PrefillEqualsDecodeAndChunkedPrefill) {
  const auto& g = golden_[2];  // 33 tokens
  const int n = static_cast<int>(g.ids.size());
  absl::Status st = RunOnRanks(dir(), tp(), [&](StepDriver& driver) -> absl::Status {
    const auto table = Contiguous(0, (n + kBlockSize - 1) / kBlockSize);
    ASSIGN_OR_RETURN(auto one_chunk, LogitsInChunks(driver, g.ids, {n}, table));
    std::vector<int> every_token;
    for (int i = 1; i <= n; ++i) every_token.push_back(i);
    ASSIGN_OR_RETURN(auto token_by_token, LogitsInChunks(driver, g.ids, every_token, table));
    ASSIGN_OR_RETURN(auto two_chunks, LogitsInChunks(driver, g.ids, {13, n}, table));
    const double decode_vs_prefill = testing::RelativeError(token_by_token, one_chunk);
    const double chunked_vs_prefill = testing::RelativeError(two_chunks, one_chunk);
    const double prefill_vs_golden = testing::RelativeError(one_chunk, g.logits);
    const double decode_vs_golden = testing::RelativeError(token_by_token, g.logits);
    std::printf("%s tp=%d %d tokens: token-by-token vs one chunk %.3g, chunks 13+20 vs one chunk %.3g; "
                "vs golden: one chunk %.3g, token-by-token %.3g\n",
                model(), tp(), n, decode_vs_prefill, chunked_vs_prefill, prefill_vs_golden, decode_vs_golden);
    EXPECT_LT(decode_vs_prefill, 1e-5);
    EXPECT_LT(chunked_vs_prefill, 1e-5);
    EXPECT_LT(prefill_vs_golden, 1e-4);
    EXPECT_LT(decode_vs_golden, 1e-4);
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

TEST_P(cpu_model_batch, NonContiguousBlockTable) {
  const auto& g = golden_[1];  // 7 tokens: 2 blocks of 4
  const int n = static_cast<int>(g.ids.size());
  absl::Status st = RunOnRanks(dir(), tp(), [&](StepDriver& driver) -> absl::Status {
    // Fill blocks 0..15 with another sequence first, so stale KV sits in the pool.
    ASSIGN_OR_RETURN(auto filler, LogitsInChunks(driver, golden_[2].ids, {33}, Contiguous(0, 9)));
    (void)filler;
    ASSIGN_OR_RETURN(auto contiguous, LogitsInChunks(driver, g.ids, {n}, Contiguous(20, 2)));
    // Blocks 5, 2, 9 (overwriting the filler's), prefill of 5 tokens then two decode steps.
    ASSIGN_OR_RETURN(auto scattered, LogitsInChunks(driver, g.ids, {5, 6, 7}, {5, 2, 9}));
    const double rel = testing::RelativeError(scattered, contiguous);
    const double vs_golden = testing::RelativeError(scattered, g.logits);
    std::printf("%s tp=%d blocks {5,2,9} vs {20,21}: %.3g; vs golden %.3g\n", model(), tp(), rel, vs_golden);
    EXPECT_LT(rel, 1e-5);
    EXPECT_LT(vs_golden, 1e-4);
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

TEST_P(cpu_model_batch, BatchOfThreeEqualsEachAlone) {
  absl::Status st = RunOnRanks(dir(), tp(), [&](StepDriver& driver) -> absl::Status {
    // Alone, each in its own blocks.
    std::vector<std::vector<float>> alone;
    for (int p = 0; p < 3; ++p) {
      const int n = static_cast<int>(golden_[p].ids.size());
      ASSIGN_OR_RETURN(auto l, LogitsInChunks(driver, golden_[p].ids, {n}, Contiguous(0, 9)));
      alone.push_back(l);
    }
    // Together, in one step, in disjoint blocks (in the reverse order of the pool).
    StepBatch batch;
    const std::vector<std::vector<int32_t>> tables = {{40}, {38, 39}, Contiguous(10, 9)};
    for (int p = 2; p >= 0; --p) {
      batch.seqs.push_back(Chunk(100 + p, golden_[p].ids, 0, static_cast<int>(golden_[p].ids.size()), tables[p]));
    }
    ASSIGN_OR_RETURN(Logits together, driver.Forward(batch));
    int64_t row = 0;
    for (int p = 2; p >= 0; --p) {
      const int64_t n = static_cast<int64_t>(golden_[p].ids.size());
      std::vector<float> mine(together.data.begin() + row * together.vocab,
                              together.data.begin() + (row + n) * together.vocab);
      EXPECT_EQ(together.seq_ids[row], 100 + p);
      EXPECT_EQ(together.positions[row], 0);
      row += n;
      const double rel = testing::RelativeError(mine, alone[p]);
      const double vs_golden = testing::RelativeError(mine, golden_[p].logits);
      std::printf("%s tp=%d prompt%d batched with the others vs alone: %.3g; vs golden %.3g\n", model(), tp(), p, rel,
                  vs_golden);
      EXPECT_LT(rel, 1e-5);
      EXPECT_LT(vs_golden, 1e-4);
    }
    EXPECT_EQ(row, together.rows());

    // A decode step of prompt 1 (its 7th token) batched with a prefill of prompt 2: the decode
    // row equals the last row of prompt 1 alone; only want_logits (last token) for prompt 2.
    StepBatch mixed;
    mixed.seqs.push_back(Chunk(1, golden_[1].ids, 0, 6, {50, 51}));
    ASSIGN_OR_RETURN(Logits first6, driver.Forward(mixed));
    (void)first6;
    mixed.seqs.clear();
    SeqChunk decode = Chunk(1, golden_[1].ids, 6, 7, {50, 51});
    SeqChunk prefill = Chunk(2, golden_[2].ids, 0, 33, Contiguous(52, 9));
    prefill.want_all_logits = false;
    prefill.want_logits = true;
    mixed.seqs = {prefill, decode};
    ASSIGN_OR_RETURN(Logits m, driver.Forward(mixed));
    if (m.rows() != 2) return absl::InternalError("mixed step: expected 2 rows, got " + std::to_string(m.rows()));
    std::vector<float> decode_row(m.row(1), m.row(1) + m.vocab);
    std::vector<float> prefill_row(m.row(0), m.row(0) + m.vocab);
    const int64_t V = m.vocab;
    std::vector<float> want1(alone[1].end() - V, alone[1].end()), want2(alone[2].end() - V, alone[2].end());
    const double d1 = testing::RelativeError(decode_row, want1), d2 = testing::RelativeError(prefill_row, want2);
    std::printf("%s tp=%d mixed step (prefill of prompt2 + decode of prompt1): %.3g, %.3g vs alone\n", model(), tp(), d2,
                d1);
    EXPECT_EQ(m.positions[0], 32);
    EXPECT_EQ(m.positions[1], 6);
    EXPECT_LT(d1, 1e-5);
    EXPECT_LT(d2, 1e-5);
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

TEST(cpu_model_batch_errors, BadPlansAreRejected) {
  absl::Status st = RunOnRanks(testing::TinyModelDir(), 1, [&](StepDriver& driver) -> absl::Status {
    StepBatch uncovered;
    uncovered.seqs.push_back(Chunk(1, {1, 2, 3, 4, 5}, 0, 5, {0}));  // 5 tokens, one block of 4
    auto r = driver.Forward(uncovered);
    EXPECT_FALSE(r.ok());
    std::printf("uncovered: %s\n", std::string(r.status().message()).c_str());
    EXPECT_NE(std::string(r.status().message()).find("does not cover"), std::string::npos);
    StepBatch outside;
    outside.seqs.push_back(Chunk(1, {1}, 0, 1, {kNumBlocks}));
    r = driver.Forward(outside);
    EXPECT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find("outside the pool"), std::string::npos);
    StepBatch bad_token;
    bad_token.seqs.push_back(Chunk(1, {99999}, 0, 1, {0}));
    r = driver.Forward(bad_token);
    EXPECT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find("outside the vocabulary"), std::string::npos);
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

INSTANTIATE_TEST_SUITE_P(Tp, cpu_model_batch,
                         ::testing::Combine(::testing::Values("qwen3moe-tiny", "qwen35moe-tiny", "qwen3next-tiny"),
                                            ::testing::Values(1, 2)),
                         [](const auto& p) {
                           // qwen3moe-tiny keeps its names (tp1, tp2); the hybrids are prefixed.
                           const std::string model = std::get<0>(p.param);
                           std::string n = (model == "qwen3moe-tiny" ? "" : model + "_") + "tp" +
                                           std::to_string(std::get<1>(p.param));
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

}  // namespace
}  // namespace tandem::engine
