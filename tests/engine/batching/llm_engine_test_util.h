// Helpers of the LLMEngine tests: sinks that collect one request's events (Sink: tokens and text;
// ChoicesSink: per choice, with logprobs and the event order checked) and wait for the final
// one, and the small requests and options of the fake-model tests. The model with no weights the
// engine's own logic is tested over is tests/engine/fake_model.h.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/batching/llm_engine.h"

namespace tandem::engine::testing {

// A greedy request of `max_tokens` tokens.
inline GenerationRequest Greedy(std::string id, std::vector<int32_t> prompt, int max_tokens) {
  GenerationRequest r;
  r.request_id = std::move(id);
  r.prompt_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  return r;
}

// A pool of 64 blocks of 4 tokens, requests up to 128 tokens.
inline EngineOptions SmallOptions() {
  EngineOptions o;
  o.kv_tokens = 256;
  o.block_size = 4;
  o.max_model_len = 128;
  return o;
}

// What a callback on the engine thread fills while a test thread waits on it.
template <typename Record>
class Recorder {
 public:
  // Waits until `done(record)`; false on timeout.
  template <typename Done>
  bool WaitUntil(Done done, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return done(r_); });
  }
  Record Get() {
    std::lock_guard<std::mutex> l(mu_);
    return r_;
  }

 protected:
  std::mutex mu_;
  std::condition_variable cv_;
  Record r_;
};

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

class Sink : public Recorder<Received> {
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
    return WaitUntil([](const Received& r) { return r.finished; }, timeout);
  }
  // Waits until at least `n` tokens arrived (or the request finished).
  bool WaitTokens(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    return WaitUntil([n](const Received& r) { return r.tokens.size() >= n || r.finished; }, timeout);
  }
};

// What one request of n choices received, choice by choice, with the checks of the event order
// (GenerationEvent in engine/batching/llm_engine.h) made as the events come.
struct ReceivedChoice {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  std::string finish_reason;
  int finals = 0;  // choice_finished events (must end at 1)
};
struct ReceivedChoices {
  std::vector<ReceivedChoice> choices;
  std::vector<TokenLogprob> prompt_logprobs;
  int prompt_logprob_events = 0;
  bool finished = false;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::vector<std::string> protocol_errors;  // events that broke the order; empty when all is well
};

class ChoicesSink : public Recorder<ReceivedChoices> {
 public:
  explicit ChoicesSink(int n) { r_.choices.resize(n); }
  GenerationCallback Callback() {
    return [this](const GenerationEvent& ev) {
      std::lock_guard<std::mutex> l(mu_);
      auto error = [&](const std::string& what) { r_.protocol_errors.push_back(what); };
      if (r_.finished) error("an event after the request's last");
      if (ev.choice < 0 || ev.choice >= static_cast<int>(r_.choices.size())) {
        error("choice " + std::to_string(ev.choice) + " out of range");
        return;
      }
      ReceivedChoice& c = r_.choices[ev.choice];
      if (!ev.prompt_logprobs.empty()) {
        ++r_.prompt_logprob_events;
        if (ev.choice != 0 || !ev.token_ids.empty()) error("prompt logprobs not in an event of their own");
        for (const auto& ch : r_.choices) {
          if (!ch.tokens.empty()) error("prompt logprobs after a token");
        }
        r_.prompt_logprobs = ev.prompt_logprobs;
      }
      if (c.finals > 0) error("an event of choice " + std::to_string(ev.choice) + " after its final one");
      if (!ev.logprobs.empty() && ev.logprobs.size() != ev.token_ids.size()) error("logprobs do not match the tokens");
      c.tokens.insert(c.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
      c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
      if (ev.choice_finished) {
        ++c.finals;
        c.finish_reason = ev.finish_reason;
      }
      if (ev.finished) {
        if (!ev.choice_finished) error("finished without choice_finished");
        for (const auto& ch : r_.choices) {
          if (ch.finals != 1) error("the request finished before every choice did");
        }
        r_.finished = true;
        r_.prompt_tokens = ev.prompt_tokens;
        r_.completion_tokens = ev.completion_tokens;
      } else if (ev.completion_tokens != 0) {
        error("usage before the last event");
      }
      cv_.notify_all();
    };
  }
  bool Wait(std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
    return WaitUntil([](const ReceivedChoices& r) { return r.finished; }, timeout);
  }
  // Waits until choice 0 has at least `n` tokens (or the request finished).
  bool WaitTokens(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    return WaitUntil([n](const ReceivedChoices& r) { return r.choices[0].tokens.size() >= n || r.finished; },
                     timeout);
  }
};

}  // namespace tandem::engine::testing
