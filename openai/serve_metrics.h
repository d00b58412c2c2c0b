// The serving metrics (Prometheus, prefix tandem_, names mirroring vLLM's vllm:*; docs/metrics.md
// maps them): request latencies observed by the HTTP layer, each finished request's phases and
// lengths and each step's tokens observed by the engine, token and request counters, and engine
// gauges refreshed from LLMEngine::Stats() at each scrape. Every series exists from the start
// (counters and histograms at 0, the finish reasons and refusal codes included), so a dashboard's
// rate() works from the first scrape. Text() is what GET /metrics serves.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "engine/batching/llm_engine.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tandem::openai {

class ServeMetrics {
 public:
  // `registry` may be shared with other exporters (the agent's); null makes a private one.
  // Every series carries the label model_name (as vLLM's do).
  explicit ServeMetrics(const std::string& model_name,
                        std::shared_ptr<prometheus::Registry> registry = nullptr);

  // Per request, from the HTTP layer (thread-safe).
  void ObserveTimeToFirstToken(double seconds) { ttft_->Observe(seconds); }
  void ObserveInterTokenLatency(double seconds) { itl_->Observe(seconds); }
  void ObserveEndToEndLatency(double seconds) { e2e_->Observe(seconds); }
  void AddPromptTokens(int64_t n) { prompt_tokens_->Increment(static_cast<double>(n)); }
  void AddGenerationTokens(int64_t n) { generation_tokens_->Increment(static_cast<double>(n)); }
  // finish_reason: "stop", "length", "abort", "error".
  void CountFinishedRequest(const std::string& finish_reason);
  // HTTP-level refusals by status code (400, 401, 404, 429, 503).
  void CountRejectedRequest(int http_status);

  // Per engine step (the engine's step observer, when there is one): its time and its tokens.
  void ObserveStep(const engine::StepMetrics& step);
  // Per finished request (the engine's on_finish): queue, prefill, decode and inference time,
  // prompt and generation length.
  void ObserveFinishedRequest(const engine::RequestMetrics& request);
  void ObserveAllReduce(double seconds) { allreduce_->Observe(seconds); }

  // Gauges and engine-side counters from a Stats() snapshot (called before each scrape).
  void UpdateFromStats(const engine::EngineStats& stats);

  // The HTTP front door's totals (http::ServerStats), before each scrape.
  struct HttpCounts {
    int64_t connections = 0;     // open now
    int64_t evicted = 0;         // closed to admit a newer connection at the cap
    int64_t timed_out = 0;       // closed at a header, body or write deadline
    int64_t clients_gone = 0;    // went away with a request in flight
  };
  void UpdateFromHttp(const HttpCounts& counts);

  // The Prometheus text exposition of the whole registry.
  std::string Text() const;
  prometheus::Registry& registry() { return *registry_; }

 private:
  // labels_ (model_name) and one more.
  prometheus::Labels LabelsWith(const std::string& key, const std::string& value) const;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Labels labels_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* step_;
  prometheus::Histogram* allreduce_;
  prometheus::Histogram* iteration_tokens_;
  prometheus::Histogram* queue_time_;
  prometheus::Histogram* prefill_time_;
  prometheus::Histogram* decode_time_;
  prometheus::Histogram* inference_time_;
  prometheus::Histogram* prompt_len_;
  prometheus::Histogram* generation_len_;
  prometheus::Family<prometheus::Gauge>* cache_config_;
  bool cache_config_set_ = false;  // under stats_mu_
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* generation_tokens_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* iterations_;
  prometheus::Family<prometheus::Counter>* request_success_;
  prometheus::Family<prometheus::Counter>* request_rejected_;
  prometheus::Gauge* running_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* kv_usage_;
  prometheus::Gauge* kv_tokens_total_;
  prometheus::Gauge* state_slots_total_;
  prometheus::Gauge* state_slots_used_;
  prometheus::Gauge* http_connections_;
  prometheus::Counter* http_evicted_;
  prometheus::Counter* http_timed_out_;
  prometheus::Counter* http_clients_gone_;
  std::mutex stats_mu_;  // UpdateFromStats turns totals into counter increments
};

}  // namespace tandem::openai
