// A Model with no weights for the tests of what drives a model (engine/step_driver.h,
// engine/generate.h, engine/batching/llm_engine.h): it checks each step as a backend does
// (engine/step.h CheckBatch), records the KV pools and steps it was given, and answers logits
// whose argmax is the next token id Next(t) = (t + 1) % vocab, so a greedy continuation of t is
// t+1, t+2, ... A test can make Forward fail after some steps (a lost peer) or block until
// released (a slow step); the engine calls Forward from its own thread, hence the lock.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/status.h"
#include "engine/model.h"
#include "engine/step.h"

namespace tandem::engine::testing {

class FakeModel final : public Model {
 public:
  explicit FakeModel(int64_t vocab = 8, int rank = 0, int world = 1) : rank_(rank), world_(world) {
    config_.model_type = "fake";
    config_.vocab_size = vocab;
  }
  static int32_t Next(int32_t token, int64_t vocab) { return static_cast<int32_t>((token + 1) % vocab); }

  const ModelConfig& config() const override { return config_; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  // One layer, one head of 4 floats: 32 bytes of KV per token; with state, `state_bytes` per slot.
  KvCacheSpec kv_spec() const override {
    KvCacheSpec spec{1, 1, 4};
    spec.state_bytes_per_slot = state_bytes_;
    return spec;
  }
  int32_t kv_block_size() const override { return block_size_; }
  absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size, int32_t num_state_slots) override {
    pools.emplace_back(num_blocks, block_size);
    num_blocks_ = num_blocks;
    block_size_ = block_size;
    if (state_bytes_ > 0) {
      state_slots = num_state_slots;
      slot_owner_.assign(num_state_slots, SlotUse{});
    }
    return absl::OkStatus();
  }
  // Makes the model keep per-sequence state like the hybrid models: every step then needs a state
  // slot per chunk (CheckBatch), and a chunk that does not start at position 0 must continue the
  // chunk its slot saw last (same sequence, next position), or Forward fails: a scheduler that
  // hands one slot to two sequences, or forgets to restart a reused one, is caught. A state copy
  // (StepBatch::state_copies) hands the source's position to the destination slot, so a fork that
  // continues at its prompt's end passes only when its copy was taken right after the prompt.
  void WithState(int64_t bytes_per_slot) { state_bytes_ = bytes_per_slot; }
  absl::StatusOr<Logits> Forward(const StepBatch& batch) override {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return !hold_; });
    }
    RETURN_IF_ERROR(CheckBatch(batch, num_blocks_, block_size_, config_.vocab_size,
                               state_bytes_ > 0 ? static_cast<int32_t>(slot_owner_.size()) : kNoStateSlots));
    if (state_bytes_ > 0) RETURN_IF_ERROR(TrackState(batch));
    {
      std::lock_guard<std::mutex> l(mu_);
      steps.push_back(batch.Serialize());
      if (!fail_.ok() && static_cast<int>(steps.size()) > fail_after_) return fail_;
    }
    Logits out;
    if (rank_ != 0) return out;
    out.vocab = config_.vocab_size;
    for (const SeqChunk& s : batch.seqs) {
      const size_t n = s.tokens.size();
      for (size_t i = s.want_all_logits ? 0 : n - 1; i < n; ++i) {
        if (!s.want_all_logits && !s.want_logits) break;
        std::vector<float> row(out.vocab, 0.0f);
        row[Next(s.tokens[i], out.vocab)] = 1.0f;
        out.data.insert(out.data.end(), row.begin(), row.end());
        out.seq_ids.push_back(s.seq_id);
        out.positions.push_back(s.start_pos + static_cast<int32_t>(i));
      }
    }
    return out;
  }

  // The model's end-of-sequence ids, as a config.json would list them (before the engine reads them).
  void SetEos(std::vector<int64_t> ids) { config_.eos_token_ids = std::move(ids); }
  // Forward returns `error` (after recording the batch) from step `steps + 1` on.
  void FailAfter(int steps, absl::Status error) {
    std::lock_guard<std::mutex> l(mu_);
    fail_after_ = steps;
    fail_ = std::move(error);
  }
  // While held, Forward waits before doing anything.
  void Hold(bool hold) {
    {
      std::lock_guard<std::mutex> l(mu_);
      hold_ = hold;
    }
    cv_.notify_all();
  }

  // Read these once the callers of Forward and AllocateKvCache have finished.
  std::vector<std::pair<int32_t, int32_t>> pools;  // (num_blocks, block_size) per AllocateKvCache
  int32_t state_slots = 0;                         // the last AllocateKvCache's (WithState)
  std::vector<std::string> steps;                  // each Forward's batch, serialized

 private:
  struct SlotUse {
    int64_t seq_id = -1;
    int64_t next_pos = 0;
    bool copied = false;  // a fork's copy, not yet continued
  };
  absl::Status TrackState(const StepBatch& batch) {
    // A copied slot may be continued by any sequence (the fork it was copied for), at the
    // position its source had reached when the step began.
    for (const CopyOp& c : batch.state_copies) {
      slot_owner_[c.dst] = slot_owner_[c.src];
      slot_owner_[c.dst].copied = true;
    }
    for (const SeqChunk& c : batch.seqs) {
      SlotUse& u = slot_owner_[c.state_slot];
      if (c.start_pos != 0 && ((u.seq_id != c.seq_id && !u.copied) || u.next_pos != c.start_pos)) {
        return absl::InternalError("fake model: sequence " + std::to_string(c.seq_id) + " continues at " +
                                   std::to_string(c.start_pos) + " in state slot " + std::to_string(c.state_slot) +
                                   " last used by sequence " + std::to_string(u.seq_id) + " up to " +
                                   std::to_string(u.next_pos));
      }
      u.seq_id = c.seq_id;
      u.copied = false;
      u.next_pos = c.start_pos + static_cast<int64_t>(c.tokens.size());
    }
    return absl::OkStatus();
  }

  ModelConfig config_;
  int64_t state_bytes_ = 0;
  std::vector<SlotUse> slot_owner_;
  int rank_, world_;
  int32_t num_blocks_ = 0, block_size_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  int fail_after_ = 0;
  absl::Status fail_;
};

}  // namespace tandem::engine::testing
