// Continuous batching on rank 0: which sequences run in the next step, with which chunk of
// tokens, in which KV blocks. No model, no threads, no clock: a plan is a function of the queues
// and the free blocks, so every policy below is unit-tested directly.
//
// Policy of one step (Schedule):
//   1. Running sequences, decodes (one token each) before unfinished prefills, each chunk cut to
//      the remaining token budget (max_num_batched_tokens).
//   2. When the pool cannot hold a running sequence's next chunk, the most recently admitted
//      running sequence is preempted (recompute): it loses its blocks and goes back to the front
//      of the waiting queue with its generated tokens kept, so its next prefill recomputes prompt
//      + output and continues exactly where it stopped.
//   3. Waiting sequences (priority ones first, then preempted ones, then by arrival) are admitted
//      while the budget, max_num_seqs and the free blocks allow; a long prompt is chunked over
//      several steps. Nothing is admitted in a step that had to preempt (the pool is short).
// Only the chunk that reaches the end of a sequence's tokens wants logits; a sequence that wants
// its prompt's logits (prompt logprobs) gets every row of its prompt chunks, chunks then cut to
// max_prompt_logits_tokens.
//
// Choices (Fork): the choices of an n > 1 request are sequences forked from the one that ran the
// prefill, right after its prompt's step. A fork holds the prompt's full blocks with its parent
// (BlockAllocator counts holders), gets a copy of the prompt's partial last block in a block of
// its own and, on a model with state slots, a copy of the parent's slot in a slot of its own:
// it starts with the whole prompt computed, its first step a one-token decode of its first token.
// The copies ride with the next plan (StepBatch::block_copies / state_copies), which the model
// applies before anything of that step runs, so they see the parent's state after the prompt
// whatever that step does (the parent's first decode, its slot or blocks reused after it ended).
// No block is ever written by two sequences. A fork that finds no free block for its copy falls
// back to recomputing: the partial last block (no state slots), or the whole prompt (state slots:
// the state after the prompt comes from the copy only). A fork with no free slot, or beyond
// max_num_seqs, waits holding nothing and prefills the prompt again when admitted.
//
// State slots (models with per-sequence recurrent state, SchedulerConfig::num_state_slots > 0):
// a sequence takes a free slot when it is admitted and keeps it while it runs; finishing,
// cancellation (Remove) and preemption give it back. Admission needs a free slot as it needs free
// blocks, so no more sequences run than there are slots and no slot ever serves two running
// sequences. A preempted sequence restarts at position 0 in whichever slot it gets next, which
// restarts that slot's state. Without slots (0) every chunk carries state_slot -1.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/step.h"

namespace tandem::engine {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  int32_t block_size = 16;
  int32_t num_blocks = 0;
  int32_t num_state_slots = 0;  // 0: the model keeps no per-sequence state
  // Longest chunk of a sequence that wants every prompt row of logits: each row is a vocabulary
  // of floats (256 rows of Qwen3's 151936 are 155 MB on the device and on rank 0's host).
  int32_t max_prompt_logits_tokens = 256;
};

// A sequence as the scheduler sees it.
struct SequenceState {
  int64_t seq_id = 0;
  std::vector<int32_t> tokens;       // the prompt, then every generated token
  int32_t prompt_len = 0;            // length of the original prompt
  int32_t num_computed = 0;          // leading tokens whose KV is in the cache
  std::vector<int32_t> block_table;  // blocks holding positions [0, num_computed)
  bool priority = false;
  bool running = false;
  int32_t state_slot = -1;           // held while running (num_state_slots > 0), else -1
  int32_t num_preemptions = 0;
  bool want_prompt_logits = false;   // until the prompt is computed: a logits row per prompt token

  int32_t num_generated() const { return static_cast<int32_t>(tokens.size()) - prompt_len; }
  int32_t num_uncomputed() const { return static_cast<int32_t>(tokens.size()) - num_computed; }
};

struct StepPlan {
  StepBatch batch;                   // one chunk per scheduled sequence
  std::vector<int64_t> preempted;    // sequences that lost their KV while this step was planned
  int64_t num_prefill_tokens = 0;    // tokens of chunks longer than one token or not at the end
  int64_t num_decode_tokens = 0;     // one-token chunks that continue a computed sequence

  // No chunk (a plan without chunks carries no copies either: they wait for the next one).
  bool empty() const { return batch.seqs.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Queues a new sequence (`prompt` non-empty). Priority sequences go ahead of all others.
  // `want_prompt_logits`: its prompt chunks return a row of logits per token (want_all_logits).
  void Add(int64_t seq_id, std::vector<int32_t> prompt, bool priority = false, bool want_prompt_logits = false);
  // A new sequence `child` with `parent`'s prompt followed by `first_token` (another choice of the
  // parent's request, its first token drawn from the parent's prefill logits). The parent must be
  // running with its prompt computed. When max_num_seqs, a slot (state slots) and a block for the
  // partial last one allow, the child runs at once from copies of the parent's state after the
  // prompt (see the header comment; only while the parent has computed nothing past its prompt);
  // else it recomputes as described there, or waits at the front of the queue holding no blocks.
  // False (nothing done) for an unknown or unfit parent or a used id.
  bool Fork(int64_t parent_id, int64_t child_id, int32_t first_token);
  // Plans the next step and commits to it: blocks are allocated, num_computed advances past the
  // chunks, preemptions are applied. An empty plan means there is nothing that can run.
  StepPlan Schedule();
  // A token sampled for `seq_id` after a step in which its chunk wanted logits.
  void AppendToken(int64_t seq_id, int32_t token);
  // Forgets a sequence (finished or cancelled) and frees its blocks. False for an unknown id.
  bool Remove(int64_t seq_id);

  const SequenceState* Find(int64_t seq_id) const;
  bool has_work() const { return !seqs_.empty(); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(priority_waiting_.size() + waiting_.size()); }
  int32_t num_blocks_used() const { return alloc_.num_used(); }
  int32_t num_blocks_total() const { return alloc_.num_total(); }
  int32_t num_state_slots_used() const { return config_.num_state_slots - static_cast<int32_t>(free_slots_.size()); }
  int32_t num_state_slots_total() const { return config_.num_state_slots; }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }
  // Blocks a sequence of `num_tokens` positions needs.
  int64_t BlocksFor(int64_t num_tokens) const { return (num_tokens + config_.block_size - 1) / config_.block_size; }

 private:
  // Takes the blocks of a running sequence and puts it at the front of its waiting queue.
  void Preempt(int64_t seq_id, StepPlan& plan, int64_t& budget);
  // How many of `s`'s uncomputed tokens its next chunk takes within `budget`.
  int32_t ChunkLength(const SequenceState& s, int64_t budget) const;
  // Appends the chunk [num_computed, num_computed + n) of `s` to the plan and advances it.
  void AddChunk(SequenceState& s, int32_t n, StepPlan& plan);
  // Gives a sequence's state slot (if it holds one) back to the free list.
  void ReleaseSlot(SequenceState& s);
  // Drops the copies still pending for `seq_id` (it ended or was preempted before they ran).
  void DropCopies(int64_t seq_id);
  // Moves the pending copies into `plan` unless it is empty (they then wait for the next one).
  void AttachCopies(StepPlan& plan);

  SchedulerConfig config_;
  BlockAllocator alloc_;
  std::unordered_map<int64_t, SequenceState> seqs_;
  std::vector<int64_t> running_;          // admission order (oldest first)
  std::deque<int64_t> priority_waiting_;  // probes
  std::deque<int64_t> waiting_;           // preempted ones at the front, then by arrival
  std::vector<int32_t> free_slots_;       // a stack: the last freed slot is reused first
  // Forks' copies not yet in a plan, in fork order; each for the child that needs it.
  struct PendingCopy {
    int64_t child = 0;
    bool state = false;  // a state slot, else a KV block
    CopyOp op;
  };
  std::vector<PendingCopy> pending_copies_;
  int64_t num_preemptions_ = 0;
};

}  // namespace tandem::engine
