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

void Scheduler::Add(int64_t seq_id, std::vector<int32_t> prompt, bool priority) {
  SequenceState s;
  s.seq_id = seq_id;
  s.prompt_len = static_cast<int32_t>(prompt.size());
  s.tokens = std::move(prompt);
  s.priority = priority;
  seqs_[seq_id] = std::move(s);
  (priority ? priority_waiting_ : waiting_).push_back(seq_id);
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
  auto drop = [seq_id](auto& c) { c.erase(std::remove(c.begin(), c.end(), seq_id), c.end()); };
  drop(running_);
  drop(priority_waiting_);
  drop(waiting_);
  seqs_.erase(it);
  return true;
}

void Scheduler::AddChunk(SequenceState& s, int32_t n, StepPlan& plan) {
  SeqChunk c;
  c.seq_id = s.seq_id;
  c.start_pos = s.num_computed;
  c.tokens.assign(s.tokens.begin() + s.num_computed, s.tokens.begin() + s.num_computed + n);
  c.block_table = s.block_table;
  c.state_slot = s.state_slot;
  c.want_logits = s.num_computed + n == static_cast<int32_t>(s.tokens.size());
  // A decode continues a sequence whose prompt (and earlier output) is already computed.
  const bool decode = n == 1 && c.want_logits && s.num_computed >= s.prompt_len;
  (decode ? plan.num_decode_tokens : plan.num_prefill_tokens) += n;
  s.num_computed += n;
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
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(s.num_uncomputed(), budget));
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
  if (!plan.preempted.empty()) return plan;
  const bool slots = config_.num_state_slots > 0;
  while (budget > 0 && num_running() < config_.max_num_seqs && (!slots || !free_slots_.empty())) {
    std::deque<int64_t>& queue = !priority_waiting_.empty() ? priority_waiting_ : waiting_;
    if (queue.empty()) break;
    SequenceState& s = seqs_.at(queue.front());
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(s.num_uncomputed(), budget));
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
  return plan;
}

}  // namespace tandem::engine
