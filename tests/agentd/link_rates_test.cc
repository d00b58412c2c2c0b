// Link utilisation: which interfaces the agent watches, the rate between two samples of a fake
// tree whose counter files the test rewrites (with a clock of its own), a re-created interface,
// the timer thread's start and prompt stop, and the series on the agent's /metrics (our checker
// and promtool).
#include "agentd/link_rates.h"

#include <gtest/gtest.h>

#include <iostream>
#include <thread>

#include "agentd/metrics.h"
#include "tests/common/fake_node.h"
#include "tests/common/metrics_text.h"
#include "tests/common/promtool.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
using namespace tandem::testing;  // fake node, exposition checks
using Clock = std::chrono::steady_clock;

class LinkRatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeNodeOptions o;
    FakeHca unaddressed;  // a third CX-7 function with no IPv4: not a cluster link
    unaddressed.name = "rocep2s0f0";
    unaddressed.netdev = "enp2s0f0np0";
    unaddressed.ipv4 = "";
    unaddressed.pci = "0000:02:00.0";
    o.hcas.push_back(unaddressed);
    auto [sys, proc] = WriteFakeNode(tmp_ / "node", o);
    roots_ = FactsRoots{sys, proc};
  }
  // Sets statistics/tx_bytes and rx_bytes of `ifname`, as the kernel would have them.
  void SetBytes(const std::string& ifname, uint64_t tx, uint64_t rx) {
    const std::string dir = roots_.sysfs_root + "/class/net/" + ifname + "/statistics/";
    WriteTextFile(dir + "tx_bytes", std::to_string(tx) + "\n");
    WriteTextFile(dir + "rx_bytes", std::to_string(rx) + "\n");
  }
  TempDir tmp_;
  FactsRoots roots_;
};

TEST_F(LinkRatesTest, WatchesAddressedInterfacesButLoopbackOrTheGivenList) {
  EXPECT_EQ(LinkInterfaces(roots_, {}), (std::vector<std::string>{"enP7s7", "enp1s0f0np0", "enp1s0f1np1"}));
  EXPECT_EQ(LinkInterfaces(roots_, {"enp2s0f0np0"}), (std::vector<std::string>{"enp2s0f0np0"}));
}

TEST_F(LinkRatesTest, RateIsTheDeltaOverTheTimeBetweenSamples) {
  LinkRates rates(roots_, {"enp1s0f0np0", "enp1s0f1np1"});
  SetBytes("enp1s0f0np0", 1'000'000, 2'000'000);
  SetBytes("enp1s0f1np1", 0, 0);
  const Clock::time_point t0 = Clock::now();
  rates.Sample(t0);
  std::vector<LinkRate> latest = rates.Latest();
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].interface, "enp1s0f0np0");
  EXPECT_EQ(latest[0].tx_bytes, 1'000'000u);
  EXPECT_EQ(latest[0].speed_mbps, 200000);
  EXPECT_FALSE(latest[0].has_rate) << "one sample has no rate";

  // 5 s later: 75 MB/s out (0.3% of 200 Gb/s, the inference share), 10 MB/s in.
  SetBytes("enp1s0f0np0", 1'000'000 + 375'000'000, 2'000'000 + 50'000'000);
  SetBytes("enp1s0f1np1", 0, 0);
  rates.Sample(t0 + std::chrono::seconds(5));
  latest = rates.Latest();
  ASSERT_EQ(latest.size(), 2u);
  ASSERT_TRUE(latest[0].has_rate);
  EXPECT_DOUBLE_EQ(latest[0].tx_bytes_per_second, 75e6);
  EXPECT_DOUBLE_EQ(latest[0].rx_bytes_per_second, 10e6);
  EXPECT_TRUE(latest[1].has_rate);
  EXPECT_EQ(latest[1].tx_bytes_per_second, 0);

  // The interface was re-created (counters start again): no rate until the next sample.
  SetBytes("enp1s0f0np0", 4096, 8192);
  rates.Sample(t0 + std::chrono::seconds(10));
  latest = rates.Latest();
  EXPECT_FALSE(latest[0].has_rate);
  EXPECT_EQ(latest[0].tx_bytes, 4096u);
  SetBytes("enp1s0f0np0", 4096 + 1000, 8192);
  rates.Sample(t0 + std::chrono::seconds(12));
  latest = rates.Latest();
  ASSERT_TRUE(latest[0].has_rate);
  EXPECT_DOUBLE_EQ(latest[0].tx_bytes_per_second, 500);
}

TEST_F(LinkRatesTest, AVirtualInterfacesMadeUpSpeedIsNotExported) {
  // A veth: statistics and a speed file (the kernel always says 10000), but no device/ link.
  const std::string dir = roots_.sysfs_root + "/class/net/veth0";
  WriteTextFile(dir + "/speed", "10000\n");
  SetBytes("veth0", 1, 2);
  SetBytes("enp1s0f0np0", 1, 2);
  LinkRates rates(roots_, {"veth0", "enp1s0f0np0"});
  rates.Sample(Clock::now());
  const std::vector<LinkRate> latest = rates.Latest();
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].interface, "enp1s0f0np0");
  EXPECT_EQ(latest[0].speed_mbps, 200000);
  EXPECT_EQ(latest[1].interface, "veth0");
  EXPECT_EQ(latest[1].speed_mbps, -1);
  std::string text;  // "family{interface}" per series
  for (const auto& f : LinkRateFamilies("n", latest)) {
    for (const auto& m : f.metric) text += f.name + "{" + m.label[1].value + "}\n";
  }
  EXPECT_NE(text.find("tandem_link_speed_bytes_per_second{enp1s0f0np0}"), std::string::npos) << text;
  EXPECT_EQ(text.find("tandem_link_speed_bytes_per_second{veth0}"), std::string::npos) << text;
  EXPECT_NE(text.find("tandem_link_tx_bytes_total{veth0}"), std::string::npos) << text;
}

TEST_F(LinkRatesTest, AnInterfaceWithoutCountersHasNoSeriesUntilItHasThem) {
  LinkRates rates(roots_, {"enp1s0f0np0", "gone0"});
  rates.Sample(Clock::now());
  EXPECT_TRUE(rates.Latest().empty()) << "the fake tree has no statistics yet, gone0 does not exist";
  SetBytes("enp1s0f0np0", 1, 2);
  rates.Sample(Clock::now());
  ASSERT_EQ(rates.Latest().size(), 1u);
  EXPECT_EQ(rates.Latest()[0].interface, "enp1s0f0np0");
}

TEST_F(LinkRatesTest, TimerSamplesUntilStoppedAndStopsAtOnce) {
  SetBytes("enp1s0f0np0", 100, 100);
  auto rates = std::make_shared<LinkRates>(roots_, std::vector<std::string>{"enp1s0f0np0"});
  rates->Start(std::chrono::milliseconds(20));
  ASSERT_EQ(rates->Latest().size(), 1u) << "Start samples at once";
  SetBytes("enp1s0f0np0", 100 + 4000, 100);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline && !(rates->Latest()[0].has_rate && rates->Latest()[0].tx_bytes == 4100)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(rates->Latest()[0].tx_bytes, 4100u) << "the timer did not sample";
  rates->Stop();

  // A long period does not hold up a stop: the thread waits on a condition, not a sleep.
  rates->Start(std::chrono::hours(1));
  const Clock::time_point before = Clock::now();
  rates->Stop();
  rates->Stop();  // twice is fine
  EXPECT_LT(Clock::now() - before, std::chrono::seconds(2));
}

TEST_F(LinkRatesTest, AgentMetricsExportCountersRatesAndSpeed) {
  AgentMetrics metrics(roots_, "spark-a");
  EXPECT_EQ(metrics.Render().find("tandem_link_"), std::string::npos) << "no sampler: no link series";
  auto rates = std::make_shared<LinkRates>(roots_, std::vector<std::string>{});
  for (const char* nd : {"enP7s7", "enp1s0f0np0", "enp1s0f1np1"}) SetBytes(nd, 0, 0);
  const Clock::time_point t0 = Clock::now();
  rates->Sample(t0);
  metrics.SetLinkRates(rates);
  std::string text = metrics.Render();
  EXPECT_EQ(text.find("tandem_link_tx_bytes_per_second"), std::string::npos) << "one sample: no rate yet\n" << text;
  EXPECT_EQ(SeriesValue(text, "tandem_link_tx_bytes_total{node=\"spark-a\",interface=\"enp1s0f0np0\"}"), 0.0);

  SetBytes("enp1s0f0np0", 2'500'000'000, 500'000'000);
  rates->Sample(t0 + std::chrono::seconds(5));
  text = metrics.Render();
  std::cout << text.substr(text.find("# HELP tandem_link_")) << "\n";
  EXPECT_EQ(ExpositionProblems(text), Problems{}) << text;
  EXPECT_EQ(PromtoolFindingsOrEmpty(text), "") << text;
  const std::string l = "{node=\"spark-a\",interface=\"enp1s0f0np0\"}";
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_link_tx_bytes_total" + l, 2.5e9},
                                    {"tandem_link_rx_bytes_total" + l, 5e8},
                                    {"tandem_link_tx_bytes_per_second" + l, 5e8},
                                    {"tandem_link_rx_bytes_per_second" + l, 1e8},
                                    {"tandem_link_speed_bytes_per_second" + l, 2.5e10}}),
            Problems{});
  EXPECT_NE(text.find("# TYPE tandem_link_tx_bytes_total counter"), std::string::npos);
  EXPECT_EQ(text.find("interface=\"lo\""), std::string::npos);
  EXPECT_EQ(text.find("interface=\"enp2s0f0np0\""), std::string::npos) << "no IPv4: not watched";
}

}  // namespace
}  // namespace tandem::agentd
