// Helper of the LLMEngine tests: a sink that collects one request's events and waits for the
// final one. The model with no weights the engine's own logic is tested over is
// tests/engine/fake_model.h.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

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

}  // namespace tandem::engine::testing
