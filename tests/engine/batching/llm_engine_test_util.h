// Helpers of the LLMEngine tests: a sink that collects one request's events and waits for the
// final one, and a tiny fake Model whose logits are a fixed function of the last token (for
// tests of the engine's own logic: stops, errors, cancellation, admission).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/batching/llm_engine.h"

namespace tandem::engine::testing {

// What one request received.
struct Received {
  std::vector<int32_t> tokens;
  std::string text;
  int events = 0;
  bool finished = false;
  std::string finish_reason;
  absl::Status error;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  bool event_after_final = false;
};

class Sink {
 public:
  GenerationCallback Callback() {
    return [this](const GenerationEvent& ev) {
      std::lock_guard<std::mutex> l(mu_);
      if (r_.finished) r_.event_after_final = true;
      ++r_.events;
      r_.tokens.insert(r_.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
      r_.text += ev.text_delta;
      if (ev.finished) {
        r_.finished = true;
        r_.finish_reason = ev.finish_reason;
        r_.error = ev.error;
        r_.prompt_tokens = ev.prompt_tokens;
        r_.completion_tokens = ev.completion_tokens;
        cv_.notify_all();
      } else if (!ev.token_ids.empty()) {
        cv_.notify_all();
      }
    };
  }
  // Waits for the final event; false on timeout.
  bool Wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return r_.finished; });
  }
  // Waits until at least `n` tokens arrived (or the request finished).
  bool WaitTokens(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return r_.tokens.size() >= n || r_.finished; });
  }
  Received Get() {
    std::lock_guard<std::mutex> l(mu_);
    return r_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Received r_;
};

// Logits with one peak: the next token is (last token * 3 + 1) % vocab, always. Forward can be
// told to fail (a lost peer) or to block until released (a slow step).
class FakeModel final : public Model {
 public:
  explicit FakeModel(int64_t vocab = 64, std::vector<int64_t> eos = {}) {
    cfg_.model_type = "fake";
    cfg_.vocab_size = vocab;
    cfg_.eos_token_ids = std::move(eos);
    spec_.num_layers = 1;
    spec_.num_kv_heads_local = 1;
    spec_.head_dim = 4;
  }
  static int32_t Next(int32_t token, int64_t vocab) { return static_cast<int32_t>((token * 3 + 1) % vocab); }

  const ModelConfig& config() const override { return cfg_; }
  int rank() const override { return 0; }
  int world() const override { return 1; }
  KvCacheSpec kv_spec() const override { return spec_; }
  absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size) override {
    blocks_ = num_blocks;
    block_size_ = block_size;
    return absl::OkStatus();
  }
  int32_t kv_block_size() const override { return block_size_; }
  absl::StatusOr<Logits> Forward(const StepBatch& batch) override {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return !hold_; });
    }
    steps_.fetch_add(1);
    if (fail_after_ >= 0 && steps_.load() > fail_after_) {
      return absl::DeadlineExceededError("all-reduce did not complete within 30000 ms (peer rank 1 lost)");
    }
    Logits out;
    out.vocab = cfg_.vocab_size;
    for (const auto& c : batch.seqs) {
      if (static_cast<int64_t>(c.block_table.size()) * block_size_ < c.start_pos + static_cast<int64_t>(c.tokens.size())) {
        return absl::InternalError("block table too short");
      }
      if (!c.want_logits) continue;
      std::vector<float> row(cfg_.vocab_size, 0.0f);
      row[Next(c.tokens.back(), cfg_.vocab_size)] = 10.0f;
      out.data.insert(out.data.end(), row.begin(), row.end());
      out.seq_ids.push_back(c.seq_id);
      out.positions.push_back(c.start_pos + static_cast<int32_t>(c.tokens.size()) - 1);
    }
    return out;
  }

  void FailAfter(int steps) { fail_after_ = steps; }
  void Hold(bool hold) {
    {
      std::lock_guard<std::mutex> l(mu_);
      hold_ = hold;
    }
    cv_.notify_all();
  }
  int steps() const { return steps_.load(); }

 private:
  ModelConfig cfg_;
  KvCacheSpec spec_;
  int32_t blocks_ = 0, block_size_ = 0;
  std::atomic<int> steps_{0};
  std::atomic<int> fail_after_{-1};
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
};

}  // namespace tandem::engine::testing
