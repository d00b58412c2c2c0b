#include "engine/batching/scheduler.h"

#include <algorithm>
#include <utility>

namespace tandem::engine {

Scheduler::Scheduler(const SchedulerConfig& config) : config_(config), alloc_(config.num_blocks) {
  // Reversed so that slot 0 is handed out first (plans read naturally in tests and logs).
  for (int32_t i = config.num_state_slots - 1; i >= 0; --i) free_slots_.push_back(i);
}

void Scheduler::ReleaseSlot(SequenceState& s) {
  if (s.state_slot < 0) return;
  free_slots_.push_back(s.state_slot);
  s.state_slot = -1;
}

void Scheduler::Add(int64_t seq_id, std::vector<int32_t> prompt, bool priority, bool want_prompt_logits) {
  SequenceState s;
  s.seq_id = seq_id;
  s.prompt_len = static_cast<int32_t>(prompt.size());
  s.tokens = std::move(prompt);
  s.priority = priority;
  s.want_prompt_logits = want_prompt_logits;
  seqs_[seq_id] = std::move(s);
  (priority ? priority_waiting_ : waiting_).push_back(seq_id);
}

bool Scheduler::Fork(int64_t parent_id, int64_t child_id, int32_t first_token) {
  auto pit = seqs_.find(parent_id);
  if (pit == seqs_.end() || seqs_.count(child_id) != 0) return false;
  const SequenceState& parent = pit->second;
  if (!parent.running || parent.num_computed < parent.prompt_len) return false;
  SequenceState c;
  c.seq_id = child_id;
  c.prompt_len = parent.prompt_len;
  c.tokens.assign(parent.tokens.begin(), parent.tokens.begin() + parent.prompt_len);
  c.tokens.push_back(first_token);
  c.priority = parent.priority;
  const bool slots = config_.num_state_slots > 0;
  const bool run_now = num_running() < config_.max_num_seqs && (!slots || !free_slots_.empty());
  if (!run_now) {
    // A waiting sequence holds no blocks, so waiting choices can never starve the pool.
    (c.priority ? priority_waiting_ : waiting_).push_front(child_id);
    seqs_[child_id] = std::move(c);
    return true;
  }
  const int32_t full = c.prompt_len / config_.block_size;
  const bool partial = c.prompt_len % config_.block_size != 0;
  // The parent's blocks and slot hold the state after the prompt only until it computes more.
  bool copy = parent.num_computed == parent.prompt_len && (!slots || parent.state_slot >= 0);
  int32_t copy_block = -1;
  if (copy && partial) {
    absl::StatusOr<int32_t> b = alloc_.Allocate();
    if (b.ok()) {
      copy_block = *b;
    } else {
      copy = false;  // the pool is full: recompute rather than wait for a block
    }
  }
  if (copy || !slots) {
    // Full blocks are shared: nobody writes them again.
    c.block_table.assign(parent.block_table.begin(), parent.block_table.begin() + full);
    for (int32_t b : c.block_table) alloc_.Share(b);
    c.num_computed = full * config_.block_size;
  }
  if (slots) {
    c.state_slot = free_slots_.back();
    free_slots_.pop_back();
  }
  if (copy) {
    if (partial) {
      c.block_table.push_back(copy_block);
      pending_copies_.push_back({child_id, false, {parent.block_table[full], copy_block}});
    }
    if (slots) pending_copies_.push_back({child_id, true, {parent.state_slot, c.state_slot}});
    c.num_computed = c.prompt_len;
  }
  c.running = true;
  running_.push_back(child_id);
  seqs_[child_id] = std::move(c);
  return true;
}

void Scheduler::DropCopies(int64_t seq_id) {
  pending_copies_.erase(std::remove_if(pending_copies_.begin(), pending_copies_.end(),
                                       [seq_id](const PendingCopy& p) { return p.child == seq_id; }),
                        pending_copies_.end());
}

const SequenceState* Scheduler::Find(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : &it->second;
}

void Scheduler::AppendToken(int64_t seq_id, int32_t token) {
  auto it = seqs_.find(seq_id);
  if (it != seqs_.end()) it->second.tokens.push_back(token);
}

bool Scheduler::Remove(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return false;
  alloc_.Free(it->second.block_table);
  ReleaseSlot(it->second);
  DropCopies(seq_id);
  auto drop = [seq_id](auto& c) { c.erase(std::remove(c.begin(), c.end(), seq_id), c.end()); };
  drop(running_);
  drop(priority_waiting_);
  drop(waiting_);
  seqs_.erase(it);
  return true;
}

int32_t Scheduler::ChunkLength(const SequenceState& s, int64_t budget) const {
  int64_t n = std::min<int64_t>(s.num_uncomputed(), budget);
  if (s.want_prompt_logits) n = std::min<int64_t>(n, config_.max_prompt_logits_tokens);
  return static_cast<int32_t>(n);
}

void Scheduler::AddChunk(SequenceState& s, int32_t n, StepPlan& plan) {
  SeqChunk c;
  c.seq_id = s.seq_id;
  c.start_pos = s.num_computed;
  c.tokens.assign(s.tokens.begin() + s.num_computed, s.tokens.begin() + s.num_computed + n);
  c.block_table = s.block_table;
  c.state_slot = s.state_slot;
  c.want_logits = s.num_computed + n == static_cast<int32_t>(s.tokens.size());
  // Rows up to the prompt's second to last token are prompt logprobs; the last is the sampling row.
  c.want_all_logits = s.want_prompt_logits && s.num_computed < s.prompt_len - 1;
  // A decode continues a sequence whose prompt (and earlier output) is already computed.
  const bool decode = n == 1 && c.want_logits && s.num_computed >= s.prompt_len;
  (decode ? plan.num_decode_tokens : plan.num_prefill_tokens) += n;
  s.num_computed += n;
  if (s.num_computed >= s.prompt_len) s.want_prompt_logits = false;  // not again after a preemption
  plan.batch.seqs.push_back(std::move(c));
}

void Scheduler::Preempt(int64_t seq_id, StepPlan& plan, int64_t& budget) {
  SequenceState& s = seqs_.at(seq_id);
  // A victim already planned in this step leaves the plan: its budget comes back.
  auto& chunks = plan.batch.seqs;
  for (auto it = chunks.begin(); it != chunks.end(); ++it) {
    if (it->seq_id != seq_id) continue;
    const int64_t n = static_cast<int64_t>(it->tokens.size());
    budget += n;
    const bool decode = n == 1 && it->want_logits && it->start_pos >= s.prompt_len;
    (decode ? plan.num_decode_tokens : plan.num_prefill_tokens) -= n;
    chunks.erase(it);
    break;
  }
  alloc_.Free(s.block_table);
  s.block_table.clear();
  // Its next prefill starts at position 0, which restarts whatever slot it gets then.
  ReleaseSlot(s);
  DropCopies(seq_id);
  s.num_computed = 0;
  s.running = false;
  ++s.num_preemptions;
  ++num_preemptions_;
  running_.erase(std::remove(running_.begin(), running_.end(), seq_id), running_.end());
  (s.priority ? priority_waiting_ : waiting_).push_front(seq_id);
  plan.preempted.push_back(seq_id);
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  int64_t budget = config_.max_num_batched_tokens;

  // 1. Running sequences: decodes first (they are latency-bound), then unfinished prefills.
  std::vector<int64_t> order = running_;
  std::stable_partition(order.begin(), order.end(),
                        [this](int64_t id) { return seqs_.at(id).num_uncomputed() == 1; });
  for (int64_t id : order) {
    if (budget <= 0) break;
    SequenceState& s = seqs_.at(id);
    if (!s.running) continue;  // preempted earlier in this plan
    const int32_t n = ChunkLength(s, budget);
    if (n <= 0) continue;
    bool fits = true;
    while (!EnsureBlocks(alloc_, config_.block_size, s.num_computed + n, s.block_table).ok()) {
      const int64_t victim = running_.back();  // the most recently admitted
      Preempt(victim, plan, budget);
      if (victim == id) {
        fits = false;
        break;
      }
    }
    if (!fits) continue;
    AddChunk(s, n, plan);
    budget -= n;
  }

  // 2. Admission: priority, then preempted, then new; stop at the first that does not fit so
  // that the queue order holds.
  if (!plan.preempted.empty()) {
    AttachCopies(plan);
    return plan;
  }
  const bool slots = config_.num_state_slots > 0;
  while (budget > 0 && num_running() < config_.max_num_seqs && (!slots || !free_slots_.empty())) {
    std::deque<int64_t>& queue = !priority_waiting_.empty() ? priority_waiting_ : waiting_;
    if (queue.empty()) break;
    SequenceState& s = seqs_.at(queue.front());
    const int32_t n = ChunkLength(s, budget);
    const int64_t need = BlocksFor(s.num_computed + n) - static_cast<int64_t>(s.block_table.size());
    if (need > alloc_.num_free()) break;
    if (!EnsureBlocks(alloc_, config_.block_size, s.num_computed + n, s.block_table).ok()) break;
    queue.pop_front();
    if (slots) {
      s.state_slot = free_slots_.back();
      free_slots_.pop_back();
    }
    s.running = true;
    running_.push_back(s.seq_id);
    AddChunk(s, n, plan);
    budget -= n;
  }
  AttachCopies(plan);
  return plan;
}

void Scheduler::AttachCopies(StepPlan& plan) {
  if (plan.empty()) return;
  for (const PendingCopy& p : pending_copies_) {
    (p.state ? plan.batch.state_copies : plan.batch.block_copies).push_back(p.op);
  }
  pending_copies_.clear();
}

}  // namespace tandem::engine
