// A scripted LLMEngine for the HTTP layer's tests: every request generates the same script of
// (token id, text) pairs, one token per step of its own engine thread, so tests know exactly
// what text to expect and can make the engine slow, full or unhealthy on demand. It records what
// was submitted and cancelled.
#pragma once

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
    active_[id] = Active{std::move(request), std::move(callback), 0};
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
    size_t next = 0;
  };

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
          engine::GenerationEvent e;
          const Token& t = script_[a.next % script_.size()];
          e.token_ids = {t.id};
          e.text_delta = t.text;
          ++a.next;
          const bool length = static_cast<int32_t>(a.next) >= a.request.params.max_tokens;
          const bool end = a.next >= script_.size();
          if (length || end) {
            e.finished = true;
            e.finish_reason = length ? "length" : "stop";
            e.prompt_tokens = static_cast<int64_t>(a.request.prompt_ids.size());
            e.completion_tokens = static_cast<int64_t>(a.next);
            out.emplace_back(std::move(a.callback), std::move(e));
            it = active_.erase(it);
          } else {
            out.emplace_back(a.callback, std::move(e));
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
