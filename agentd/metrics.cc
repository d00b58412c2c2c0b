#include "agentd/metrics.h"

#include <sstream>

#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"
#include "proto/rank_state.h"

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

void RankStatusCollectable::SetSource(std::function<v1::RankStatus()> source) {
  std::lock_guard<std::mutex> l(mu_);
  source_ = std::move(source);
}

std::vector<prometheus::MetricFamily> RankStatusCollectable::Collect() const {
  std::function<v1::RankStatus()> source;
  {
    std::lock_guard<std::mutex> l(mu_);
    source = source_;
  }
  std::vector<prometheus::MetricFamily> out;
  if (!source) return out;
  const v1::RankStatus s = source();
  prometheus::MetricFamily state;
  state.name = "tandem_rank_state";
  state.help = "State of the engine rank this agent hosts: 1 for the current state.";
  state.type = prometheus::MetricType::Gauge;
  // One series per state agent.proto defines (UNSPECIFIED is no state), named as the agent's logs
  // and `tandemctl status` name it: a state added to the proto gets its series here.
  for (int v = v1::RANK_STATE_IDLE; v <= v1::RankState_MAX; ++v) {
    if (!v1::RankState_IsValid(v)) continue;
    const auto value = static_cast<v1::RankState>(v);
    prometheus::ClientMetric m;
    m.label = {{"node", node_name_}, {"state", RankStateName(value)}};
    m.gauge.value = s.state() == value ? 1.0 : 0.0;
    state.metric.push_back(std::move(m));
  }
  out.push_back(std::move(state));
  const std::vector<prometheus::ClientMetric::Label> node = {{"node", node_name_}};
  out.push_back(GaugeFamily("tandem_group_generation", "Generation of the group this rank is (or was last) in.",
                            static_cast<double>(s.generation()), node));
  out.push_back(GaugeFamily("tandem_rank_queue_depth", "Requests waiting or running (head).",
                            static_cast<double>(s.queue_depth()), node));
  out.push_back(GaugeFamily("tandem_rank_kv_tokens", "KV-cache capacity of the group in tokens.",
                            static_cast<double>(s.kv_tokens()), node));
  out.push_back(GaugeFamily("tandem_rank_state_slots",
                            "Per-sequence state slots of the group (hybrid models; 0 = none).",
                            static_cast<double>(s.state_slots()), node));
  prometheus::MetricFamily it;
  it.name = "tandem_rank_iterations_total";
  it.help = "Engine steps of the current group (liveness: moves while work is queued).";
  it.type = prometheus::MetricType::Counter;
  prometheus::ClientMetric m;
  m.label = node;
  m.counter.value = static_cast<double>(s.iterations());
  it.metric.push_back(std::move(m));
  out.push_back(std::move(it));
  return out;
}

AgentMetrics::AgentMetrics(FactsRoots roots, std::string node_name)
    : registry_(std::make_shared<prometheus::Registry>()),
      facts_(std::make_shared<NodeFactsCollectable>(std::move(roots), node_name)),
      rank_(std::make_shared<RankStatusCollectable>(node_name)),
      links_(std::make_shared<LinkRatesCollectable>(node_name)) {
  hash_bytes_done_ = MakeGauge(*registry_, "tandem_hash_bytes_done", "Bytes of the current/last weights hash done.");
  hash_size_bytes_ = MakeGauge(*registry_, "tandem_hash_size_bytes", "Bytes of the current/last weights hash in all.");
  hash_files_done_ = MakeGauge(*registry_, "tandem_hash_files_done", "Files of the current/last weights hash done.");
  hash_throughput_ = MakeGauge(*registry_, "tandem_hash_throughput_bytes_per_second",
                               "Hashing throughput of the last weights hash (bytes actually read).");
  // Counters exist from the start at 0, so rate() and increase() work from the first scrape.
  hash_bytes_total_ = &prometheus::BuildCounter()
                           .Name("tandem_hash_bytes_total")
                           .Help("Bytes of weight files read and hashed since the agent started (cache hits excluded).")
                           .Register(*registry_)
                           .Add({});
  hashes_total_ = &prometheus::BuildCounter()
                       .Name("tandem_hashes_total")
                       .Help("Weights hashes finished since the agent started.")
                       .Register(*registry_)
                       .Add({});
}

AgentMetrics::~AgentMetrics() = default;

absl::Status AgentMetrics::Listen(const std::string& host_port) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(host_port);
  } catch (const std::exception& e) {
    return absl::UnavailableError("metrics listen " + host_port + ": " + e.what());
  }
  exposer_->RegisterCollectable(facts_);
  exposer_->RegisterCollectable(rank_);
  exposer_->RegisterCollectable(links_);
  exposer_->RegisterCollectable(registry_);
  auto ports = exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError("metrics listen " + host_port + ": no port bound");
  port_ = ports.front();
  return absl::OkStatus();
}

void AgentMetrics::SetHashProgress(uint64_t files_done, uint64_t bytes_done, uint64_t bytes_total) {
  hash_files_done_->Set(static_cast<double>(files_done));
  hash_bytes_done_->Set(static_cast<double>(bytes_done));
  hash_size_bytes_->Set(static_cast<double>(bytes_total));
}

void AgentMetrics::RecordHashDone(const v1::WeightsManifest& manifest) {
  hash_throughput_->Set(manifest.hashed_bytes_per_second());
  uint64_t read = 0;
  for (const auto& f : manifest.files()) {
    if (!f.cached() && f.error().empty()) read += f.size();
  }
  hash_bytes_total_->Increment(static_cast<double>(read));
  hashes_total_->Increment();
}

std::string AgentMetrics::Render() const {
  std::vector<prometheus::MetricFamily> all = facts_->Collect();
  for (auto& f : rank_->Collect()) all.push_back(std::move(f));
  for (auto& f : links_->Collect()) all.push_back(std::move(f));
  for (auto& f : registry_->Collect()) all.push_back(std::move(f));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, all);
  return out.str();
}

}  // namespace tandem::agentd
