// Prometheus metrics of the agent on --metrics-listen. Node facts are read at scrape time (a
// Collectable of our own), so `tandem_node_info` and the memory gauges are as fresh as the
// facts served over gRPC. Hashing progress gauges are set by the hashing RPC as it runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agentd/node_facts.h"
#include "prometheus/collectable.h"
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

class AgentMetrics {
 public:
  // Without an exposer: for tests and for `--metrics-listen` left empty.
  AgentMetrics(FactsRoots roots, std::string node_name);
  ~AgentMetrics();

  // Binds "HOST:PORT" (port 0: any free port) and starts serving /metrics.
  absl::Status Listen(const std::string& host_port);
  int port() const { return port_; }

  void SetHashProgress(uint64_t files_done, uint64_t bytes_done, uint64_t bytes_total);
  void SetHashThroughput(double bytes_per_second);

  // Text exposition of everything (what /metrics returns), for tests.
  std::string Render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<NodeFactsCollectable> facts_;
  prometheus::Gauge* hash_bytes_done_;
  prometheus::Gauge* hash_bytes_total_;
  prometheus::Gauge* hash_files_done_;
  prometheus::Gauge* hash_throughput_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace tandem::agentd
