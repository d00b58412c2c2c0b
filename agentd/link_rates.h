// Link utilisation while serving (issue 19): the agent samples each interface's byte counters
// (statistics/tx_bytes, rx_bytes: the same counters `tandemctl linktest` reads) on a timer and
// exports them with the rate between the last two samples and the link speed, so the dashboard
// shows what fraction of the link inference uses.
//
// Why a timer and not the scrape: a rate between scrapes depends on who scrapes. Prometheus, a
// person with curl and a test hitting /metrics would each shorten the others' window and the
// gauge would jump. A fixed period (5 s by default) gives every reader the same figure; Prometheus
// can still take rate() of the _total counters over any window it likes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agentd/node_facts.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace tandem::agentd {

// One interface at the latest sample.
struct LinkRate {
  std::string interface;
  uint64_t tx_bytes = 0;  // statistics/tx_bytes at the latest sample
  uint64_t rx_bytes = 0;
  int64_t speed_mbps = -1;  // -1 unknown: down, or virtual (InterfaceCounters::has_device)
  // Bytes per second between the two latest samples; has_rate is false after the first sample
  // and after a counter went backwards (the interface was re-created).
  bool has_rate = false;
  double tx_bytes_per_second = 0;
  double rx_bytes_per_second = 0;
};

// The interfaces to watch: `configured` when it is not empty, else every interface with an IPv4
// address except lo (the cluster links; loopback traffic is the agent talking to itself).
std::vector<std::string> LinkInterfaces(const FactsRoots& roots, const std::vector<std::string>& configured);

class LinkRates {
 public:
  LinkRates(FactsRoots roots, std::vector<std::string> configured_interfaces);
  ~LinkRates();  // Stop()
  LinkRates(const LinkRates&) = delete;
  LinkRates& operator=(const LinkRates&) = delete;

  // Reads the counters of every watched interface as of `now` (tests pass their own clock). An
  // interface that cannot be read is left out until it can (it has no series meanwhile).
  void Sample(std::chrono::steady_clock::time_point now);
  // Samples at once, then every `period` on a thread of its own until Stop().
  void Start(std::chrono::milliseconds period);
  // Wakes the thread and joins it; safe to call twice or without Start().
  void Stop();

  // The latest sample, by interface name.
  std::vector<LinkRate> Latest() const;

 private:
  const FactsRoots roots_;
  const std::vector<std::string> configured_;
  mutable std::mutex mu_;
  std::map<std::string, LinkRate> latest_;            // guarded by mu_
  std::chrono::steady_clock::time_point latest_at_;  // when latest_ was read; guarded by mu_
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

// The series of `rates` for node `node`: tandem_link_tx_bytes_total / rx (counters),
// tandem_link_tx_bytes_per_second / rx (gauges; only interfaces with a rate) and
// tandem_link_speed_bytes_per_second (gauge; only interfaces with a known speed).
std::vector<prometheus::MetricFamily> LinkRateFamilies(const std::string& node, const std::vector<LinkRate>& rates);

// What /metrics exports from a LinkRates, read at scrape time; nothing until SetSource.
class LinkRatesCollectable final : public prometheus::Collectable {
 public:
  explicit LinkRatesCollectable(std::string node_name) : node_name_(std::move(node_name)) {}
  void SetSource(std::shared_ptr<const LinkRates> source);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string node_name_;
  mutable std::mutex mu_;
  std::shared_ptr<const LinkRates> source_;
};

}  // namespace tandem::agentd
