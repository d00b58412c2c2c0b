#include "openai/serve_metrics.h"

#include <sstream>

#include "prometheus/text_serializer.h"

namespace tandem::openai {
namespace {

// Bucket bounds in seconds, the ranges vLLM uses: a CPU engine sits at the slow end, an H200 at
// the fast end, so both ends are covered.
const prometheus::Histogram::BucketBoundaries kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0};
const prometheus::Histogram::BucketBoundaries kItlBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
    0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};
const prometheus::Histogram::BucketBoundaries kE2eBuckets = {
    0.05, 0.1,  0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,
    15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0};
const prometheus::Histogram::BucketBoundaries kStepBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};
// Per-request phases: vLLM's request latency bounds, with a few below 0.3 s for the queue time of
// an engine that is not busy.
const prometheus::Histogram::BucketBoundaries kPhaseBuckets = {
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1,  0.3,   0.5,   0.8,   1.0,   1.5,   2.0,   2.5,   5.0,
    10.0,  15.0,  20.0, 30.0,  40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
// Prompt and generation lengths in tokens: vLLM's 1-2-5 series, up to the longest contexts.
const prometheus::Histogram::BucketBoundaries kLengthBuckets = {
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000};
// Tokens computed in one engine step: vLLM's iteration_tokens bounds.
const prometheus::Histogram::BucketBoundaries kIterationTokenBuckets = {1,   8,    16,   32,   64,   128,  256,
                                                                        512, 1024, 2048, 4096, 8192, 16384};
// Finish reasons and HTTP refusals the server counts, created at 0 so that each rate() has a
// series before the first such request.
const char* const kFinishReasons[] = {"stop", "length", "abort", "error"};
const int kRejectionCodes[] = {400, 401, 404, 405, 408, 413, 429, 431, 503};
const prometheus::Histogram::BucketBoundaries kAllReduceBuckets = {
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
    0.0025,  0.005,    0.01,    0.025,  0.05,    0.1,    0.5, 1.0, 5.0};

prometheus::Histogram* AddHistogram(prometheus::Registry& r, const prometheus::Labels& labels,
                                    const char* name, const char* help,
                                    const prometheus::Histogram::BucketBoundaries& buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(labels, buckets);
}
prometheus::Counter* AddCounter(prometheus::Registry& r, const prometheus::Labels& labels,
                                const char* name, const char* help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
}
prometheus::Gauge* AddGauge(prometheus::Registry& r, const prometheus::Labels& labels,
                            const char* name, const char* help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(labels);
}

}  // namespace

ServeMetrics::ServeMetrics(const std::string& model_name, std::shared_ptr<prometheus::Registry> registry)
    : registry_(registry ? std::move(registry) : std::make_shared<prometheus::Registry>()),
      labels_{{"model_name", model_name}} {
  prometheus::Registry& r = *registry_;
  ttft_ = AddHistogram(r, labels_, "tandem_time_to_first_token_seconds",
                       "Time from request arrival to its first generated token.", kTtftBuckets);
  itl_ = AddHistogram(r, labels_, "tandem_inter_token_latency_seconds",
                      "Time between consecutive generated tokens of one request.", kItlBuckets);
  e2e_ = AddHistogram(r, labels_, "tandem_e2e_request_latency_seconds",
                      "Time from request arrival to its last token.", kE2eBuckets);
  step_ = AddHistogram(r, labels_, "tandem_step_seconds",
                       "Wall time of one engine step (all TP ranks).", kStepBuckets);
  allreduce_ = AddHistogram(r, labels_, "tandem_allreduce_seconds",
                            "Wall time of one tensor-parallel all-reduce on rank 0.", kAllReduceBuckets);
  prompt_tokens_ = AddCounter(r, labels_, "tandem_prompt_tokens_total", "Prompt tokens of finished requests.");
  generation_tokens_ = AddCounter(r, labels_, "tandem_generation_tokens_total", "Generated tokens.");
  preemptions_ = AddCounter(r, labels_, "tandem_num_preemptions_total",
                            "Sequences preempted (recomputed later) because the KV pool was full.");
  iterations_ = AddCounter(r, labels_, "tandem_iterations_total", "Engine steps run.");
  request_success_ = &prometheus::BuildCounter()
                          .Name("tandem_request_success_total")
                          .Help("Finished requests by finish reason.")
                          .Register(r);
  request_rejected_ = &prometheus::BuildCounter()
                           .Name("tandem_request_rejected_total")
                           .Help("Requests refused before generation, by HTTP status.")
                           .Register(r);
  for (const char* reason : kFinishReasons) request_success_->Add(LabelsWith("finished_reason", reason));
  for (int code : kRejectionCodes) request_rejected_->Add(LabelsWith("code", std::to_string(code)));
  iteration_tokens_ = AddHistogram(r, labels_, "tandem_iteration_tokens", "Tokens computed in one engine step.",
                                   kIterationTokenBuckets);
  queue_time_ = AddHistogram(r, labels_, "tandem_request_queue_time_seconds",
                             "Time a finished request waited before its first engine step.", kPhaseBuckets);
  prefill_time_ = AddHistogram(r, labels_, "tandem_request_prefill_time_seconds",
                               "Time from a finished request's first engine step to its first token.", kPhaseBuckets);
  decode_time_ = AddHistogram(r, labels_, "tandem_request_decode_time_seconds",
                              "Time from a finished request's first token to its last.", kPhaseBuckets);
  inference_time_ = AddHistogram(r, labels_, "tandem_request_inference_time_seconds",
                                 "Time from a finished request's first engine step to its last token.", kPhaseBuckets);
  prompt_len_ = AddHistogram(r, labels_, "tandem_request_prompt_tokens", "Prompt length of finished requests.",
                             kLengthBuckets);
  generation_len_ = AddHistogram(r, labels_, "tandem_request_generation_tokens",
                                 "Tokens generated by finished requests.", kLengthBuckets);
  cache_config_ = &prometheus::BuildGauge()
                       .Name("tandem_cache_config_info")
                       .Help("The KV cache's configuration as labels (block size, element type, blocks, tokens); "
                             "the value is always 1.")
                       .Register(r);
  running_ = AddGauge(r, labels_, "tandem_num_requests_running", "Requests in the running batch.");
  waiting_ = AddGauge(r, labels_, "tandem_num_requests_waiting", "Requests queued for the batch.");
  kv_usage_ = AddGauge(r, labels_, "tandem_kv_cache_usage_perc", "Fraction of KV cache blocks in use (0 to 1).");
  kv_tokens_total_ = AddGauge(r, labels_, "tandem_kv_cache_tokens", "Capacity of the KV pool in tokens.");
  state_slots_total_ = AddGauge(r, labels_, "tandem_state_slots",
                                "Per-sequence state slots (hybrid models; 0 = the model keeps none).");
  state_slots_used_ = AddGauge(r, labels_, "tandem_state_slots_used", "State slots held by running requests.");
  http_connections_ = AddGauge(r, labels_, "tandem_http_connections", "Open connections to the API.");
  http_evicted_ = AddCounter(r, labels_, "tandem_http_connections_evicted_total",
                             "Connections closed to admit a newer one at the connection cap.");
  http_timed_out_ = AddCounter(r, labels_, "tandem_http_timeouts_total",
                               "Connections closed at a request head, body or response write deadline.");
  http_clients_gone_ = AddCounter(r, labels_, "tandem_http_clients_gone_total",
                                  "Clients that went away while their request was in flight.");
}

prometheus::Labels ServeMetrics::LabelsWith(const std::string& key, const std::string& value) const {
  prometheus::Labels l = labels_;
  l[key] = value;
  return l;
}

void ServeMetrics::CountFinishedRequest(const std::string& finish_reason) {
  request_success_->Add(LabelsWith("finished_reason", finish_reason)).Increment();
}

void ServeMetrics::CountRejectedRequest(int http_status) {
  request_rejected_->Add(LabelsWith("code", std::to_string(http_status))).Increment();
}

void ServeMetrics::ObserveStep(const engine::StepMetrics& step) {
  step_->Observe(step.seconds);
  iteration_tokens_->Observe(static_cast<double>(step.batch_tokens));
}

void ServeMetrics::ObserveFinishedRequest(const engine::RequestMetrics& m) {
  queue_time_->Observe(m.queue_seconds);
  // A request that never ran has no prefill, decode or inference to speak of (vLLM skips them too).
  if (m.scheduled) {
    prefill_time_->Observe(m.prefill_seconds);
    decode_time_->Observe(m.decode_seconds);
    inference_time_->Observe(m.inference_seconds);
  }
  prompt_len_->Observe(static_cast<double>(m.prompt_tokens));
  generation_len_->Observe(static_cast<double>(m.generation_tokens));
}

void ServeMetrics::UpdateFromStats(const engine::EngineStats& stats) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  // The pool's configuration never changes for an engine: one series, made at the first stats.
  if (!cache_config_set_ && stats.kv_blocks_total > 0) {
    prometheus::Labels l = labels_;
    l["block_size"] = std::to_string(stats.block_size);
    l["cache_dtype"] = stats.kv_cache_dtype;
    l["num_blocks"] = std::to_string(stats.kv_blocks_total);
    l["kv_tokens"] = std::to_string(stats.kv_tokens_total);
    cache_config_->Add(l).Set(1);
    cache_config_set_ = true;
  }
  running_->Set(stats.running);
  waiting_->Set(stats.waiting);
  kv_usage_->Set(stats.kv_blocks_total > 0
                     ? static_cast<double>(stats.kv_blocks_used) / static_cast<double>(stats.kv_blocks_total)
                     : 0.0);
  kv_tokens_total_->Set(static_cast<double>(stats.kv_tokens_total));
  state_slots_total_->Set(stats.state_slots_total);
  state_slots_used_->Set(stats.state_slots_used);
  // The engine keeps totals; a Prometheus counter only moves forward by increments.
  const double preempt_delta = static_cast<double>(stats.preemptions) - preemptions_->Value();
  if (preempt_delta > 0) preemptions_->Increment(preempt_delta);
  const double iter_delta = static_cast<double>(stats.iterations) - iterations_->Value();
  if (iter_delta > 0) iterations_->Increment(iter_delta);
}

void ServeMetrics::UpdateFromHttp(const HttpCounts& c) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  http_connections_->Set(static_cast<double>(c.connections));
  for (auto [counter, total] : {std::pair{http_evicted_, c.evicted}, std::pair{http_timed_out_, c.timed_out},
                                std::pair{http_clients_gone_, c.clients_gone}}) {
    const double delta = static_cast<double>(total) - counter->Value();
    if (delta > 0) counter->Increment(delta);
  }
}

std::string ServeMetrics::Text() const {
  prometheus::TextSerializer serializer;
  std::ostringstream out;
  serializer.Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace tandem::openai
