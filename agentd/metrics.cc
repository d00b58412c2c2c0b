#include "agentd/metrics.h"

#include <sstream>

#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"

namespace tandem::agentd {
namespace {

prometheus::MetricFamily GaugeFamily(const std::string& name, const std::string& help, double value,
                                     const std::vector<prometheus::ClientMetric::Label>& labels = {}) {
  prometheus::MetricFamily fam;
  fam.name = name;
  fam.help = help;
  fam.type = prometheus::MetricType::Gauge;
  prometheus::ClientMetric m;
  m.label = labels;
  m.gauge.value = value;
  fam.metric.push_back(std::move(m));
  return fam;
}

prometheus::Gauge* MakeGauge(prometheus::Registry& r, const std::string& name, const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

NodeFactsCollectable::NodeFactsCollectable(FactsRoots roots, std::string node_name)
    : roots_(std::move(roots)), node_name_(std::move(node_name)) {}

std::vector<prometheus::MetricFamily> NodeFactsCollectable::Collect() const {
  const v1::DriverFact driver = ReadDriverFact(roots_);
  const v1::KernelFact kernel = ReadKernelFact(roots_);
  const v1::MemoryFact mem = ReadMemoryFact(roots_);
  const v1::AgentBuild build = ReadAgentBuild();
  std::vector<prometheus::MetricFamily> out;
  out.push_back(GaugeFamily("tandem_node_info", "Node facts as labels; the value is always 1.", 1.0,
                            {{"node", node_name_},
                             {"driver", driver.version()},
                             {"kernel", kernel.release()},
                             {"agent_version", build.version()},
                             {"agent_sha256", build.binary_sha256()}}));
  out.push_back(GaugeFamily("tandem_memory_total_bytes", "MemTotal from meminfo.",
                            static_cast<double>(mem.total_bytes())));
  out.push_back(GaugeFamily("tandem_memory_available_bytes", "MemAvailable from meminfo.",
                            static_cast<double>(mem.available_bytes())));
  out.push_back(GaugeFamily("tandem_swap_total_bytes", "SwapTotal from meminfo.",
                            static_cast<double>(mem.swap_total_bytes())));
  return out;
}

AgentMetrics::AgentMetrics(FactsRoots roots, std::string node_name)
    : registry_(std::make_shared<prometheus::Registry>()),
      facts_(std::make_shared<NodeFactsCollectable>(std::move(roots), std::move(node_name))) {
  hash_bytes_done_ = MakeGauge(*registry_, "tandem_hash_bytes_done", "Bytes of the current/last weights hash done.");
  hash_bytes_total_ = MakeGauge(*registry_, "tandem_hash_bytes_total", "Bytes of the current/last weights hash in all.");
  hash_files_done_ = MakeGauge(*registry_, "tandem_hash_files_done", "Files of the current/last weights hash done.");
  hash_throughput_ = MakeGauge(*registry_, "tandem_hash_throughput_bytes_per_second",
                               "Hashing throughput of the last weights hash (bytes actually read).");
}

AgentMetrics::~AgentMetrics() = default;

absl::Status AgentMetrics::Listen(const std::string& host_port) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(host_port);
  } catch (const std::exception& e) {
    return absl::UnavailableError("metrics listen " + host_port + ": " + e.what());
  }
  exposer_->RegisterCollectable(facts_);
  exposer_->RegisterCollectable(registry_);
  auto ports = exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError("metrics listen " + host_port + ": no port bound");
  port_ = ports.front();
  return absl::OkStatus();
}

void AgentMetrics::SetHashProgress(uint64_t files_done, uint64_t bytes_done, uint64_t bytes_total) {
  hash_files_done_->Set(static_cast<double>(files_done));
  hash_bytes_done_->Set(static_cast<double>(bytes_done));
  hash_bytes_total_->Set(static_cast<double>(bytes_total));
}

void AgentMetrics::SetHashThroughput(double bytes_per_second) { hash_throughput_->Set(bytes_per_second); }

std::string AgentMetrics::Render() const {
  std::vector<prometheus::MetricFamily> all = facts_->Collect();
  for (auto& f : registry_->Collect()) all.push_back(std::move(f));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, all);
  return out.str();
}

}  // namespace tandem::agentd
