// The serving metrics' exposition: the format rules (ours and promtool's) on a fresh and a used
// registry, the series a dashboard reads before the first request (at zero, finish reasons and
// refusal codes included), the vLLM-equivalent per-request and per-step histograms, the cache
// configuration, and engine/HTTP totals turned into counter increments that never run backwards.
#include "openai/serve_metrics.h"

#include <gtest/gtest.h>

#include "tests/common/metrics_text.h"
#include "tests/common/promtool.h"

namespace tandem::openai {
namespace {
using namespace tandem::testing;  // the exposition checks and their Series/Problems

// The series of model "tiny" named in `want`, with their values.
Series Tiny(const Series& want) {
  Series out;
  for (const auto& [name, value] : want) out.emplace_back(name + "{model_name=\"tiny\"}", value);
  return out;
}

TEST(ServeMetricsTest, FreshRegistryFollowsTheRulesAndStartsAtZero) {
  ServeMetrics m("tiny");
  const std::string text = m.Text();
  EXPECT_EQ(ExpositionProblems(text), Problems{}) << text;
  Series zeros;
  for (const char* name :
       {"tandem_prompt_tokens_total", "tandem_generation_tokens_total", "tandem_num_preemptions_total",
        "tandem_iterations_total", "tandem_num_requests_running", "tandem_num_requests_waiting",
        "tandem_kv_cache_usage_perc", "tandem_kv_cache_tokens", "tandem_state_slots", "tandem_state_slots_used",
        "tandem_http_connections",
        "tandem_http_connections_evicted_total", "tandem_http_timeouts_total", "tandem_http_clients_gone_total",
        "tandem_time_to_first_token_seconds_count", "tandem_inter_token_latency_seconds_count",
        "tandem_e2e_request_latency_seconds_count", "tandem_step_seconds_count", "tandem_allreduce_seconds_count",
        "tandem_iteration_tokens_count", "tandem_request_queue_time_seconds_count",
        "tandem_request_prefill_time_seconds_count", "tandem_request_decode_time_seconds_count",
        "tandem_request_inference_time_seconds_count", "tandem_request_prompt_tokens_count",
        "tandem_request_generation_tokens_count"}) {
    zeros.emplace_back(name, 0.0);
  }
  EXPECT_EQ(SeriesMismatches(text, Tiny(zeros)), Problems{});
  // Requests by finish reason and by refusal exist before the first one (a rate() needs them).
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_request_success_total{finished_reason=\"stop\",model_name=\"tiny\"}", 0},
                                    {"tandem_request_success_total{finished_reason=\"error\",model_name=\"tiny\"}", 0},
                                    {"tandem_request_rejected_total{code=\"429\",model_name=\"tiny\"}", 0},
                                    {"tandem_request_rejected_total{code=\"503\",model_name=\"tiny\"}", 0}}),
            Problems{});
  EXPECT_EQ(PromtoolFindingsOrEmpty(text), "") << text;
}

TEST(ServeMetricsTest, FinishedRequestsAndStepsFillTheVllmHistograms) {
  ServeMetrics m("tiny");
  engine::RequestMetrics done;
  done.finish_reason = "length";
  done.prompt_tokens = 30;
  done.generation_tokens = 7;
  done.scheduled = true;
  done.queue_seconds = 0.02;
  done.prefill_seconds = 0.2;
  done.decode_seconds = 0.7;
  done.inference_seconds = 0.9;
  m.ObserveFinishedRequest(done);
  engine::RequestMetrics cancelled_in_queue;  // never ran: only its queue time and lengths count
  cancelled_in_queue.finish_reason = "abort";
  cancelled_in_queue.prompt_tokens = 3;
  cancelled_in_queue.queue_seconds = 4.0;
  m.ObserveFinishedRequest(cancelled_in_queue);
  engine::StepMetrics step;
  step.seconds = 0.004;
  step.batch_tokens = 100;
  m.ObserveStep(step);
  const std::string text = m.Text();
  EXPECT_EQ(ExpositionProblems(text), Problems{}) << text;
  EXPECT_EQ(SeriesMismatches(text, Tiny({{"tandem_request_queue_time_seconds_count", 2},
                                         {"tandem_request_queue_time_seconds_sum", 4.02},
                                         {"tandem_request_prefill_time_seconds_count", 1},
                                         {"tandem_request_prefill_time_seconds_sum", 0.2},
                                         {"tandem_request_decode_time_seconds_sum", 0.7},
                                         {"tandem_request_inference_time_seconds_sum", 0.9},
                                         {"tandem_request_prompt_tokens_count", 2},
                                         {"tandem_request_prompt_tokens_sum", 33},
                                         {"tandem_request_generation_tokens_sum", 7},
                                         {"tandem_iteration_tokens_count", 1},
                                         {"tandem_iteration_tokens_sum", 100},
                                         {"tandem_step_seconds_count", 1}})),
            Problems{});
  // Cumulative buckets: 30 prompt tokens lie in (20, 50]; a step of 100 tokens in (64, 128].
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_request_prompt_tokens_bucket{model_name=\"tiny\",le=\"20\"}", 1},
                                    {"tandem_request_prompt_tokens_bucket{model_name=\"tiny\",le=\"50\"}", 2},
                                    {"tandem_iteration_tokens_bucket{model_name=\"tiny\",le=\"64\"}", 0},
                                    {"tandem_iteration_tokens_bucket{model_name=\"tiny\",le=\"128\"}", 1}}),
            Problems{});
  EXPECT_EQ(PromtoolFindingsOrEmpty(text), "") << text;
}

TEST(ServeMetricsTest, CacheConfigInfoComesWithTheFirstStats) {
  ServeMetrics m("tiny");
  EXPECT_EQ(m.Text().find("tandem_cache_config_info{"), std::string::npos) << "no engine yet";
  engine::EngineStats s;
  s.kv_blocks_total = 64;
  s.kv_tokens_total = 1024;
  s.block_size = 16;
  s.kv_cache_dtype = "bf16";
  m.UpdateFromStats(s);
  s.kv_blocks_used = 5;
  m.UpdateFromStats(s);  // the next scrape: still one series
  const std::string text = m.Text();
  const std::string series =
      "tandem_cache_config_info{block_size=\"16\",cache_dtype=\"bf16\",kv_tokens=\"1024\",model_name=\"tiny\","
      "num_blocks=\"64\"}";
  EXPECT_EQ(SeriesMismatches(text, {{series, 1}}), Problems{}) << text;
  size_t count = 0;
  for (size_t at = text.find("tandem_cache_config_info{"); at != std::string::npos;
       at = text.find("tandem_cache_config_info{", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(PromtoolFindingsOrEmpty(text), "") << text;
}

TEST(ServeMetricsTest, RequestObservationsLandInTheirSeries) {
  ServeMetrics m("tiny");
  m.ObserveTimeToFirstToken(0.03);
  m.ObserveInterTokenLatency(0.004);
  m.ObserveEndToEndLatency(1.2);
  m.AddPromptTokens(5);
  m.AddPromptTokens(2);
  m.AddGenerationTokens(16);
  m.CountFinishedRequest("stop");
  m.CountFinishedRequest("stop");
  m.CountFinishedRequest("abort");
  m.CountRejectedRequest(429);
  engine::StepMetrics step;
  step.seconds = 0.002;
  m.ObserveStep(step);
  m.ObserveAllReduce(0.00003);
  const std::string text = m.Text();
  EXPECT_EQ(ExpositionProblems(text), Problems{}) << text;
  EXPECT_EQ(SeriesMismatches(text, Tiny({{"tandem_time_to_first_token_seconds_count", 1},
                                         {"tandem_time_to_first_token_seconds_sum", 0.03},
                                         {"tandem_inter_token_latency_seconds_count", 1},
                                         {"tandem_e2e_request_latency_seconds_count", 1},
                                         {"tandem_step_seconds_count", 1},
                                         {"tandem_allreduce_seconds_count", 1},
                                         {"tandem_prompt_tokens_total", 7},
                                         {"tandem_generation_tokens_total", 16}})),
            Problems{});
  // 0.03 s falls between the 0.02 and 0.04 bounds (buckets are cumulative).
  EXPECT_EQ(SeriesMismatches(
                text, {{"tandem_time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.02\"}", 0},
                       {"tandem_time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.04\"}", 1},
                       {"tandem_time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"}", 1},
                       {"tandem_request_success_total{finished_reason=\"stop\",model_name=\"tiny\"}", 2},
                       {"tandem_request_success_total{finished_reason=\"abort\",model_name=\"tiny\"}", 1},
                       {"tandem_request_rejected_total{code=\"429\",model_name=\"tiny\"}", 1}}),
            Problems{});
}

// The engine and the HTTP server keep running totals; the counters follow them forward only, so a
// total that restarts lower (a new engine) does not make a counter go backwards.
TEST(ServeMetricsTest, TotalsBecomeIncrementsThatNeverRunBackwards) {
  ServeMetrics m("tiny");
  engine::EngineStats s;
  s.iterations = 10;
  s.preemptions = 3;
  s.running = 2;
  s.waiting = 1;
  s.kv_blocks_used = 3;
  s.kv_blocks_total = 4;
  s.kv_tokens_total = 4096;
  s.state_slots_total = 8;
  s.state_slots_used = 2;
  m.UpdateFromStats(s);
  m.UpdateFromHttp({5, 1, 2, 3});
  EXPECT_EQ(SeriesMismatches(m.Text(), Tiny({{"tandem_iterations_total", 10},
                                             {"tandem_num_preemptions_total", 3},
                                             {"tandem_num_requests_running", 2},
                                             {"tandem_num_requests_waiting", 1},
                                             {"tandem_kv_cache_usage_perc", 0.75},
                                             {"tandem_kv_cache_tokens", 4096},
                                             {"tandem_state_slots", 8},
                                             {"tandem_state_slots_used", 2},
                                             {"tandem_http_connections", 5},
                                             {"tandem_http_connections_evicted_total", 1},
                                             {"tandem_http_timeouts_total", 2},
                                             {"tandem_http_clients_gone_total", 3}})),
            Problems{});

  s = engine::EngineStats{};
  s.iterations = 4;  // lower than before
  s.preemptions = 5;
  m.UpdateFromStats(s);
  m.UpdateFromHttp({0, 0, 7, 1});
  // No KV pool: usage 0, not NaN.
  EXPECT_EQ(SeriesMismatches(m.Text(), Tiny({{"tandem_iterations_total", 10},
                                             {"tandem_num_preemptions_total", 5},
                                             {"tandem_kv_cache_usage_perc", 0},
                                             {"tandem_http_connections", 0},
                                             {"tandem_http_connections_evicted_total", 1},
                                             {"tandem_http_timeouts_total", 7},
                                             {"tandem_http_clients_gone_total", 3}})),
            Problems{});
}

// The agent hands its own registry in, so one /metrics serves both.
TEST(ServeMetricsTest, ASharedRegistryHoldsTheSeries) {
  auto registry = std::make_shared<prometheus::Registry>();
  ServeMetrics m("tiny", registry);
  EXPECT_EQ(&m.registry(), registry.get());
  m.AddGenerationTokens(3);
  bool found = false;
  for (const auto& family : registry->Collect()) {
    if (family.name == "tandem_generation_tokens_total") found = family.metric.at(0).counter.value == 3.0;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tandem::openai
