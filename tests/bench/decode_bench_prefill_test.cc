#include "bench/decode_bench_prefill.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "engine/step.h"

namespace tandem::bench {
namespace {

// --prefill's rows (one sequence each) come first, then --prefill-batch's, in flag order.
TEST(DecodeBenchPrefill, RowsInFlagOrder) {
  auto o = ParseDecodeBenchFlags({"--prefill", "512,2048", "--prefill-batch", "8x1024,4x2048"});
  ASSERT_TRUE(o.ok()) << o.status();
  const std::vector<PrefillRow> rows = PrefillRows(*o);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].shape, (PrefillBatch{1, 512}));
  EXPECT_FALSE(rows[0].batched);
  EXPECT_EQ(rows[1].shape, (PrefillBatch{1, 2048}));
  EXPECT_EQ(rows[2].shape, (PrefillBatch{8, 1024}));
  EXPECT_TRUE(rows[2].batched);
  EXPECT_EQ(rows[3].shape, (PrefillBatch{4, 2048}));
  auto off = ParseDecodeBenchFlags({"--prefill-batch="});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(PrefillRows(*off).size(), 2u);
}

// The step of 8 x 1024 (block size 16): eight sequences from position 0, 1024 tokens each, every
// one in blocks and a state slot of its own, inside the pool the run plans; the engine's own
// checks accept it against that pool and refuse it against a pool one block or one slot short.
TEST(DecodeBenchPrefill, StepHoldsEveryPromptInItsOwnBlocks) {
  auto o = ParseDecodeBenchFlags({"--batches", "1", "--contexts", "64", "--steps", "4", "--runs", "2",
                                  "--prefill", "100", "--prefill-batch", "8x1024"});
  ASSERT_TRUE(o.ok()) << o.status();
  const engine::StepBatch step = PrefillStep({8, 1024}, o->block_size);
  ASSERT_EQ(step.seqs.size(), 8u);
  EXPECT_EQ(step.num_tokens(), 8 * 1024);
  std::set<int32_t> blocks, slots, seqs;
  std::set<std::vector<int32_t>> prompts;
  for (const engine::SeqChunk& c : step.seqs) {
    EXPECT_EQ(c.start_pos, 0);
    EXPECT_EQ(c.tokens.size(), 1024u);
    EXPECT_EQ(c.block_table.size(), 1024u / 16);
    EXPECT_TRUE(c.want_logits);
    EXPECT_FALSE(c.want_all_logits);
    for (int32_t b : c.block_table) EXPECT_TRUE(blocks.insert(b).second) << "block " << b << " shared";
    EXPECT_TRUE(slots.insert(c.state_slot).second);
    EXPECT_TRUE(seqs.insert(static_cast<int32_t>(c.seq_id)).second);
    prompts.insert(c.tokens);
  }
  EXPECT_EQ(prompts.size(), 8u) << "every prompt differs";
  EXPECT_EQ(blocks.size(), 8u * 64);

  const KvPool pool = PlanKvPool(*o);
  EXPECT_EQ(pool.blocks, 8 * 64);  // more than the decode point's ceil((64 + 4 * 4 + 1) / 16) = 6
  EXPECT_EQ(pool.state_slots, 8);
  constexpr int64_t kVocab = 151936;
  EXPECT_TRUE(engine::CheckBatch(step, pool.blocks, o->block_size, kVocab, pool.state_slots).ok());
  EXPECT_FALSE(engine::CheckBatch(step, pool.blocks - 1, o->block_size, kVocab, pool.state_slots).ok());
  EXPECT_FALSE(engine::CheckBatch(step, pool.blocks, o->block_size, kVocab, pool.state_slots - 1).ok());
  // The single-sequence row's step fits the same pool: one prompt, a block for its partial tail.
  const engine::StepBatch one = PrefillStep({1, 100}, o->block_size);
  ASSERT_EQ(one.seqs.size(), 1u);
  EXPECT_EQ(one.seqs[0].block_table.size(), 7u);
  EXPECT_TRUE(engine::CheckBatch(one, pool.blocks, o->block_size, kVocab, pool.state_slots).ok());
}

// Without prefill rows the pool is the decode points': the largest batch, each sequence with its
// context plus the warm-up and timed steps.
TEST(DecodeBenchPrefill, PoolOfTheDecodePointsAlone) {
  auto o = ParseDecodeBenchFlags({"--batches", "1,8,32", "--contexts", "1024,4096", "--steps", "32", "--runs", "5",
                                  "--prefill", "512,2048", "--prefill-batch="});
  ASSERT_TRUE(o.ok()) << o.status();
  const int per_seq = (4096 + 32 * 7 + 1 + 15) / 16;
  EXPECT_EQ(DecodeBlocksPerSeq(*o), per_seq);
  // Each point's tables cover its own context: the longest context's reach the reservation.
  EXPECT_EQ(DecodeTableBlocks(*o, 1024), (1024 + 32 * 7 + 1 + 15) / 16);
  EXPECT_EQ(DecodeTableBlocks(*o, 4096), per_seq);
  const KvPool pool = PlanKvPool(*o);
  EXPECT_EQ(pool.blocks, 32 * per_seq);
  EXPECT_EQ(pool.state_slots, 32);
}

// The check refuses a pool the GPU cannot hold, naming the flag and row that asks the most.
TEST(DecodeBenchPrefill, PoolTooLargeNamesTheFlag) {
  auto o = ParseDecodeBenchFlags({"--batches", "1", "--contexts", "1024", "--prefill", "2048", "--prefill-batch",
                                  "8x1024,64x8192"});
  ASSERT_TRUE(o.ok()) << o.status();
  constexpr double kTokenBytes = 98304;  // qwen3-30b-a3b's bf16 KV: 48 layers x K,V x 4 heads x 128 x 2 B
  // 64 x 8192 tokens of KV: 51.5 GB, more than 90% of 50 GB.
  const absl::Status st = CheckKvPoolFits(*o, kTokenBytes, 0, 50e9);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(st.message()),
            "bench: --prefill-batch 64x8192 needs KV for 524288 tokens (51.54 GB; the run's pool 51.54 GB), but "
            "the GPU has 50.00 GB free after the weights, a tenth of it kept for the activations; ask for fewer "
            "or shorter prompts");
  EXPECT_TRUE(CheckKvPoolFits(*o, kTokenBytes, 0, 60e9).ok());
  // The default row, 8 x 1024, on the same model: 0.81 GB.
  auto def = ParseDecodeBenchFlags({"--batches", "1", "--contexts", "1024", "--prefill-batch", "8x1024"});
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_TRUE(CheckKvPoolFits(*def, kTokenBytes, 0, 0.95e9).ok());
  EXPECT_FALSE(CheckKvPoolFits(*def, kTokenBytes, 0, 0.85e9).ok());
  // A model with state counts a slot per sequence, and says so.
  const absl::Status hybrid = CheckKvPoolFits(*def, kTokenBytes, 1e9, 5e9);
  ASSERT_FALSE(hybrid.ok());
  EXPECT_NE(hybrid.message().find("--prefill-batch 8x1024 needs KV for 8192 tokens and 8 state slots"),
            absl::string_view::npos)
      << hybrid;
  // The decode points named when they are what asks the most.
  auto big = ParseDecodeBenchFlags({"--batches", "1,64", "--contexts", "1024,32768", "--prefill-batch="});
  ASSERT_TRUE(big.ok()) << big.status();
  const absl::Status dec = CheckKvPoolFits(*big, kTokenBytes, 0, 50e9);
  ASSERT_FALSE(dec.ok());
  EXPECT_EQ(dec.message().rfind("bench: --batches 64 at --contexts 32768 needs KV for", 0), 0u) << dec;
  EXPECT_NE(dec.message().find("fewer or shorter sequences"), absl::string_view::npos) << dec;
}

// Tokens/s counts every token of the step: N x L over the median.
TEST(DecodeBenchPrefill, TableHasTheSequencesColumn) {
  std::vector<PrefillTiming> rows = {{{{1, 2048}, false}, {600.0, 590.0, 610.0}},
                                     {{{8, 1024}, true}, {400.0, 300.0, 350.0, 500.0}}};
  EXPECT_EQ(PrefillTable(rows),
            "\n| sequences | tokens per sequence | ms (median, min-max) | tokens/s |\n"
            "| ---: | ---: | ---: | ---: |\n"
            "| 1 | 2048 | 600.0 (590.0-610.0) | 3413 |\n"
            "| 8 | 1024 | 375.0 (300.0-500.0) | 21845 |\n");
  EXPECT_EQ(PrefillTable({}), "");
}

}  // namespace
}  // namespace tandem::bench
