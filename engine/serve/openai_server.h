// The OpenAI-compatible HTTP server over an LLMEngine (cpp-httplib): /v1/models,
// /v1/completions, /v1/chat/completions (with Server-Sent Events streaming), /health and
// /metrics. Requests are parsed by openai_protocol, tokenized here, and handed to the engine;
// the engine's callback (on the engine thread) only queues events, and the connection's own
// HTTP thread writes them. A streaming client that goes away cancels its sequence.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "engine/serve/llm_engine.h"
#include "engine/serve/serve_metrics.h"
#include "engine/tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace tandem::serve {

struct OpenAIServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0 = any free port (read it back with port())
  std::string served_model_name;    // the only model name accepted ("" in a request = this one)
  std::string api_key;              // "" = no authentication; else /v1/* need "Bearer <key>"
  // One HTTP thread serves one connection at a time, and a streaming request holds its thread
  // until it ends: size this above the engine's max_num_seqs + max_waiting so that refusals
  // (429) stay fast instead of queueing behind busy connections.
  int http_threads = 64;
  int32_t max_model_len = 4096;     // prompt + max_tokens
  int64_t vocab_size = 0;           // the model's: prompt token ids must be below it
  int retry_after_seconds = 1;      // Retry-After on 429 / 503
  // Extra readiness gate for /health and new requests (the orchestrator's cluster state);
  // null = ready whenever the engine is healthy.
  std::function<bool()> ready;
};

class OpenAIServer {
 public:
  // `engine`, `tokenizer` (may be null: then only token-id prompts to /v1/completions) and
  // `metrics` are not owned and must outlive the server.
  OpenAIServer(engine::LLMEngine* engine, const tokenizer::Tokenizer* tokenizer, ServeMetrics* metrics,
               OpenAIServerOptions options);
  ~OpenAIServer();  // Stop()
  OpenAIServer(const OpenAIServer&) = delete;
  OpenAIServer& operator=(const OpenAIServer&) = delete;

  // Binds host:port and starts serving on a background thread; returns once listening.
  absl::Status Start();
  int port() const { return port_; }
  const std::string& host() const { return options_.host; }

  // Graceful part of a shutdown: new requests get 503, /health 503; waits until the requests in
  // flight have finished or `deadline` passed. Returns the number still in flight.
  int Drain(std::chrono::milliseconds deadline);
  // Stops listening and joins the HTTP threads. Requests still streaming end when their engine
  // events end: shut the engine down first (it aborts what is in flight).
  void Stop();

  int active_requests() const { return active_requests_.load(); }

 private:
  class Handlers;
  engine::LLMEngine* engine_;
  const tokenizer::Tokenizer* tokenizer_;
  ServeMetrics* metrics_;
  OpenAIServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<Handlers> handlers_;
  std::thread listener_;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int> active_requests_{0};
};

}  // namespace tandem::serve
