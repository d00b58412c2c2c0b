// The scheduler's plans as pure functions of the queues and the free blocks: chunked prefill,
// decodes first, max_num_seqs, priority, preemption (recompute) of the most recent sequence.
#include "engine/batching/scheduler.h"

#include <cstdio>
#include <algorithm>
#include <numeric>
#include <random>
#include <unordered_map>
#include <string>

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

std::vector<int32_t> Prompt(int n, int32_t first = 1) {
  std::vector<int32_t> p(n);
  std::iota(p.begin(), p.end(), first);
  return p;
}

// "id:start+len[L][A]" per chunk (L = wants logits, A = every row of them), e.g. "1:0+8 2:3+1L".
std::string Describe(const StepPlan& plan) {
  std::string s;
  for (const auto& c : plan.batch.seqs) {
    if (!s.empty()) s += " ";
    s += std::to_string(c.seq_id) + ":" + std::to_string(c.start_pos) + "+" + std::to_string(c.tokens.size()) +
         (c.want_logits ? "L" : "") + (c.want_all_logits ? "A" : "");
  }
  return s;
}

// Plays the model: every chunk that wanted logits gets token 100 + seq id appended.
void Sample(Scheduler& s, const StepPlan& plan) {
  for (const auto& c : plan.batch.seqs) {
    if (c.want_logits) s.AppendToken(c.seq_id, static_cast<int32_t>(100 + c.seq_id));
  }
}

TEST(SchedulerTest, ChunksALongPromptAndWantsLogitsOnlyAtTheEnd) {
  Scheduler s({/*max_num_seqs=*/4, /*max_num_batched_tokens=*/8, /*block_size=*/4, /*num_blocks=*/32});
  s.Add(1, Prompt(20));
  std::vector<std::string> steps;
  for (int i = 0; i < 4; ++i) {
    StepPlan p = s.Schedule();
    steps.push_back(Describe(p));
    Sample(s, p);
  }
  for (const auto& d : steps) std::printf("step: %s\n", d.c_str());
  EXPECT_EQ(steps, (std::vector<std::string>{"1:0+8", "1:8+8", "1:16+4L", "1:20+1L"}));
  const SequenceState* seq = s.Find(1);
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->block_table.size(), 6u);  // 21 positions computed, block_size 4
  EXPECT_EQ(seq->num_generated(), 2);
}

TEST(SchedulerTest, DecodesGoFirstThenNewPrefillsShareTheBudget) {
  Scheduler s({4, 8, 4, 32});
  s.Add(1, Prompt(5));
  StepPlan p = s.Schedule();
  EXPECT_EQ(Describe(p), "1:0+5L");
  Sample(s, p);
  s.Add(2, Prompt(10));
  s.Add(3, Prompt(3));
  p = s.Schedule();
  // The decode of 1, then 7 tokens of 2's prompt; 3 waits for budget.
  EXPECT_EQ(Describe(p), "1:5+1L 2:0+7");
  EXPECT_EQ(p.num_decode_tokens, 1);
  EXPECT_EQ(p.num_prefill_tokens, 7);
  Sample(s, p);
  p = s.Schedule();
  EXPECT_EQ(Describe(p), "1:6+1L 2:7+3L 3:0+3L");
  EXPECT_EQ(s.num_running(), 3);
  EXPECT_EQ(s.num_waiting(), 0);
}

TEST(SchedulerTest, MaxNumSeqsAndPriority) {
  Scheduler s({2, 64, 4, 32});
  s.Add(1, Prompt(3));
  s.Add(2, Prompt(3));
  s.Add(3, Prompt(3));
  s.Add(4, Prompt(3), /*priority=*/true);
  StepPlan p = s.Schedule();
  // The probe (4) jumps the queue; then 1; 2 and 3 wait for a slot.
  EXPECT_EQ(Describe(p), "4:0+3L 1:0+3L");
  EXPECT_EQ(s.num_waiting(), 2);
  Sample(s, p);
  EXPECT_TRUE(s.Remove(4));
  p = s.Schedule();
  EXPECT_EQ(Describe(p), "1:3+1L 2:0+3L");
}

TEST(SchedulerTest, PreemptsTheMostRecentAndRecomputesPromptPlusOutput) {
  // 4 blocks of 4 = 16 positions. Two sequences of 6 prompt tokens take 2 blocks each.
  Scheduler s({4, 64, 4, 4});
  s.Add(1, Prompt(6));
  s.Add(2, Prompt(6, 50));
  StepPlan p = s.Schedule();
  EXPECT_EQ(Describe(p), "1:0+6L 2:0+6L");
  EXPECT_EQ(s.num_blocks_used(), 4);
  Sample(s, p);
  p = s.Schedule();  // positions 6: still in block 1
  EXPECT_EQ(Describe(p), "1:6+1L 2:6+1L");
  Sample(s, p);
  p = s.Schedule();  // position 7
  Sample(s, p);
  // Position 8 needs a third block each: 1 cannot get one, so 2 (admitted last) is preempted.
  p = s.Schedule();
  std::printf("plan after the pool ran out: %s; preempted %zu\n", Describe(p).c_str(), p.preempted.size());
  EXPECT_EQ(Describe(p), "1:8+1L");
  ASSERT_EQ(p.preempted, (std::vector<int64_t>{2}));
  EXPECT_EQ(s.num_preemptions(), 1);
  const SequenceState* two = s.Find(2);
  ASSERT_NE(two, nullptr);
  EXPECT_FALSE(two->running);
  EXPECT_EQ(two->num_computed, 0);
  EXPECT_TRUE(two->block_table.empty());
  EXPECT_EQ(two->num_generated(), 3);  // its output is kept
  EXPECT_EQ(s.num_waiting(), 1);
  Sample(s, p);
  // 1 finishes: 2 comes back and recomputes its 6 prompt + 3 generated tokens in one chunk that
  // wants the logits of the last one (its 4th token).
  s.Remove(1);
  p = s.Schedule();
  EXPECT_EQ(Describe(p), "2:0+9L");
  EXPECT_EQ(p.batch.seqs[0].tokens, (std::vector<int32_t>{50, 51, 52, 53, 54, 55, 102, 102, 102}));
  EXPECT_EQ(p.num_prefill_tokens, 9);
}

TEST(SchedulerTest, MidPrefillNewcomerPreemptsItselfAndComesBackLater) {
  // 2 decodes while 1 (admitted after it) prefills in chunks; when the pool cannot hold 1's last
  // chunk, 1 is the most recently admitted: it gives its blocks back and waits, 2 keeps going.
  Scheduler s({4, 8, 4, 4});
  s.Add(2, Prompt(3));
  StepPlan p = s.Schedule();
  EXPECT_EQ(Describe(p), "2:0+3L");
  Sample(s, p);
  s.Add(1, Prompt(12, 20));  // needs 3 blocks; 2 holds 1
  p = s.Schedule();
  EXPECT_EQ(Describe(p), "2:3+1L 1:0+7");
  Sample(s, p);
  p = s.Schedule();  // 2 takes the last free block for position 4; 1 would need a 3rd
  std::printf("plan: %s; preempted %zu\n", Describe(p).c_str(), p.preempted.size());
  EXPECT_EQ(Describe(p), "2:4+1L");
  EXPECT_EQ(p.preempted, (std::vector<int64_t>{1}));
  EXPECT_EQ(s.num_blocks_used(), 2);
  Sample(s, p);
  p = s.Schedule();  // no preemption now: 1 is admitted again from scratch
  EXPECT_EQ(Describe(p), "2:5+1L 1:0+7");
}

TEST(SchedulerTest, RemoveFreesBlocksAndUnknownIdsAreIgnored) {
  Scheduler s({4, 64, 4, 8});
  s.Add(1, Prompt(9));
  s.Add(2, Prompt(2));
  StepPlan p = s.Schedule();
  EXPECT_EQ(s.num_blocks_used(), 4);
  EXPECT_TRUE(s.Remove(1));
  EXPECT_FALSE(s.Remove(77));
  EXPECT_TRUE(s.Remove(2));
  EXPECT_EQ(s.num_blocks_used(), 0);
  EXPECT_FALSE(s.has_work());
  EXPECT_TRUE(s.Schedule().empty());
}

// "id@slot" per chunk, e.g. "1@0 2@1".
std::string Slots(const StepPlan& plan) {
  std::string s;
  for (const auto& c : plan.batch.seqs) {
    if (!s.empty()) s += " ";
    s += std::to_string(c.seq_id) + "@" + std::to_string(c.state_slot);
  }
  return s;
}

// "src>dst" per copy of a plan, blocks then "s" and slots, e.g. "2>3 s0>1".
std::string Copies(const StepPlan& plan) {
  std::string s;
  for (const CopyOp& c : plan.batch.block_copies) s += (s.empty() ? "" : " ") + std::to_string(c.src) + ">" + std::to_string(c.dst);
  for (const CopyOp& c : plan.batch.state_copies) s += (s.empty() ? "s" : " s") + std::to_string(c.src) + ">" + std::to_string(c.dst);
  return s;
}

// Two choices forked from a prompt of 10 (blocks of 4): each holds the prompt's two full blocks
// with the parent and a copy of its partial third block (positions 8, 9), made by the next step
// before the parent writes position 10 there; the choices' first chunks are one-token decodes.
TEST(SchedulerTest, ForksShareThePromptsFullBlocksAndCopyItsPartialOne) {
  Scheduler s({8, 64, 4, 16});
  s.Add(1, Prompt(10));
  StepPlan p = s.Schedule();
  EXPECT_EQ(Describe(p), "1:0+10L");
  Sample(s, p);
  ASSERT_TRUE(s.Fork(1, 2, 55));
  ASSERT_TRUE(s.Fork(1, 3, 66));
  EXPECT_FALSE(s.Fork(1, 3, 66));   // the id is taken
  EXPECT_FALSE(s.Fork(9, 4, 66));   // no such parent
  const std::vector<int32_t> parent_blocks = s.Find(1)->block_table;
  ASSERT_EQ(parent_blocks.size(), 3u);
  EXPECT_EQ(s.num_blocks_used(), 5);  // the two copies' blocks
  EXPECT_EQ(s.Find(2)->num_computed, 10);
  p = s.Schedule();
  std::printf("after the forks: %s, copies %s\n", Describe(p).c_str(), Copies(p).c_str());
  EXPECT_EQ(Describe(p), "1:10+1L 2:10+1L 3:10+1L");
  EXPECT_EQ(p.num_decode_tokens, 3);
  EXPECT_EQ(p.num_prefill_tokens, 0);
  EXPECT_EQ(p.batch.seqs[1].tokens, (std::vector<int32_t>{55}));
  EXPECT_EQ(p.batch.seqs[2].tokens, (std::vector<int32_t>{66}));
  ASSERT_EQ(p.batch.block_copies.size(), 2u);
  EXPECT_TRUE(p.batch.state_copies.empty());
  for (int i : {1, 2}) {
    const auto& table = p.batch.seqs[i].block_table;
    ASSERT_EQ(table.size(), 3u);
    EXPECT_EQ(table[0], parent_blocks[0]);
    EXPECT_EQ(table[1], parent_blocks[1]);
    EXPECT_NE(table[2], parent_blocks[2]);  // the tail block is each choice's own copy
    EXPECT_EQ(p.batch.block_copies[i - 1].src, parent_blocks[2]);
    EXPECT_EQ(p.batch.block_copies[i - 1].dst, table[2]);
  }
  EXPECT_NE(p.batch.seqs[1].block_table[2], p.batch.seqs[2].block_table[2]);
  EXPECT_EQ(Copies(s.Schedule()), "");  // once
  // The shared blocks stay until their last holder goes.
  s.Remove(1);
  s.Remove(2);
  EXPECT_EQ(s.num_blocks_used(), 3);
  s.Remove(3);
  EXPECT_EQ(s.num_blocks_used(), 0);
}

// A pool of 4 blocks, the parent holding 3: the first fork takes the last block for its copy; the
// second finds none and recomputes the partial block into a block of its own, which it has to
// wait for (preempted by the step, it holds nothing meanwhile).
TEST(SchedulerTest, AForkWithoutABlockForItsCopyRecomputesThePartialBlock) {
  Scheduler s({8, 64, 4, 4});
  s.Add(1, Prompt(10));
  Sample(s, s.Schedule());
  ASSERT_TRUE(s.Fork(1, 2, 55));
  ASSERT_TRUE(s.Fork(1, 3, 66));
  EXPECT_EQ(s.Find(2)->num_computed, 10);
  EXPECT_EQ(s.Find(3)->num_computed, 8);
  EXPECT_EQ(s.Find(3)->block_table.size(), 2u);
  StepPlan p = s.Schedule();
  EXPECT_EQ(Describe(p), "1:10+1L 2:10+1L");
  EXPECT_EQ(p.preempted, (std::vector<int64_t>{3}));
  EXPECT_EQ(Copies(p), std::to_string(s.Find(1)->block_table[2]) + ">" + std::to_string(s.Find(2)->block_table[2]));
  Sample(s, p);
  s.Remove(1);
  s.Remove(2);
  EXPECT_EQ(Describe(s.Schedule()), "3:0+11L");  // its prompt and first token from scratch
}

TEST(SchedulerTest, AForkOfABlockAlignedPromptIsADecodeAndAForkWithoutRoomWaitsHoldingNothing) {
  Scheduler s({2, 64, 4, 16});
  s.Add(1, Prompt(8));
  StepPlan p = s.Schedule();
  Sample(s, p);
  ASSERT_TRUE(s.Fork(1, 2, 55));
  ASSERT_TRUE(s.Fork(1, 3, 66));  // max_num_seqs 2: waits
  EXPECT_EQ(s.num_running(), 2);
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_TRUE(s.Find(3)->block_table.empty());
  EXPECT_EQ(s.Find(3)->num_computed, 0);
  p = s.Schedule();
  EXPECT_EQ(Describe(p), "1:8+1L 2:8+1L");
  EXPECT_EQ(Copies(p), "");  // no partial block: nothing to copy
  EXPECT_EQ(p.num_decode_tokens, 2);
  Sample(s, p);
  s.Remove(1);
  p = s.Schedule();  // 3 prefills its prompt and first token from scratch
  EXPECT_EQ(Describe(p), "2:9+1L 3:0+9L");
  EXPECT_EQ(p.batch.seqs[1].tokens.back(), 66);
}

// With state slots a fork gets a slot of its own holding a copy of its parent's (and the copy of
// the partial block): it continues at the prompt's end. A fork that finds no free slot waits and
// prefills again, in a fresh slot, when one is free.
TEST(SchedulerTest, WithStateSlotsAForkStartsFromACopyOfItsParentsSlot) {
  SchedulerConfig config{4, 64, 4, 16};
  config.num_state_slots = 2;
  Scheduler s(config);
  s.Add(1, Prompt(6));
  StepPlan p = s.Schedule();
  Sample(s, p);
  ASSERT_TRUE(s.Fork(1, 2, 55));
  ASSERT_TRUE(s.Fork(1, 3, 66));  // no slot left: waits
  p = s.Schedule();
  EXPECT_EQ(Describe(p), "1:6+1L 2:6+1L");
  EXPECT_EQ(Slots(p), "1@0 2@1");
  EXPECT_EQ(Copies(p), std::to_string(s.Find(1)->block_table[1]) + ">" + std::to_string(s.Find(2)->block_table[1]) +
                           " s0>1");
  EXPECT_EQ(p.num_prefill_tokens, 0);
  EXPECT_EQ(s.num_waiting(), 1);
  Sample(s, p);
  s.Remove(1);
  p = s.Schedule();
  EXPECT_EQ(Describe(p), "2:7+1L 3:0+7L");
  EXPECT_EQ(Slots(p), "2@1 3@0");
  EXPECT_EQ(Copies(p), "");
}

// A parent that ends at its first token (before the next step) leaves its forks' copies in place:
// the step copies before anything reuses its slot or block. A fork that ends first takes its
// copies with it; a fork that finds no block for its copy recomputes its whole prompt (the state
// after the prompt exists only in the parent's slot).
TEST(SchedulerTest, WithStateSlotsCopiesOutliveTheParentNotTheFork) {
  SchedulerConfig config{4, 64, 4, 16};
  config.num_state_slots = 3;
  Scheduler s(config);
  s.Add(1, Prompt(6));
  Sample(s, s.Schedule());
  ASSERT_TRUE(s.Fork(1, 2, 55));
  ASSERT_TRUE(s.Fork(1, 3, 66));
  const int32_t parent_tail = s.Find(1)->block_table[1];
  const int32_t tail2 = s.Find(2)->block_table[1];
  s.Remove(1);
  s.Remove(3);
  StepPlan p = s.Schedule();
  EXPECT_EQ(Describe(p), "2:6+1L");
  EXPECT_EQ(Copies(p), std::to_string(parent_tail) + ">" + std::to_string(tail2) + " s0>1");

  SchedulerConfig small{4, 64, 4, /*num_blocks=*/2, /*num_state_slots=*/2};
  Scheduler t(small);
  t.Add(1, Prompt(6));
  Sample(t, t.Schedule());
  ASSERT_TRUE(t.Fork(1, 2, 55));
  EXPECT_EQ(t.Find(2)->num_computed, 0);
  EXPECT_TRUE(t.Find(2)->block_table.empty());
  EXPECT_EQ(t.Find(2)->state_slot, 1);
  EXPECT_EQ(Copies(t.Schedule()), "");
}

// Prompt logits come in chunks of at most max_prompt_logits_tokens, every row of the prompt up to
// the sampling row, and not again when a preempted sequence recomputes its prompt.
TEST(SchedulerTest, PromptLogitsChunksAreCutAndNotRepeated) {
  SchedulerConfig config{4, 64, 4, 16};
  config.max_prompt_logits_tokens = 4;
  Scheduler s(config);
  s.Add(1, Prompt(10), false, /*want_prompt_logits=*/true);
  std::vector<std::string> steps;
  for (int i = 0; i < 4; ++i) {
    StepPlan p = s.Schedule();
    steps.push_back(Describe(p));
    Sample(s, p);
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"1:0+4A", "1:4+4A", "1:8+2LA", "1:10+1L"}));
  s.Add(2, Prompt(3), false, true);
  EXPECT_EQ(Describe(s.Schedule()), "1:11+1L 2:0+3LA");
}

TEST(SchedulerTest, WithoutStateSlotsChunksCarryNone) {
  Scheduler s({4, 64, 4, 32});
  s.Add(1, Prompt(3));
  s.Add(2, Prompt(5));
  EXPECT_EQ(Slots(s.Schedule()), "1@-1 2@-1");
  EXPECT_EQ(s.num_state_slots_total(), 0);
  EXPECT_EQ(s.num_state_slots_used(), 0);
}

TEST(SchedulerTest, AdmissionWaitsForAStateSlotAndReusesFreedOnes) {
  // max_num_seqs 8 but 2 slots: the third sequence waits although budget and blocks allow it.
  Scheduler s({8, 64, 4, 32, /*num_state_slots=*/2});
  s.Add(1, Prompt(3));
  s.Add(2, Prompt(3, 20));
  s.Add(3, Prompt(3, 40));
  StepPlan p = s.Schedule();
  EXPECT_EQ(Slots(p), "1@0 2@1");
  EXPECT_EQ(s.num_state_slots_used(), 2);
  EXPECT_EQ(s.num_waiting(), 1);
  Sample(s, p);
  p = s.Schedule();  // the decodes keep their slots; still no slot for 3
  EXPECT_EQ(Slots(p), "1@0 2@1");
  EXPECT_EQ(Describe(p), "1:3+1L 2:3+1L");
  Sample(s, p);
  // 1 finishes: 3 takes the slot it freed and starts at position 0 (restarting its state).
  EXPECT_TRUE(s.Remove(1));
  EXPECT_EQ(s.num_state_slots_used(), 1);
  p = s.Schedule();
  EXPECT_EQ(Slots(p), "2@1 3@0");
  EXPECT_EQ(Describe(p), "2:4+1L 3:0+3L");
  // A cancelled waiting sequence holds no slot; a cancelled running one gives its slot back.
  s.Add(4, Prompt(2, 60));
  EXPECT_TRUE(s.Remove(4));
  EXPECT_EQ(s.num_state_slots_used(), 2);
  EXPECT_TRUE(s.Remove(2));
  EXPECT_TRUE(s.Remove(3));
  EXPECT_EQ(s.num_state_slots_used(), 0);
}

TEST(SchedulerTest, PreemptionGivesTheStateSlotBack) {
  // As PreemptsTheMostRecent...: 4 blocks of 4, two sequences of 6; 2 is preempted at position 8.
  Scheduler s({4, 64, 4, 4, /*num_state_slots=*/2});
  s.Add(1, Prompt(6));
  s.Add(2, Prompt(6, 50));
  StepPlan p = s.Schedule();
  EXPECT_EQ(Slots(p), "1@0 2@1");
  for (int i = 0; i < 3; ++i) {
    Sample(s, p);
    p = s.Schedule();
  }
  ASSERT_EQ(p.preempted, (std::vector<int64_t>{2}));
  EXPECT_EQ(Slots(p), "1@0");
  EXPECT_EQ(s.Find(2)->state_slot, -1);
  EXPECT_EQ(s.num_state_slots_used(), 1);
  Sample(s, p);
  s.Add(3, Prompt(2, 70));  // arrives after the preemption: 2 goes first
  s.Remove(1);
  p = s.Schedule();
  // 2 recomputes from position 0 in the slot that sequence 1 freed last; 3 gets the other one.
  EXPECT_EQ(Describe(p), "2:0+9L 3:0+2L");
  EXPECT_EQ(Slots(p), "2@0 3@1");
}

TEST(SchedulerTest, AdmissionStopsWhenThePoolIsShort) {
  Scheduler s({8, 64, 4, 3});
  s.Add(1, Prompt(8));   // 2 blocks
  s.Add(2, Prompt(8));   // 2 more: does not fit now
  s.Add(3, Prompt(2));   // would fit, but queue order holds
  StepPlan p = s.Schedule();
  EXPECT_EQ(Describe(p), "1:0+8L");
  EXPECT_EQ(s.num_waiting(), 2);
}

}  // namespace
}  // namespace tandem::engine

namespace tandem::engine {
namespace {

// Random arrivals, lengths, cancellations and a small pool: after every plan the invariants hold
// (blocks in tables == blocks used, chunks covered by their tables and continuing where the
// sequence stopped, budget and max_num_seqs respected), and every sequence finishes. With fewer
// state slots than max_num_seqs: every running sequence holds its own slot, chunks carry it, and
// all are given back. The plans are played on a model of the cache (which token each KV slot
// holds, which tokens each state slot has consumed), copies first: every chunk finds its
// sequence's earlier tokens in its blocks and its state slot, forks' copies included.
TEST(SchedulerTest, RandomWorkloadKeepsInvariantsAndFinishes) {
  int64_t all_copies[2] = {0, 0};  // without and with state slots
  for (int32_t slots : {0, 3})
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const SchedulerConfig cfg{/*max_num_seqs=*/5, /*max_num_batched_tokens=*/12, /*block_size=*/4,
                              /*num_blocks=*/12, slots};
    std::vector<std::vector<int32_t>> kv(cfg.num_blocks, std::vector<int32_t>(cfg.block_size, -1));
    std::vector<std::vector<int32_t>> state(slots);  // the tokens each slot's state has consumed
    int64_t copies = 0;
    std::mt19937_64 rng(seed);
    Scheduler s(cfg);
    std::unordered_map<int64_t, int> max_new;  // tokens each sequence may generate
    int64_t next_id = 1, finished = 0, cancelled = 0, steps = 0, forks = 0;
    const int64_t first_fork_id = 1000;  // choices forked from sequences 1..total
    const int total = 30;
    while ((next_id <= total || s.has_work()) && steps < 5000) {
      if (next_id <= total && rng() % 3 == 0) {
        const int prompt = 1 + static_cast<int>(rng() % 20);
        const int gen = 1 + static_cast<int>(rng() % (48 - prompt - 1));  // fits in the pool alone
        s.Add(next_id, Prompt(prompt, static_cast<int32_t>(next_id * 100)), rng() % 10 == 0);
        max_new[next_id++] = gen;
      }
      StepPlan p = s.Schedule();
      ++steps;
      for (const CopyOp& c : p.batch.block_copies) kv[c.dst] = kv[c.src];
      for (const CopyOp& c : p.batch.state_copies) state[c.dst] = state[c.src];
      copies += static_cast<int64_t>(p.batch.block_copies.size() + p.batch.state_copies.size());
      int64_t tokens = 0, blocks = 0;
      for (const auto& c : p.batch.seqs) {
        const SequenceState* st = s.Find(c.seq_id);
        ASSERT_NE(st, nullptr);
        tokens += static_cast<int64_t>(c.tokens.size());
        ASSERT_GE(static_cast<int64_t>(c.block_table.size()) * cfg.block_size,
                  c.start_pos + static_cast<int64_t>(c.tokens.size()));
        ASSERT_EQ(c.start_pos + static_cast<int32_t>(c.tokens.size()), st->num_computed);
        ASSERT_TRUE(std::equal(c.tokens.begin(), c.tokens.end(), st->tokens.begin() + c.start_pos));
        ASSERT_EQ(c.want_logits, st->num_computed == static_cast<int32_t>(st->tokens.size()));
        ASSERT_EQ(c.state_slot, st->state_slot);
        for (int32_t pos = 0; pos < c.start_pos; ++pos) {
          ASSERT_EQ(kv[c.block_table[pos / cfg.block_size]][pos % cfg.block_size], st->tokens[pos])
              << "seed " << seed << " seq " << c.seq_id << " reads position " << pos;
        }
        for (int32_t i = 0; i < static_cast<int32_t>(c.tokens.size()); ++i) {
          const int32_t pos = c.start_pos + i;
          kv[c.block_table[pos / cfg.block_size]][pos % cfg.block_size] = c.tokens[i];
        }
        if (slots == 0) {
          ASSERT_EQ(c.state_slot, -1);
          continue;
        }
        std::vector<int32_t>& consumed = state[c.state_slot];
        if (c.start_pos == 0) consumed.clear();
        ASSERT_TRUE(std::equal(consumed.begin(), consumed.end(), st->tokens.begin(), st->tokens.begin() + c.start_pos) &&
                    static_cast<int32_t>(consumed.size()) == c.start_pos)
            << "seed " << seed << " seq " << c.seq_id << " continues at " << c.start_pos << " a state of "
            << consumed.size() << " tokens";
        consumed.insert(consumed.end(), c.tokens.begin(), c.tokens.end());
      }
      std::vector<int64_t> live;  // every sequence added or forked so far
      for (int64_t id = 1; id < next_id; ++id) live.push_back(id);
      for (int64_t id = first_fork_id; id < first_fork_id + forks; ++id) live.push_back(id);
      std::vector<bool> taken(slots, false);
      int32_t holders = 0;
      for (int64_t id : live) {
        const SequenceState* st = s.Find(id);
        if (st == nullptr || st->state_slot < 0) continue;
        ASSERT_TRUE(st->running);
        ASSERT_LT(st->state_slot, slots);
        ASSERT_FALSE(taken[st->state_slot]) << "seed " << seed << ": slot " << st->state_slot << " shared";
        taken[st->state_slot] = true;
        ++holders;
      }
      ASSERT_EQ(holders, slots == 0 ? 0 : s.num_running());
      ASSERT_EQ(holders, s.num_state_slots_used());
      // Forks share blocks: count each once, and check that no chunk writes a block another
      // sequence holds (a shared block is a full block of a prompt, read only).
      std::unordered_map<int32_t, int> holders_of;
      for (int64_t id : live) {
        if (const SequenceState* st = s.Find(id)) {
          for (int32_t b : st->block_table) ++holders_of[b];
        }
      }
      blocks = static_cast<int64_t>(holders_of.size());
      for (const auto& c : p.batch.seqs) {
        const int64_t end = c.start_pos + static_cast<int64_t>(c.tokens.size());
        for (int64_t pos = c.start_pos; pos < end; ++pos) {
          ASSERT_EQ(holders_of[c.block_table[pos / cfg.block_size]], 1)
              << "seed " << seed << ": seq " << c.seq_id << " writes a shared block at " << pos;
        }
      }
      ASSERT_LE(tokens, cfg.max_num_batched_tokens);
      ASSERT_LE(s.num_running(), cfg.max_num_seqs);
      ASSERT_EQ(blocks, s.num_blocks_used());
      if (s.has_work()) {
        ASSERT_FALSE(p.empty()) << "seed " << seed << ": stuck at step " << steps;
      }
      for (const auto& c : p.batch.seqs) {
        if (!c.want_logits) continue;
        s.AppendToken(c.seq_id, 7);
        // A first token of an original sequence: sometimes choices are forked from it.
        if (c.seq_id < first_fork_id && s.Find(c.seq_id)->num_generated() == 1) {
          for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
            const int64_t child = first_fork_id + forks++;
            ASSERT_TRUE(s.Fork(c.seq_id, child, 8));
            max_new[child] = max_new[c.seq_id];
          }
        }
        if (s.Find(c.seq_id)->num_generated() >= max_new[c.seq_id]) {
          s.Remove(c.seq_id);
          ++finished;
        }
      }
      if (rng() % 40 == 0 && next_id > 1) {  // a client goes away
        const int64_t victim = 1 + static_cast<int64_t>(rng() % (next_id - 1));
        if (s.Remove(victim)) ++cancelled;
      }
    }
    // Forks that end at once (max_new 1) are finished when their one-token chunk runs.
    EXPECT_EQ(finished + cancelled, total + forks) << "seed " << seed;
    EXPECT_EQ(s.num_blocks_used(), 0);
    EXPECT_EQ(s.num_state_slots_used(), 0);
    all_copies[slots > 0] += copies;
    if (seed <= 3) {
      std::printf("slots %d seed %llu: %lld steps, %lld forks, %lld copies, %lld finished, %lld cancelled, "
                  "%lld preemptions\n",
                  slots, static_cast<unsigned long long>(seed), static_cast<long long>(steps),
                  static_cast<long long>(forks), static_cast<long long>(copies),
                  static_cast<long long>(finished), static_cast<long long>(cancelled),
                  static_cast<long long>(s.num_preemptions()));
    }
  }
  EXPECT_GT(all_copies[0], 0) << "no fork started from a copied block";
  EXPECT_GT(all_copies[1], 0) << "no fork started from a copied state slot";
}

}  // namespace
}  // namespace tandem::engine
