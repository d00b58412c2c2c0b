// A scripted LLMEngine for the HTTP layer's tests: every request generates the same script of
// (token id, text) pairs, one token per step of its own engine thread, so tests know exactly
// what text to expect and can make the engine slow, full or unhealthy on demand. It records what
// was submitted and cancelled. With n > 1 every choice runs the script (choice c's token ids are
// the script's + 1000 * c); with logprobs, token k of a choice has logprob -(k + 1) / 8 - c and
// alternatives id + 1, id + 2, ... each 1 lower; prompt logprobs are -1 per prompt token.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/batching/llm_engine.h"

namespace tandem::openai::testing {

class FakeEngine final : public engine::LLMEngine {
 public:
  struct Token {
    int32_t id;
    std::string text;
  };

  explicit FakeEngine(std::vector<Token> script, std::chrono::milliseconds step = std::chrono::milliseconds(2))
      : script_(std::move(script)), step_(step), thread_([this] { Loop(); }) {}
  ~FakeEngine() override { Shutdown(); }

  absl::Status Submit(engine::GenerationRequest request, engine::GenerationCallback callback) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!healthy_) return absl::UnavailableError("fake engine marked unhealthy");
    if (queue_full_) return absl::ResourceExhaustedError("fake queue full");
    if (stopped_) return absl::UnavailableError("shut down");
    submitted_.push_back(request);
    const std::string id = request.request_id;  // (the right side of = is evaluated first)
    const size_t n = static_cast<size_t>(std::max(1, request.n));
    active_[id] = Active{std::move(request), std::move(callback), std::vector<size_t>(n, 0),
                         std::vector<bool>(n, false)};
    cv_.notify_all();
    return absl::OkStatus();
  }

  void Cancel(const std::string& request_id) override {
    engine::GenerationCallback cb;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_.push_back(request_id);
      auto it = active_.find(request_id);
      if (it == active_.end()) return;
      cb = std::move(it->second.callback);
      active_.erase(it);
    }
    engine::GenerationEvent e;
    e.choice_finished = true;
    e.finished = true;
    e.finish_reason = "abort";
    cb(e);
  }

  engine::EngineStats Stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    engine::EngineStats s;
    s.iterations = iterations_;
    s.running = static_cast<int32_t>(active_.size());
    s.kv_blocks_total = 64;
    s.kv_blocks_used = static_cast<int64_t>(active_.size());  // one block per live sequence
    s.kv_tokens_total = 64 * 16;
    return s;
  }
  bool healthy() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return healthy_;
  }
  absl::Status fatal_error() const override {
    return healthy() ? absl::OkStatus() : absl::UnavailableError("fake engine marked unhealthy");
  }
  void Shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      cv_.notify_all();
    }
    thread_.join();
    std::map<std::string, Active> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(active_);
    }
    for (auto& [id, a] : left) {
      engine::GenerationEvent e;
      e.choice_finished = true;
      e.finished = true;
      e.finish_reason = "abort";
      a.callback(e);
    }
  }

  void set_healthy(bool v) {
    std::lock_guard<std::mutex> lock(mu_);
    healthy_ = v;
  }
  void set_queue_full(bool v) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_full_ = v;
  }
  std::vector<engine::GenerationRequest> submitted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }
  std::vector<std::string> cancelled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  std::string ScriptText(size_t n) const {
    std::string s;
    for (size_t i = 0; i < n && i < script_.size(); ++i) s += script_[i].text;
    return s;
  }

 private:
  struct Active {
    engine::GenerationRequest request;
    engine::GenerationCallback callback;
    std::vector<size_t> next;  // per choice
    std::vector<bool> done;    // per choice
    bool prompt_sent = false;
  };

  static engine::TokenLogprob Logprob(int32_t id, float lp, int32_t top) {
    engine::TokenLogprob t{id, lp, {}};
    for (int32_t k = 1; k <= top; ++k) t.top.emplace_back(id + k, lp - static_cast<float>(k));
    return t;
  }

  // One "step": every live request gets its next token; callbacks run outside the lock, as the
  // real engine's would run on its thread.
  void Loop() {
    for (;;) {
      std::vector<std::pair<engine::GenerationCallback, engine::GenerationEvent>> out;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, step_, [&] { return stopped_; });
        if (stopped_) return;
        if (active_.empty()) continue;
        ++iterations_;
        for (auto it = active_.begin(); it != active_.end();) {
          Active& a = it->second;
          const engine::SamplingParams& p = a.request.params;
          if (p.prompt_logprobs >= 0 && !a.prompt_sent) {
            engine::GenerationEvent e;
            for (size_t i = 1; i < a.request.prompt_ids.size(); ++i) {
              e.prompt_logprobs.push_back(Logprob(a.request.prompt_ids[i], -1.0f, p.prompt_logprobs));
            }
            out.emplace_back(a.callback, std::move(e));
          }
          a.prompt_sent = true;
          size_t open = 0;
          int64_t completion = 0;
          for (size_t c = 0; c < a.next.size(); ++c) {
            completion += static_cast<int64_t>(a.next[c]);
            if (a.done[c]) continue;
            engine::GenerationEvent e;
            e.choice = static_cast<int32_t>(c);
            const Token& t = script_[a.next[c] % script_.size()];
            const int32_t id = t.id + 1000 * static_cast<int32_t>(c);
            e.token_ids = {id};
            e.text_delta = t.text;
            if (p.logprobs >= 0) {
              e.logprobs.push_back(Logprob(id, -static_cast<float>(a.next[c] + 1) / 8 - static_cast<float>(c), p.logprobs));
            }
            ++a.next[c];
            ++completion;
            out.emplace_back(a.callback, std::move(e));
            const bool length = static_cast<int32_t>(a.next[c]) >= p.max_tokens;
            if (length || a.next[c] >= script_.size()) {
              a.done[c] = true;
              engine::GenerationEvent fin;
              fin.choice = static_cast<int32_t>(c);
              fin.choice_finished = true;
              fin.finish_reason = length ? "length" : "stop";
              out.emplace_back(a.callback, std::move(fin));
            } else {
              ++open;
            }
          }
          if (open == 0) {
            // The request's last event repeats the last choice's end with the usage of all.
            engine::GenerationEvent& last = out.back().second;
            last.finished = true;
            last.prompt_tokens = static_cast<int64_t>(a.request.prompt_ids.size());
            last.completion_tokens = completion;
            out.back().first = std::move(a.callback);
            it = active_.erase(it);
          } else {
            ++it;
          }
        }
      }
      for (auto& [cb, e] : out) cb(e);
    }
  }

  const std::vector<Token> script_;
  const std::chrono::milliseconds step_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Active> active_;
  std::vector<engine::GenerationRequest> submitted_;
  std::vector<std::string> cancelled_;
  int64_t iterations_ = 0;
  bool healthy_ = true, queue_full_ = false, stopped_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace tandem::openai::testing
