// Prometheus metrics of the agent on --metrics-listen. Node facts are read at scrape time (a
// Collectable of our own), so `tandem_node_info` and the memory gauges are as fresh as the
// facts served over gRPC. Hashing progress gauges are set by the hashing RPC as it runs. Link
// utilisation comes from a LinkRates sampler (agentd/link_rates.h) once one is set.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agentd/link_rates.h"
#include "agentd/node_facts.h"
#include "tandem/v1/agent.pb.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}

namespace tandem::agentd {

// Reads driver, kernel, memory and build facts on every Collect().
class NodeFactsCollectable final : public prometheus::Collectable {
 public:
  NodeFactsCollectable(FactsRoots roots, std::string node_name);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  FactsRoots roots_;
  std::string node_name_;
};

// The hosted engine rank, read at scrape time: tandem_rank_state{state} (1 for the current
// state, 0 for the others), tandem_group_generation, tandem_rank_iterations_total (engine steps:
// the LLMEngine's on the head, the steps a worker ran), tandem_rank_queue_depth, tandem_rank_kv_tokens,
// tandem_rank_state_slots.
class RankStatusCollectable final : public prometheus::Collectable {
 public:
  explicit RankStatusCollectable(std::string node_name) : node_name_(std::move(node_name)) {}
  void SetSource(std::function<v1::RankStatus()> source);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string node_name_;
  mutable std::mutex mu_;
  std::function<v1::RankStatus()> source_;
};

class AgentMetrics {
 public:
  // Without an exposer: for tests and for `--metrics-listen` left empty.
  AgentMetrics(FactsRoots roots, std::string node_name);
  ~AgentMetrics();

  // Binds "HOST:PORT" (port 0: any free port) and starts serving /metrics.
  absl::Status Listen(const std::string& host_port);
  int port() const { return port_; }

  // Progress of the hash in flight: tandem_hash_files_done, tandem_hash_bytes_done and
  // tandem_hash_size_bytes (gauges: they start again at every hash).
  void SetHashProgress(uint64_t files_done, uint64_t bytes_done, uint64_t bytes_total);
  // A finished hash: its throughput (gauge) and the bytes it really read (files not served from
  // the cache) added to the counter tandem_hash_bytes_total and tandem_hashes_total.
  void RecordHashDone(const v1::WeightsManifest& manifest);
  // Where the rank metrics come from (the EngineHost's status); unset: not exported.
  void SetRankStatusSource(std::function<v1::RankStatus()> source) { rank_->SetSource(std::move(source)); }
  // The link-utilisation sampler (tandem_link_*); unset: not exported.
  void SetLinkRates(std::shared_ptr<const LinkRates> rates) { links_->SetSource(std::move(rates)); }

  // Text exposition of everything (what /metrics returns), for tests.
  std::string Render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<NodeFactsCollectable> facts_;
  std::shared_ptr<RankStatusCollectable> rank_;
  std::shared_ptr<LinkRatesCollectable> links_;
  prometheus::Gauge* hash_bytes_done_;
  prometheus::Gauge* hash_size_bytes_;
  prometheus::Gauge* hash_files_done_;
  prometheus::Gauge* hash_throughput_;
  prometheus::Counter* hash_bytes_total_;
  prometheus::Counter* hashes_total_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace tandem::agentd
