#include "agentd/link_rates.h"

#include <utility>

#include "agentd/link_counters.h"

namespace tandem::agentd {

std::vector<std::string> LinkInterfaces(const FactsRoots& roots, const std::vector<std::string>& configured) {
  if (!configured.empty()) return configured;
  std::vector<std::string> out;
  for (const v1::NetDev& nd : ReadNetDevs(roots, nullptr)) {
    if (nd.name() != "lo" && nd.ipv4_size() > 0) out.push_back(nd.name());
  }
  return out;
}

LinkRates::LinkRates(FactsRoots roots, std::vector<std::string> configured_interfaces)
    : roots_(std::move(roots)), configured_(std::move(configured_interfaces)) {}

LinkRates::~LinkRates() { Stop(); }

void LinkRates::Sample(std::chrono::steady_clock::time_point now) {
  // Read outside the lock: a scrape must not wait on sysfs.
  std::map<std::string, LinkRate> fresh;
  for (const std::string& name : LinkInterfaces(roots_, configured_)) {
    absl::StatusOr<InterfaceCounters> c = ReadInterfaceNetdevCounters(roots_, name);
    if (!c.ok()) continue;
    auto tx = c->netdev.find("tx_bytes");
    auto rx = c->netdev.find("rx_bytes");
    if (tx == c->netdev.end() || rx == c->netdev.end()) continue;
    LinkRate r;
    r.interface = name;
    r.tx_bytes = tx->second;
    r.rx_bytes = rx->second;
    // A virtual interface's speed is made up: a fraction of it would mean nothing.
    r.speed_mbps = c->has_device ? c->speed_mbps : -1;
    fresh[name] = r;
  }
  std::lock_guard<std::mutex> l(mu_);
  const double seconds = std::chrono::duration<double>(now - latest_at_).count();
  for (auto& [name, r] : fresh) {
    auto prev = latest_.find(name);
    // A counter that went backwards belongs to a re-created interface: no rate this time.
    if (prev != latest_.end() && seconds > 0 && r.tx_bytes >= prev->second.tx_bytes &&
        r.rx_bytes >= prev->second.rx_bytes) {
      r.has_rate = true;
      r.tx_bytes_per_second = static_cast<double>(r.tx_bytes - prev->second.tx_bytes) / seconds;
      r.rx_bytes_per_second = static_cast<double>(r.rx_bytes - prev->second.rx_bytes) / seconds;
    }
  }
  latest_ = std::move(fresh);
  latest_at_ = now;
}

void LinkRates::Start(std::chrono::milliseconds period) {
  Stop();
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = false;
  }
  Sample(std::chrono::steady_clock::now());
  thread_ = std::thread([this, period] {
    std::unique_lock<std::mutex> l(mu_);
    while (!wake_.wait_for(l, period, [this] { return stopping_; })) {
      l.unlock();
      Sample(std::chrono::steady_clock::now());
      l.lock();
    }
  });
}

void LinkRates::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<LinkRate> LinkRates::Latest() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<LinkRate> out;
  for (const auto& [name, r] : latest_) out.push_back(r);
  return out;
}

namespace {

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void Add(prometheus::MetricFamily& f, const std::string& node, const std::string& interface, double value) {
  prometheus::ClientMetric m;
  m.label = {{"node", node}, {"interface", interface}};
  if (f.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

}  // namespace

std::vector<prometheus::MetricFamily> LinkRateFamilies(const std::string& node, const std::vector<LinkRate>& rates) {
  using prometheus::MetricType;
  auto tx_total = Family("tandem_link_tx_bytes_total", "Bytes sent on the interface (statistics/tx_bytes).",
                         MetricType::Counter);
  auto rx_total = Family("tandem_link_rx_bytes_total", "Bytes received on the interface (statistics/rx_bytes).",
                         MetricType::Counter);
  auto tx_rate = Family("tandem_link_tx_bytes_per_second",
                        "Bytes sent per second between the agent's last two samples of the interface.",
                        MetricType::Gauge);
  auto rx_rate = Family("tandem_link_rx_bytes_per_second",
                        "Bytes received per second between the agent's last two samples of the interface.",
                        MetricType::Gauge);
  // In bytes, not bits: Prometheus's base unit (promtool refuses "bits"), and the same unit as
  // the rates, so the fraction in use is one division.
  auto speed = Family("tandem_link_speed_bytes_per_second",
                      "Negotiated speed of the interface's link in bytes per second (Mb/s x 125000).",
                      MetricType::Gauge);
  for (const LinkRate& r : rates) {
    Add(tx_total, node, r.interface, static_cast<double>(r.tx_bytes));
    Add(rx_total, node, r.interface, static_cast<double>(r.rx_bytes));
    if (r.has_rate) {
      Add(tx_rate, node, r.interface, r.tx_bytes_per_second);
      Add(rx_rate, node, r.interface, r.rx_bytes_per_second);
    }
    if (r.speed_mbps > 0) Add(speed, node, r.interface, static_cast<double>(r.speed_mbps) * 1e6 / 8);
  }
  // A family without samples would be a HELP/TYPE header with nothing under it.
  std::vector<prometheus::MetricFamily> out;
  for (auto* f : {&tx_total, &rx_total, &tx_rate, &rx_rate, &speed}) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
  return out;
}

void LinkRatesCollectable::SetSource(std::shared_ptr<const LinkRates> source) {
  std::lock_guard<std::mutex> l(mu_);
  source_ = std::move(source);
}

std::vector<prometheus::MetricFamily> LinkRatesCollectable::Collect() const {
  std::shared_ptr<const LinkRates> source;
  {
    std::lock_guard<std::mutex> l(mu_);
    source = source_;
  }
  if (!source) return {};
  return LinkRateFamilies(node_name_, source->Latest());
}

}  // namespace tandem::agentd
