// The step plan (engine/step.h): its binary format, the checks every backend makes on it, and its
// flattened metadata (the layout the cpu ops and the cuda kernels read).
#include "engine/step.h"

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

SeqChunk Chunk(int64_t id, std::vector<int32_t> tokens, int32_t start, std::vector<int32_t> table) {
  SeqChunk c;
  c.seq_id = id;
  c.tokens = std::move(tokens);
  c.start_pos = start;
  c.block_table = std::move(table);
  return c;
}

TEST(Step, SerializeRoundTripAndRejectsGarbage) {
  StepBatch b;
  SeqChunk a = Chunk(42, {1, 2, 3}, 7, {5, 2, 9});
  a.want_logits = true;
  a.state_slot = 5;
  SeqChunk c = Chunk(-1, {4096}, 0, {});
  c.want_all_logits = true;
  b.seqs = {a, c};
  b.block_copies = {{5, 8}, {2, 3}};
  b.state_copies = {{0, 5}};
  const std::string bytes = b.Serialize();
  auto back = StepBatch::Deserialize(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->seqs.size(), 2u);
  EXPECT_EQ(back->seqs[0].seq_id, 42);
  EXPECT_EQ(back->seqs[0].tokens, a.tokens);
  EXPECT_EQ(back->seqs[0].start_pos, 7);
  EXPECT_EQ(back->seqs[0].state_slot, 5);
  EXPECT_EQ(back->seqs[1].state_slot, -1);
  EXPECT_EQ(back->seqs[0].block_table, a.block_table);
  EXPECT_TRUE(back->seqs[0].want_logits);
  EXPECT_FALSE(back->seqs[0].want_all_logits);
  EXPECT_EQ(back->seqs[1].seq_id, -1);
  EXPECT_TRUE(back->seqs[1].want_all_logits);
  EXPECT_EQ(back->num_tokens(), 4);
  ASSERT_EQ(back->block_copies.size(), 2u);
  EXPECT_EQ(back->block_copies[1].src, 2);
  EXPECT_EQ(back->block_copies[1].dst, 3);
  ASSERT_EQ(back->state_copies.size(), 1u);
  EXPECT_EQ(back->state_copies[0].dst, 5);
  // Every truncation is an error, never a crash; so is a bad magic or trailing bytes.
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(StepBatch::Deserialize(bytes.substr(0, n)).ok()) << n;
  EXPECT_FALSE(StepBatch::Deserialize("XXXX" + bytes.substr(4)).ok());
  EXPECT_FALSE(StepBatch::Deserialize(bytes + "x").ok());
}

TEST(CheckBatch, AcceptsAValidStep) {
  StepBatch b;
  b.seqs = {Chunk(1, {1, 2, 3, 4, 5}, 0, {3, 0}), Chunk(2, {7}, 3, {1})};
  EXPECT_TRUE(CheckBatch(b, /*num_blocks=*/4, /*block_size=*/4, /*vocab=*/8, kNoStateSlots).ok());
  EXPECT_TRUE(CheckBatch(StepBatch{}, 4, 4, 8, kNoStateSlots).ok());
  // A model with state: each chunk in its own slot of the pool.
  b.seqs[0].state_slot = 2;
  b.seqs[1].state_slot = 0;
  EXPECT_TRUE(CheckBatch(b, 4, 4, 8, /*state_slots=*/3).ok());
  EXPECT_TRUE(CheckBatch(StepBatch{}, 4, 4, 8, /*state_slots=*/0).ok());
}

// Forks' copies: inside their pool, never onto themselves; no state copies without state slots.
TEST(CheckBatch, CopiesMustBeInsideTheirPools) {
  StepBatch b;
  b.seqs = {Chunk(1, {7}, 3, {1})};
  b.block_copies = {{0, 3}};
  EXPECT_TRUE(CheckBatch(b, 4, 4, 8, kNoStateSlots).ok());
  for (CopyOp bad : {CopyOp{0, 4}, CopyOp{-1, 2}, CopyOp{2, 2}}) {
    b.block_copies = {{0, 3}, bad};
    const absl::Status st = CheckBatch(b, 4, 4, 8, kNoStateSlots);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad.src << " -> " << bad.dst;
    EXPECT_NE(st.message().find("KV block copy"), std::string::npos) << st;
  }
  b.block_copies.clear();
  b.state_copies = {{0, 1}};
  EXPECT_EQ(CheckBatch(b, 4, 4, 8, kNoStateSlots).code(), absl::StatusCode::kInvalidArgument);
  b.seqs[0].state_slot = 2;
  EXPECT_TRUE(CheckBatch(b, 4, 4, 8, /*state_slots=*/3).ok());
  b.state_copies = {{0, 3}};
  EXPECT_EQ(CheckBatch(b, 4, 4, 8, 3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckBatch, StateSlotsMustBeInThePoolAndDistinct) {
  StepBatch b;
  b.seqs = {Chunk(1, {1}, 0, {0}), Chunk(2, {2}, 0, {1})};
  b.seqs[0].state_slot = 1;
  b.seqs[1].state_slot = 1;
  absl::Status st = CheckBatch(b, 4, 4, 8, 2);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "step: sequence 2: state slot 1 is used by another sequence of the step");
  b.seqs[1].state_slot = 2;
  st = CheckBatch(b, 4, 4, 8, 2);
  EXPECT_EQ(st.message(), "step: sequence 2: state slot 2 outside the pool of 2");
  b.seqs[1].state_slot = -1;
  st = CheckBatch(b, 4, 4, 8, 2);
  EXPECT_EQ(st.message(), "step: sequence 2: state slot -1 outside the pool of 2");
  st = CheckBatch(b, 4, 4, 8, 0);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "Forward before allocating state slots");
  // A model without state ignores the slots.
  EXPECT_TRUE(CheckBatch(b, 4, 4, 8, kNoStateSlots).ok());
}

TEST(CheckBatch, NamesWhatIsWrong) {
  struct Case {
    SeqChunk chunk;
    std::string want;
  };
  const std::vector<Case> cases = {
      {Chunk(1, {}, 0, {0}), "step: sequence 1: empty chunk"},
      {Chunk(2, {1}, -1, {0}), "step: sequence 2: negative start_pos"},
      {Chunk(3, {1, 2, 3, 4, 5}, 0, {0}), "step: sequence 3: block table of 1 blocks does not cover 5 positions"},
      {Chunk(4, {1}, 0, {4}), "step: sequence 4: block id 4 outside the pool of 4"},
      {Chunk(5, {1}, 0, {-1}), "block id -1 outside the pool of 4"},
      {Chunk(6, {8}, 0, {0}), "step: sequence 6: token id 8 outside the vocabulary of 8"},
      {Chunk(7, {-2}, 0, {0}), "token id -2 outside the vocabulary"},
  };
  for (const auto& c : cases) {
    StepBatch b;
    b.seqs = {c.chunk};
    const absl::Status st = CheckBatch(b, 4, 4, 8, kNoStateSlots);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_NE(std::string(st.message()).find(c.want), std::string::npos) << st.message();
  }
  StepBatch b;
  b.seqs = {Chunk(1, {1}, 0, {0})};
  const absl::Status st = CheckBatch(b, /*num_blocks=*/0, 4, 8, kNoStateSlots);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "Forward before AllocateKvCache");
}

TEST(StepMeta, FlattensTokensSlotsRowsAndTables) {
  // Block size 4. Sequence 10: a prefill chunk of 3 tokens at positions 4..6 (blocks {2, 5}),
  // all logits; sequence 11: one decode token at position 1 (block {7}), its logits.
  StepBatch b;
  b.seqs = {Chunk(10, {100, 101, 102}, 4, {2, 5}), Chunk(11, {200}, 1, {7})};
  b.seqs[0].want_all_logits = true;
  b.seqs[1].want_logits = true;
  b.seqs[0].state_slot = 3;
  b.seqs[1].state_slot = 0;
  const StepMeta m = PlanStepMeta(b, /*pad_tables=*/false);
  EXPECT_EQ(m.T, 4);
  EXPECT_EQ(m.R, 4);
  EXPECT_EQ(m.S, 2);
  EXPECT_EQ(m.max_blocks, 2);
  std::vector<int32_t> h(m.total(), -1);
  WriteStepMeta(b, m, 4, h.data());
  auto part = [&](int64_t at, int64_t n) { return std::vector<int32_t>(h.begin() + at, h.begin() + at + n); };
  EXPECT_EQ(part(m.tokens(), 4), (std::vector<int32_t>{100, 101, 102, 200}));
  EXPECT_EQ(part(m.pos(), 4), (std::vector<int32_t>{4, 5, 6, 1}));
  // Position 4 is block table[1] = 5, offset 0: slot 20; position 1 of the second is 7 * 4 + 1.
  EXPECT_EQ(part(m.slot(), 4), (std::vector<int32_t>{20, 21, 22, 29}));
  EXPECT_EQ(part(m.token_seq(), 4), (std::vector<int32_t>{0, 0, 0, 1}));
  EXPECT_EQ(part(m.rows(), 4), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(part(m.tables(), 4), (std::vector<int32_t>{2, 5, 7, 0}));  // unused entries 0
  EXPECT_EQ(part(m.state_slots(), 2), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(part(m.seq_starts(), 3), (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(m.total(), m.seq_starts() + 3);

  // A graph's table width is a power of two: 3 blocks become 4.
  b.seqs = {Chunk(1, {1}, 9, {1, 2, 3})};
  b.seqs[0].want_logits = true;
  const StepMeta g = PlanStepMeta(b, /*pad_tables=*/true);
  EXPECT_EQ(g.max_blocks, 4);
  EXPECT_EQ(g.R, 1);
  std::vector<int32_t> hg(g.total(), -1);
  WriteStepMeta(b, g, 4, hg.data());
  EXPECT_EQ(std::vector<int32_t>(hg.begin() + g.tables(), hg.begin() + g.state_slots()),
            (std::vector<int32_t>{1, 2, 3, 0}));
  EXPECT_EQ(hg[g.slot()], 3 * 4 + 1);
}

}  // namespace
}  // namespace tandem::engine
