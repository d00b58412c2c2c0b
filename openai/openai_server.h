// The OpenAI-compatible HTTP server over an LLMEngine, on our own HTTP/1.1 server (http/):
// /v1/models[/{id}], /v1/completions, /v1/chat/completions (with Server-Sent Events streaming),
// /health and /metrics. Requests are parsed by openai_protocol / chat_request, tokenized by the
// route (chat_handler, completion_handler) within the context length (an over-long prompt is
// refused before it is fully tokenized), and handed to the engine (generation_run); the engine's
// callback (on the engine thread) only queues events, and the request's worker thread writes
// them. A client that goes away, streaming or not, cancels its sequences at once.
//
// The front door (docs/http.md): bodies over max_body_bytes are refused 413 unread, every
// connection has header/body/idle/write deadlines, connections and requests in flight are
// capped (429 from the event loop beyond), and /health, /metrics and /v1/models[/{id}] are answered
// on the event loop, so they answer while every worker is busy.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "engine/batching/llm_engine.h"
#include "engine/tokenizer/chat_prompt.h"
#include "openai/serve_metrics.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::http {
class Server;
}

namespace tandem::openai {

struct OpenAIServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0 = any free port (read it back with port())
  std::string served_model_name;    // the only model name accepted ("" in a request = this one)
  std::string api_key;              // "" = no authentication; else /v1/* need "Bearer <key>"
  // Requests handed to worker threads at once; a streaming request holds its worker until it
  // ends. Size it above the engine's max_num_seqs + max_waiting, so that the engine's own
  // admission (429 with its reason) decides; beyond it the event loop answers 429 itself.
  int max_in_flight = 64;
  int max_connections = 1024;       // at the cap the oldest idle (or still-sending) one is closed
  size_t max_body_bytes = 4 << 20;  // larger request bodies: 413, unread
  std::chrono::milliseconds header_timeout{10000};  // the whole request head
  std::chrono::milliseconds body_timeout{60000};    // the whole body, after the head
  std::chrono::milliseconds idle_timeout{30000};    // keep-alive between requests
  std::chrono::milliseconds write_timeout{30000};   // each response write (a client that stops reading)
  int32_t max_model_len = 4096;     // prompt + max_tokens
  int64_t vocab_size = 0;           // the model's: prompt token ids must be below it
  int retry_after_seconds = 1;      // Retry-After on 429 / 503
  // Extra readiness gate for /health and new requests (the orchestrator's cluster state);
  // null = ready whenever the engine is healthy.
  std::function<bool()> ready;
  // How chat messages become the prompt: the model's own template (ServingStack loads it from
  // the model folder); null = the built-in Qwen3 ChatML.
  std::shared_ptr<const tokenizer::ChatPrompt> chat_prompt;
};

class OpenAIServer {
 public:
  // `engine`, `tokenizer` (may be null: then only token-id prompts to /v1/completions) and
  // `metrics` are not owned and must outlive the server (and, when Stop returns false, the
  // handlers it left running).
  OpenAIServer(engine::LLMEngine* engine, const tokenizer::Tokenizer* tokenizer, ServeMetrics* metrics,
               OpenAIServerOptions options);
  ~OpenAIServer();  // Stop()
  OpenAIServer(const OpenAIServer&) = delete;
  OpenAIServer& operator=(const OpenAIServer&) = delete;

  // Binds host:port and starts serving; returns once connections are accepted.
  absl::Status Start();
  int port() const { return port_; }
  const std::string& host() const { return options_.host; }

  // Graceful part of a shutdown: new requests get 503, /health 503; waits until the requests in
  // flight have finished or `deadline` passed. Returns the number still in flight.
  int Drain(std::chrono::milliseconds deadline);
  // Closes the listening socket at once (the port is free when this returns; never blocks).
  void StopListening();
  // Stops serving: waits up to `deadline` for handlers in flight (shut the engine down first:
  // that aborts what is running, so they end), then leaves stuck ones behind. Returns false
  // when a handler was left running: then this server's handler state is kept (leaked) for it.
  bool Stop(std::chrono::milliseconds deadline = std::chrono::milliseconds(5000));

  int active_requests() const;

 private:
  // The routes and everything they use (so that a handler left running by Stop can be given
  // all of it by leaking this one object).
  class Handlers;
  OpenAIServerOptions options_;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<http::Server> http_;
  int port_ = 0;
};

}  // namespace tandem::openai
